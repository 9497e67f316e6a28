"""`toolslim report`: replay captured requests through a pipeline offline and show, per file and
over all files, the tokens compaction saves and how many warm requests it takes to pay back.

Reads `--capture` JSON Lines and plain request-body JSON files; no network, no aiohttp.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from toolslim.core.catalog import deferred_tools, leaf_tools, serialize
from toolslim.core.entry import parse_catalogue
from toolslim.core.envelope import is_additional_tools
from toolslim.core.pipeline import Pipeline, RunReport, TokenTotals
from toolslim.core.pipeline import count_tokens as pipeline_tokens
from toolslim.core.schema import JSON
from toolslim.core.tokens import count_tokens
from toolslim.observe.counters import break_even, percentile
from toolslim.offline.servers import (
    Call,
    ServerCounts,
    calls_of,
    count,
    count_calls,
    merge_servers,
    owners,
)
from toolslim.offline.servers import summarize as summarize_servers
from toolslim.offline.tables import LOSSY, PERCENTILES, render

# Members of which at least one is in every LLM request body toolslim knows (Anthropic,
# OpenAI Chat and Responses, Gemini): a JSON object with none of them is not a request.
REQUEST_KEYS = frozenset(
    {
        "contents",
        "input",
        "messages",
        "model",
        "system",
        "systemInstruction",
        "tools",
    }
)
CAPTURE_VERSION = 1
_WS = b" \t\r\n"


@dataclass
class Requests:
    """The request bodies read from one file (with the line each stands on, 1 for a body
    file) and the lines that could not be replayed, counted by reason and each with why."""

    bodies: list[bytes]
    lines_skipped: Counter[str] = field(default_factory=Counter)
    lines: list[int] = field(default_factory=list)
    skipped_at: list[tuple[int, str]] = field(default_factory=list)
    # Each body's answer's tool calls, where the capture recorded them (its `calls` key).
    calls: list[list[Call] | None] = field(default_factory=list)

    def skip(self, line: int, why: str) -> None:
        self.lines_skipped[why] += 1
        self.skipped_at.append((line, why))


@dataclass(frozen=True, slots=True)
class Unread:
    """Why a file gave no requests."""

    why: str


def read_file(path: str) -> Requests | Unread:
    """The requests in a capture or request-body file, or why there are none."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except IsADirectoryError:
        return Unread("it is a directory")
    except OSError as exc:
        return Unread(f"cannot read it: {exc.strerror or exc}")
    if not data.strip(_WS):
        return Unread("it is empty")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _read_lines(data)
    if _is_record(document):
        return _read_lines(data)
    if isinstance(document, dict):
        if REQUEST_KEYS.isdisjoint(document):
            keys = ", ".join(sorted(REQUEST_KEYS))
            return Unread(f"it is a JSON object with none of the request members ({keys})")
        return Requests([data], lines=[1], calls=[None])
    kind = "an array" if isinstance(document, list) else "a scalar"
    why = f"it is {kind}, not a request body (a JSON object) or a capture (JSON Lines)"
    return Unread(why)


def _is_record(value: JSON) -> bool:
    return isinstance(value, dict) and "v" in value and "body_sha256" in value


def _read_lines(data: bytes) -> Requests | Unread:
    requests = Requests([])
    records = 0
    first: str | None = None  # why the first non-blank line is not JSON, if it is not
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip(_WS):
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if not (records or requests.lines_skipped):
                first = f"line {number}: {exc.msg}"
            requests.skip(number, "not JSON")
            continue
        if not _is_record(record):
            requests.skip(number, "not a capture record")
            continue
        records += 1
        body = _record_body(record)
        if isinstance(body, str):
            requests.skip(number, body)
        else:
            requests.bodies.append(body)
            requests.lines.append(number)
            requests.calls.append(calls_of(record.get("calls")))
    if requests.bodies:
        return requests
    if records:
        why = "its capture records hold no replayable body: " + _reasons(requests.lines_skipped)
        return Unread(why)
    if first is not None:
        return Unread(f"it is neither JSON nor JSON Lines ({first})")
    why = 'it is JSON Lines without a toolslim capture record (a line with "v", "body_sha256")'
    return Unread(why)


