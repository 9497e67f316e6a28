"""Tool health on the proxy: the lint findings each request's catalogue carries for the
provider it goes to (found once per catalogue), their counts and WARNINGs, and what an
upstream's 400 to such a request was: explained by a finding, or not.

`Health` is the counters (Stats owns one, its snapshot is /stats `lint`); `Linter` is what the
Ledger calls: on each request before it is sent, and on each answer once it is known. Lint only
observes: no byte of a request or an answer changes.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson

from toolslim.core.facts import CatalogueFacts
from toolslim.core.lint import PROVIDER_OF, RULES, Finding
from toolslim.wire import codings

log = logging.getLogger("toolslim.proxy.lint")

FINDINGS_KEPT: Final = 50  # distinct findings /stats lists, newest first
LINTED: Final = 256  # (catalogue, API) pairs whose findings are remembered (and warned about)
# ... and the bytes they may take, estimated: a pair's key and slot, and each finding (its
# texts: detail and fix run to a few hundred characters).
LINTED_BYTES: Final = 2**20
PAIR_BYTES: Final = 250
FINDING_BYTES: Final = 600
ANSWER_HEAD: Final = 16 * 1024  # bytes of a 400 answer kept to read the tool it names
ANSWER_DECODED: Final = 64 * 1024  # of a compressed one, decoded bytes read at most
UNEXPLAINED: Final = "unexplained"
# An error text that points into the tool list or a tool schema (Anthropic `tools.3.custom`,
# OpenAI `tools[3].function`, Gemini `function_declarations[3]`, a schema field's name).
_SCHEMA_FIELD: Final = re.compile(
    r"tools(?:\.\d|\[\d)|function_declarations|functionDeclarations|input_schema|parameters"
)
_PLACE: Final = re.compile(r"tools(?:\.(\d+)|\[(\d+)\])(?:\.function_declarations\[(\d+)\])?")


class Health:
    """The lint counters: requests that carried a finding (in all, and by rule), upstream
    rejections by the rule that explains them, and the distinct findings, newest first."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.requests = 0
        self.by_rule = {rule: [0, 0] for rule in RULES}  # requests, upstream rejections
        self.unexplained = 0
        self.held = 0  # bytes the Linter's remembered findings take (estimated)
        self.max_bytes = LINTED_BYTES
        # (rule, provider, tool, detail) -> the finding as /stats lists it, oldest first.
        self.findings: OrderedDict[tuple[str, str, str, str], dict[str, Any]] = OrderedDict()

    def record_request(self, rules: Sequence[str]) -> None:
        """One request whose catalogues carry findings of these (distinct) rules."""
        self.requests += 1
        by_rule = self.by_rule
        for rule in rules:
            by_rule[rule][0] += 1

    def record_findings(self, findings: Sequence[Finding]) -> None:
        """Findings of a catalogue seen for the first time (or again after LINTED others)."""
        now = self.clock()
        kept = self.findings
        for finding in findings:
            key = (finding.rule, finding.provider, finding.tool, finding.detail)
            if key not in kept:  # the same tool in another catalogue: when it was first seen
                kept[key] = as_dict(finding, now)
                if len(kept) > FINDINGS_KEPT:
                    kept.popitem(last=False)

    def record_rejection(self, rule: str | None) -> None:
        """An upstream 400 that a finding of `rule` explains (None: that none does)."""
        if rule is None:
            self.unexplained += 1
        else:
            self.by_rule[rule][1] += 1

    def snapshot(self) -> dict[str, Any]:
        explained = sum(counts[1] for counts in self.by_rule.values())
        return {
            "requests": self.requests,
            "rules": {
                rule: {
                    "severity": RULES[rule].severity,
                    "requests": requests,
                    "upstream_rejections": rejections,
                }
                for rule, (requests, rejections) in self.by_rule.items()
            },
            "upstream_rejections": {"explained": explained, UNEXPLAINED: self.unexplained},
            "findings": list(reversed(self.findings.values())),
        }


def as_dict(finding: Finding, seen_at: float) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity,
        "provider": finding.provider,
        "tool": finding.tool,
        "server": finding.server,
        "detail": finding.detail,
        "fix": finding.fix,
        "seen_at": seen_at,
    }