def _record_body(record: dict[str, JSON]) -> bytes | str:
    """The body a capture line recorded as received, or why there is none."""
    if record.get("v") != CAPTURE_VERSION:
        return f"capture version {record.get('v')!r} unsupported"
    body = record.get("body")
    if isinstance(body, str):
        return body.encode("utf-8")
    encoded = record.get("body_base64")
    if isinstance(encoded, str):
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return "bad body_base64"
    return "no body stored"


def _reasons(counts: Counter[str]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))


@dataclass(frozen=True, slots=True)
class Measured:
    """One catalogue: leaf tools, tokens of its canonical form, tokens of each leaf tool, and
    its deferred tools (catalog.deferred_tools) with the tokens of their canonical list."""

    tools: int
    tokens: int
    tool_tokens: tuple[int, ...]
    deferred_tools: int = 0
    deferred_tokens: int = 0
    owners: tuple[tuple[str, bool], ...] = ()  # each leaf tool's server and deferred flag


@dataclass
class FileStats:
    """Running totals for one capture file."""

    requests: int = 0
    changed: int = 0
    tools: int = 0
    deferred_tools: int = 0
    before: int = 0
    deferred_before: int = 0  # of `before`, the deferred tools' tokens
    saved: int = 0  # in the prompt: what was removed from deferred tools is counted apart
    deferred_saved: int = 0
    input_tokens: int = 0
    tool_before: list[int] = field(default_factory=list)
    tool_after: list[int] = field(default_factory=list)
    tool_after_lossless: list[int] = field(default_factory=list)  # without toolbudget
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    skip_reasons: dict[str, Counter[str]] = field(default_factory=dict)
    servers: dict[str, ServerCounts] = field(default_factory=dict)
    answers: int = 0  # requests whose answer's tool calls the capture recorded