def merge_findings(values: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every worker's distinct findings as one list: the same finding once (first seen), newest
    first, at most FINDINGS_KEPT (observe/fleet.py's RULES)."""
    kept: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for value in values:
        for finding in value:
            key = (finding["rule"], finding["provider"], finding["tool"], finding["detail"])
            if key not in kept or finding["seen_at"] < kept[key]["seen_at"]:
                kept[key] = finding
    return sorted(kept.values(), key=lambda f: f["seen_at"], reverse=True)[:FINDINGS_KEPT]


class Linter:
    """Finds each request's lint findings (once per catalogue and API) and counts them; reads
    an upstream's 400 to a request for the tool it names and counts the rejection."""

    def __init__(self, health: Health, max_bytes: int = LINTED_BYTES) -> None:
        self.health = health
        health.max_bytes = max_bytes
        # (catalogue digest, API) -> its findings: a catalogue met again in new facts (a memo
        # entry that is not the most recent) is not linted again, nor warned about.
        self._linted: OrderedDict[tuple[bytes, str], tuple[Finding, ...]] = OrderedDict()
        self._recent: CatalogueFacts | None = None  # the one-catalogue facts linted last
        # The findings counted last and their distinct rules, made once per catalogue.
        self._rules: tuple[tuple[Finding, ...], tuple[str, ...]] = ((), ())

    def request(
        self, api: str, catalogues: Sequence[CatalogueFacts], method: str, path: str
    ) -> tuple[Finding, ...]:
        """The findings of the request's catalogues for the provider behind `api`, counted;
        each is logged once (a WARNING) the first time its catalogue is seen."""
        if len(catalogues) == 1:  # the usual request: a session's turns bring the same facts
            facts = catalogues[0]
            found = facts.known_findings(api) if facts is self._recent else None
            if found is None:
                if api not in PROVIDER_OF:
                    return ()
                found = self._of(facts, api, method, path)
                self._recent = facts
        elif not catalogues or api not in PROVIDER_OF:
            return ()
        else:
            found = tuple(f for c in catalogues for f in self._of(c, api, method, path))
        if found:
            kept, rules = self._rules
            if found is not kept:  # a session's memo hits carry the very same findings
                rules = tuple(dict.fromkeys(f.rule for f in found))
                self._rules = (found, rules)
            self.health.record_request(rules)
        return found

    def _of(self, facts: CatalogueFacts, api: str, method: str, path: str) -> tuple[Finding, ...]:
        key = (facts.digest, api)
        found = self._linted.get(key)
        if found is None:  # first seen: found by transform already, or now
            found = facts.findings(api)
            self._linted[key] = found
            health = self.health
            health.held += _linted_bytes(found)
            while len(self._linted) > 1 and (
                len(self._linted) > LINTED or health.held > health.max_bytes
            ):  # the least recently used first
                _, dropped = self._linted.popitem(last=False)
                health.held -= _linted_bytes(dropped)
            self.health.record_findings(found)
            for finding in found:
                log.warning("lint %s (%s %s): %s", _line(finding), method, path, finding.fix)
        else:
            self._linted.move_to_end(key)
            if facts.known_findings(api) is None:
                facts.remember_findings(api, found)
        return found

    def answered(
        self,
        api: str,
        status: int,
        findings: Sequence[Finding],
        answer: bytes,
        encoding: str | None,
        tools: Sequence[str],
        where: str,
    ) -> None:
        """Count an upstream's 400 to a request whose catalogue has a `rejected` finding or
        whose error text names a tool or a schema field, by the finding that explains it;
        log one line that names the tool. `tools` are the request's tool names in order; an
        API without a provider (`other`) is never linted, so its 400s are not read."""
        if status != 400 or api not in PROVIDER_OF:
            return
        text = _text(answer, encoding)
        named = _named(text, tools)
        rejected = any(f.severity == "rejected" for f in findings)
        if not (rejected or named or _SCHEMA_FIELD.search(text)):
            return  # a 400 about something else: the messages, a parameter
        finding = explaining(findings, text, named)
        self.health.record_rejection(None if finding is None else finding.rule)
        if finding is not None:
            log.warning("upstream refused %s (400): %s: %s", where, _line(finding), finding.fix)
        else:
            tool = orjson.dumps(named[0]).decode() if named else "no tool"
            log.warning("upstream refused %s (400), unexplained by lint; it names %s", where, tool)


def _linted_bytes(found: Sequence[Finding]) -> int:
    return PAIR_BYTES + FINDING_BYTES * len(found)


def explaining(findings: Sequence[Finding], text: str, named: Sequence[str]) -> Finding | None:
    """The finding that explains an upstream's error `text` which names the tools `named`:
    one of a named tool whose rule's quoted error is in the text, else one of a named tool,
    else one whose rule's quoted error is in the text, else, when the text names no tool, the
    first `rejected` one. An error about a tool lint found nothing wrong with stays unexplained."""
    quoted = [bool(RULES[f.rule].quoted) and RULES[f.rule].quoted in text for f in findings]
    tiers = (
        lambda f, q: f.tool in named and q,
        lambda f, q: f.tool in named,
        lambda f, q: q,
        lambda f, q: not named and f.severity == "rejected",
    )
    for tier in tiers:
        for finding, said in zip(findings, quoted, strict=True):
            if tier(finding, said):
                return finding
    return None


def _text(answer: bytes, encoding: str | None) -> str:
    """The answer's text: its JSON strings joined (escapes read), else its bytes as UTF-8."""
    try:
        decoder = codings.decoder(encoding)
        if decoder is not None:
            answer = decoder.decode(answer, ANSWER_DECODED)
    except codings.CodingError:
        return ""
    try:
        value = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return answer.decode("utf-8", "replace")
    strings: list[str] = []
    _strings(value, strings, 0)
    return "\n".join(strings)


def _strings(value: Any, out: list[str], depth: int) -> None:
    if isinstance(value, str):
        out.append(value)
    elif depth < 16 and isinstance(value, dict):
        for item in value.values():
            _strings(item, out, depth + 1)
    elif depth < 16 and isinstance(value, list):
        for item in value:
            _strings(item, out, depth + 1)


def _named(text: str, tools: Sequence[str]) -> list[str]:
    """The tools an error text names: at the place it points to (`tools.3`, `tools[0]...
    function_declarations[3]`), or quoted by name."""
    named = []
    match = _PLACE.search(text)
    if match is not None:
        index = int(match.group(3) or match.group(1) or match.group(2))
        if index < len(tools):
            named.append(tools[index])
    named.extend(
        name for name in tools if name not in named and (f"'{name}'" in text or f'"{name}"' in text)
    )
    return named


def _line(finding: Finding) -> str:
    """A finding as one log line; tool and server names are the client's data, so they are
    written as JSON strings (nothing in them can start a new line)."""
    return (
        f"{finding.rule} ({finding.severity}, {finding.provider}) tool="
        f"{orjson.dumps(finding.tool).decode()} server={orjson.dumps(finding.server).decode()}"
        f" {orjson.dumps(finding.detail).decode()}"
    )