class Replayer:
    """Replays request bodies through one pipeline, measuring each distinct catalogue once."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self._measured: dict[bytes, Measured] = {}
        # toolbudget is lossy: the report shows per-tool tokens with and without it.
        self.lossless: Pipeline | None = None
        if LOSSY in pipeline.names:
            self.lossless = Pipeline([n for n in pipeline.names if n != LOSSY])

    def replay(self, body: bytes, stats: FileStats, calls: list[Call] | None = None) -> str | None:
        """Count one request body (and the tool calls its answer made, if recorded) into
        `stats`; or, counting nothing, why it cannot be."""
        output, report, tokens = self._run(body)
        try:
            inputs = [self._measure(c) for c in catalogues(_document(body))]
            outputs = inputs
            if output is not body:
                outputs = [self._measure(c) for c in catalogues(_document(output))]
            lossless_tools: list[int] = []
            if self.lossless is not None:
                lossless = self.lossless.run(body).body
                for catalogue in catalogues(_document(lossless)):
                    lossless_tools += self._measure(catalogue).tool_tokens
        except _Unmeasurable:
            return UNMEASURABLE
        stats.requests += 1
        stats.changed += report.changed(body)
        stats.input_tokens += count_tokens(body)
        for run in report.runs:
            stats.outcomes.setdefault(run.component, Counter())[run.outcome] += 1
            reasons = stats.skip_reasons.setdefault(run.component, Counter())
            if run.outcome == "skipped":
                reasons[run.reason or "unknown"] += 1
        stats.tools += sum(m.tools for m in inputs)
        stats.deferred_tools += sum(m.deferred_tools for m in inputs)
        stats.before += sum(m.tokens for m in inputs)
        stats.deferred_before += sum(m.deferred_tokens for m in inputs)
        removed = sum(before - after for before, after in tokens.values())
        deferred = sum(before - after for before, after in tokens.deferred.values())
        stats.saved += removed - deferred
        stats.deferred_saved += deferred
        for measured in inputs:
            stats.tool_before += measured.tool_tokens
            count(stats.servers, measured.owners, measured.tool_tokens, after=False)
        for measured in outputs:
            stats.tool_after += measured.tool_tokens
            count(stats.servers, measured.owners, measured.tool_tokens, after=True)
        if calls is not None:
            stats.answers += 1
            count_calls(stats.servers, calls)
        stats.tool_after_lossless += lossless_tools
        return None

    def _run(self, body: bytes) -> tuple[bytes, RunReport, TokenTotals]:
        if not body.strip(_WS):
            return body, self.pipeline.skip(body, "no_body"), TokenTotals()
        # What the proxy does (not compact_input, which reads a leading `[` as a bare array).
        report = self.pipeline.run(body)
        return report.body, report, pipeline_tokens(report, count_tokens)

    def _measure(self, catalogue: list[JSON]) -> Measured:
        try:
            key = hashlib.sha256(orjson.dumps(catalogue)).digest()
        except orjson.JSONEncodeError:  # deeper than orjson writes: the pipeline may still
            key = hashlib.sha256(_canonical(catalogue)).digest()
        measured = self._measured.get(key)
        if measured is None:
            # Written whole first: tools nested too deep make it unmeasurable here, before
            # leaf_tools (which refuses the same depth with TooDeep) walks them.
            tokens = count_tokens(_canonical(catalogue))
            leaves = leaf_tools(catalogue)
            per_tool = tuple(count_tokens(_canonical([leaf])[1:-1]) for leaf in leaves)
            # As the pipeline counts them: the deferred tools written as one list.
            deferred = deferred_tools(catalogue)
            deferred_tokens = count_tokens(_canonical(deferred)) if deferred else 0
            owned = owners(catalogue)
            measured = Measured(
                len(leaves), tokens, per_tool, len(deferred), deferred_tokens, owned
            )
            self._measured[key] = measured
        return measured


class _Unmeasurable(Exception):
    """A catalogue the pipeline's own writer cannot write back to count its tokens (nested
    deeper than it writes, lone surrogates): the pipeline passes it through untouched."""


UNMEASURABLE = "a catalogue too deep or with lone surrogates to measure"


def _canonical(catalogue: list[JSON]) -> bytes:
    """The canonical form the pipeline counts tokens on."""
    try:
        return serialize(catalogue)
    except Exception as exc:  # TooDeep, lone surrogates: the pipeline skips it as well
        raise _Unmeasurable from exc


def _document(body: bytes) -> JSON:
    """The parsed body (numbers spelled as sent), or None when it is not JSON."""
    try:
        return parse_catalogue(body)
    except Exception:  # duplicate keys, deep nesting: orjson's last-wins reading still works
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return None


def catalogues(document: JSON) -> list[list[JSON]]:
    """Every tool catalogue in a request: top-level `tools` and the `tools` of Codex's
    `{"type": "additional_tools"}` items of `input`."""
    if not isinstance(document, dict):
        return []
    found = []
    tools = document.get("tools")
    if isinstance(tools, list) and tools:
        found.append(tools)
    items = document.get("input")
    if isinstance(items, list):
        found += [item["tools"] for item in items if is_additional_tools(item)]
    return found


def summarize(
    name: str, stats: FileStats, read: float, write: float, lines_skipped: Counter[str]
) -> dict[str, Any]:
    """The per-file numbers, with the stable keys `--json` prints (documented in
    docs/captures.md)."""
    n = stats.requests
    before = stats.before / n
    saved = stats.saved / n
    # The break-even is the prompt's: deferred tools are in neither P nor s.
    prompt = (stats.before - stats.deferred_before) / n
    before_sorted, after_sorted = sorted(stats.tool_before), sorted(stats.tool_after)
    return {
        "file": name,
        "requests": n,
        "requests_changed": stats.changed,
        "lines_skipped": dict(sorted(lines_skipped.items())),
        "tools_per_request": stats.tools / n,
        "catalogue_tokens_before": before,
        "catalogue_tokens_after": (stats.before - stats.saved - stats.deferred_saved) / n,
        "tokens_saved_per_request": saved,
        "input_tokens_per_request": stats.input_tokens / n,
        "saved_percent_of_input": (
            100 * stats.saved / stats.input_tokens if stats.input_tokens else None
        ),
        "cache_read_multiplier": read,
        "cache_write_multiplier": write,
        "break_even_requests": break_even(prompt, saved, read, write),
        "tool_tokens": {
            "tools": len(before_sorted),
            "before": _percentiles(before_sorted),
            "after": _percentiles(after_sorted),
            **(
                {f"after_without_{LOSSY}": _percentiles(sorted(stats.tool_after_lossless))}
                if stats.tool_after_lossless
                else {}
            ),
        },
        "components": {
            component: {
                "applied": counts["applied"],
                "skipped": counts["skipped"],
                "error": counts["error"],
                "skip_reasons": dict(sorted(stats.skip_reasons[component].items())),
            }
            for component, counts in stats.outcomes.items()
        },
        "deferred_tools_per_request": stats.deferred_tools / n,
        "deferred_catalogue_tokens_before": stats.deferred_before / n,
        "deferred_tokens_saved_per_request": stats.deferred_saved / n,
        "servers": summarize_servers(stats.servers, n, stats.input_tokens, stats.answers),
    }


def totals(files: Sequence[FileStats]) -> dict[str, Any]:
    """The numbers over every request of every file: sums, and means per request."""
    requests = sum(f.requests for f in files)
    before = sum(f.before for f in files)
    saved = sum(f.saved for f in files)
    deferred = sum(f.deferred_saved for f in files)
    input_tokens = sum(f.input_tokens for f in files)
    return {
        "files": len(files),
        "requests": requests,
        "requests_changed": sum(f.changed for f in files),
        "catalogue_tokens_before": before,
        "catalogue_tokens_after": before - saved - deferred,
        "tokens_saved_per_request": saved / requests,
        "saved_percent_of_input": 100 * saved / input_tokens if input_tokens else None,
        "deferred_tokens_saved_per_request": deferred / requests,
        "servers": summarize_servers(
            merge_servers(f.servers for f in files),
            requests,
            input_tokens,
            sum(f.answers for f in files),
        ),
    }


def _percentiles(ordered: list[int]) -> dict[str, int | None]:
    out = {f"p{p}": percentile(ordered, p) for p in PERCENTILES}
    out["max"] = ordered[-1] if ordered else None
    return out


def run_report(
    files: list[str],
    pipeline: Pipeline,
    *,
    as_json: bool,
    read_multiplier: float,
    write_multiplier: float,
    out: TextIO,
    err: TextIO,
    verbose: bool = False,
) -> int:
    """Replay each file's requests and print the report (or, `as_json`, one JSON list of the
    files' numbers). The multipliers come checked (config.py).

    Each file that gives no request is named on stderr with why, one line each, in the order
    given; a file with lines that could not be replayed gets one line counting them by reason,
    and with `verbose` one more line per such line, naming its number. Exit status 0 when at
    least one request was measured, else 2.
    """
    replayer = Replayer(pipeline)
    summaries = []
    measured: list[FileStats] = []
    for name in files:
        requests = read_file(name)
        if isinstance(requests, Unread):
            print(f"toolslim report: skipped {name}: {requests.why}", file=err)
            continue
        stats = FileStats()
        for line, body, calls in zip(requests.lines, requests.bodies, requests.calls, strict=True):
            if (why := replayer.replay(body, stats, calls)) is not None:
                requests.skip(line, why)
        if not stats.requests:
            why = _reasons(requests.lines_skipped)
            print(f"toolslim report: skipped {name}: no request could be measured: {why}", file=err)
            continue
        if requests.lines_skipped:
            print(
                f"toolslim report: {name}: skipped {sum(requests.lines_skipped.values())} "
                f"line(s): {_reasons(requests.lines_skipped)}",
                file=err,
            )
            if verbose:
                for line, why in sorted(requests.skipped_at):
                    print(f"toolslim report: {name}:{line}: skipped: {why}", file=err)
        measured.append(stats)
        summaries.append(
            summarize(name, stats, read_multiplier, write_multiplier, requests.lines_skipped)
        )
    if not summaries:
        print(
            f"toolslim report: no requests read from {len(files)} file(s): "
            "give --capture JSON Lines or request-body JSON files",
            file=err,
        )
        return 2
    if as_json:
        out.write(orjson.dumps(summaries, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render(summaries, totals(measured)) + "\n")
    return 0
