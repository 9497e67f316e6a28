"""PURE. Raw request bytes in, raw bytes out: find each tool catalogue in the body, rewrite it
through the catalogue components (memoized by SHA-256 of its exact bytes) and splice it back,
leaving every other byte of the body untouched. Never raises; says why when it skips.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import orjson

from toolslim.catalog import Rewrite, canonical, rewrite_catalogue
from toolslim.schema import JSON, TooDeep

Outcome = Literal["applied", "skipped", "error"]

_WS = b" \t\r\n"
_TOOLS_KEY = b'"tools"'
# A string token (escapes included) and the next structural byte, for skipping values.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURAL = re.compile(rb'["\[\]{}]')
_SCALAR = re.compile(rb"[^\s,\]}]+")
# `"tools"` spelled with \u escapes: no serializer writes letters that way, so a body holding
# such an escape takes the slow, exact path instead of the byte search.
_ESCAPED_LETTER = re.compile(rb"\\u00[67]")
_PREFIX = 64  # bytes of a catalogue that index it for the memo-hit byte comparison


class DuplicateKey(ValueError):
    """A JSON object in the catalogue names the same key twice (readers disagree on it)."""


@dataclass(frozen=True, slots=True)
class CatalogueRun:
    """What one component did to one catalogue."""

    outcome: Outcome
    reason: str | None = None
    tools_seen: int = 0
    tools_changed: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    bytes_before: int = 0
    bytes_after: int = 0


class Entry:
    """A memoized rewrite of one exact catalogue: the same input bytes give the same output."""

    def __init__(
        self,
        raw: bytes,
        output: bytes | None,
        runs: tuple[CatalogueRun, ...],
        stages: tuple[bytes, ...] = (),
        errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        self.raw = raw
        self.output = output  # None: keep the original bytes (skip)
        self.runs = runs
        self.errors = errors  # (component index, "ExcType: message")
        self._stages = stages  # canonical stage bytes, kept until tokens are counted
        self._tokens: tuple[int, ...] | None = None
        self._lock = threading.Lock()

    def token_counts(self, count: Callable[[bytes], int]) -> tuple[int, ...]:
        """Tokens of each canonical stage, counted once (thread-safe), then the bytes dropped."""
        with self._lock:
            if self._tokens is None:
                self._tokens = tuple(count(stage) for stage in self._stages)
                self._stages = ()
            return self._tokens


class Memo:
    """Bounded LRU of catalogue rewrites keyed by SHA-256 of the exact incoming bytes.

    A second index by the catalogue's first bytes lets a memo hit be proven by one byte
    comparison inside the body, without parsing the body or hashing the catalogue.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._entries: OrderedDict[bytes, Entry] = OrderedDict()
        self._by_prefix: dict[bytes, list[bytes]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, raw: bytes) -> Entry | None:
        key = hashlib.sha256(raw).digest()
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, entry: Entry) -> None:
        if self.capacity == 0:
            return
        key = hashlib.sha256(entry.raw).digest()
        if key not in self._entries:
            self._by_prefix.setdefault(entry.raw[:_PREFIX], []).append(key)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            old_key, old = self._entries.popitem(last=False)
            keys = self._by_prefix[old.raw[:_PREFIX]]
            keys.remove(old_key)
            if not keys:
                del self._by_prefix[old.raw[:_PREFIX]]

    def match_at(self, body: bytes, start: int) -> Entry | None:
        """The memoized catalogue whose exact bytes stand in `body` at `start`, if any."""
        for key in self._by_prefix.get(body[start : start + _PREFIX], ()):
            entry = self._entries[key]
            if body.startswith(entry.raw, start):
                self._entries.move_to_end(key)
                return entry
        return None

    def clear(self) -> None:
        self._entries.clear()
        self._by_prefix.clear()


@dataclass(frozen=True, slots=True)
class Compacted:
    """The body to forward and, per catalogue found, its memo entry and whether it was a hit."""

    body: bytes
    catalogues: tuple[tuple[Entry, bool], ...] = ()
    reason: str | None = None  # why the body as a whole was skipped (then no catalogues)


def compact(body: bytes, memo: Memo, components: Sequence[Rewrite]) -> Compacted:
    """Rewrite every catalogue in `body`; the same `body` object comes back when none changed."""
    try:
        found = _memo_hit(body, memo)
        if found is None:
            located = _locate(body)
            if isinstance(located, str):
                return Compacted(body, reason=located)
            found = []
            for start, end in located:
                raw = body[start:end]
                entry = memo.get(raw)
                hit = entry is not None
                if entry is None:
                    entry = rewrite(raw, components)
                    memo.put(entry)
                found.append((start, entry, hit))
        return Compacted(_splice(body, found), tuple((e, hit) for _, e, hit in found))
    except Exception as exc:  # fail open: the body goes on exactly as it came
        return Compacted(body, reason=f"error:{type(exc).__name__}")


def _splice(body: bytes, found: list[tuple[int, Entry, bool]]) -> bytes:
    parts: list[bytes] = []
    position = 0
    for start, entry, _ in sorted(found, key=lambda f: f[0]):
        if entry.output is None:
            continue
        parts += (body[position:start], entry.output)
        position = start + len(entry.raw)
    if not parts:
        return body
    parts.append(body[position:])
    return b"".join(parts)


def _memo_hit(body: bytes, memo: Memo) -> list[tuple[int, Entry, bool]] | None:
    """The top-level catalogue as a memo hit, proven without parsing the whole body.

    A candidate `"tools":` whose value bytes equal a memoized catalogue is the top-level key
    when the shorter side of the body parses with a closer (head + `}`) or an opener
    (`{` + tail): a JSON prefix or suffix balances only at depth 1, and a candidate inside a
    string fails to parse. Anything unusual returns None and takes the full path.
    """
    if not len(memo) or b"additional_tools" in body:
        return None
    candidates = _key_candidates(body, _TOOLS_KEY)
    if not candidates:
        return None
    key_start, value_start = candidates[0]
    entry = memo.match_at(body, value_start)
    if entry is None:
        return None
    value_end = value_start + len(entry.raw)
    if any(k < key_start or k >= value_end for k, _ in candidates[1:]):
        return None  # another `"tools":` outside this value: let the full parse decide
    if _ESCAPED_LETTER.search(body) is not None:
        return None
    if not _is_top_level_member(body, key_start, value_end):
        return None
    return [(value_start, entry, True)]


def _key_candidates(body: bytes, key: bytes) -> list[tuple[int, int]]:
    """(key start, value start) of every `"key"` followed by optional space and a colon."""
    found = []
    at = body.find(key)
    while at != -1:
        colon = _skip_ws(body, at + len(key))
        # In valid JSON a quote after a backslash is escaped or closes a string: never a key.
        escaped = at > 0 and body[at - 1] == 0x5C
        if not escaped and colon < len(body) and body[colon] == 0x3A:  # ':'
            found.append((at, _skip_ws(body, colon + 1)))
        at = body.find(key, at + 1)
    return found


def _skip_ws(body: bytes, at: int) -> int:
    while at < len(body) and body[at] in _WS:
        at += 1
    return at


def _is_top_level_member(body: bytes, key_start: int, value_end: int) -> bool:
    """Whether the member spanning [key_start, value_end) sits at depth 1 of the body."""
    head = body[:key_start].strip(_WS)
    tail = body[value_end:].lstrip(_WS)
    try:
        if len(head) <= len(tail):
            if head == b"{":
                return True
            return head.endswith(b",") and isinstance(orjson.loads(head[:-1] + b"}"), dict)
        if tail.startswith(b"}"):
            return tail[1:].strip(_WS) == b""
        return tail.startswith(b",") and isinstance(orjson.loads(b"{" + tail[1:]), dict)
    except orjson.JSONDecodeError:
        return False


def _locate(body: bytes) -> list[tuple[int, int]] | str:
    """Byte spans of every catalogue in the body, or the reason there are none to rewrite."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return "too_deep" if "recursion" in str(exc).lower() else "not_json"
    if not isinstance(document, dict):
        return "unsupported_shape"
    spans: list[tuple[int, int]] = []
    if "tools" in document:
        tools = document["tools"]
        if not isinstance(tools, list):
            return "unsupported_shape"
        if tools:
            span = _top_level_span(body, "tools", tools)
            if isinstance(span, str):
                return span
            spans.append(span)
    items = document.get("input")
    if isinstance(items, list) and any(_is_additional_tools(item) for item in items):
        nested = _additional_tools_spans(body, items)
        if isinstance(nested, str):
            return nested
        spans += nested
    return spans or "no_tools"


def _is_additional_tools(item: JSON) -> bool:
    """Codex CLI's input item that carries more tools when it sends no top-level `tools`."""
    return (
        isinstance(item, dict)
        and item.get("type") == "additional_tools"
        and isinstance(item.get("tools"), list)
        and bool(item["tools"])
    )


def _top_level_span(body: bytes, key: str, value: JSON) -> tuple[int, int] | str:
    """The byte span of a top-level member's value in a body known to be valid JSON."""
    if _ESCAPED_LETTER.search(body) is not None and _top_level_key_count(body, key) != 1:
        return "duplicate_keys"
    compact_value = orjson.dumps(value)
    spans = []
    for key_start, value_start in _key_candidates(body, b'"' + key.encode() + b'"'):
        if body.startswith(compact_value, value_start):
            value_end = value_start + len(compact_value)
        else:
            try:
                value_end = _skip_value(body, value_start)
            except ValueError:
                continue
        if _is_top_level_member(body, key_start, value_end):
            spans.append((value_start, value_end))
    if len(spans) != 1:
        return "duplicate_keys" if spans else "unsupported_shape"
    return spans[0]


def _top_level_key_count(body: bytes, key: str) -> int:
    pairs = json.loads(body, object_pairs_hook=lambda p: p)
    return sum(1 for name, _ in pairs if name == key)


def _additional_tools_spans(body: bytes, items: list[JSON]) -> list[tuple[int, int]] | str:
    """Spans of `input[i].tools` for Codex's additional_tools items, by an exact scan."""
    span = _top_level_span(body, "input", items)
    if isinstance(span, str):
        return span
    spans = []
    at = _skip_ws(body, span[0] + 1)  # inside the `[`
    for item in items:
        end = _skip_value(body, at)
        if _is_additional_tools(item):
            member = _member_span(body, at, "tools")
            if member is None:
                return "unsupported_shape"
            spans.append(member)
        at = _skip_ws(body, end)
        if body[at : at + 1] == b",":
            at = _skip_ws(body, at + 1)
    return spans


def _member_span(body: bytes, obj_start: int, key: str) -> tuple[int, int] | None:
    """The value span of member `key` of the object at `obj_start` (one occurrence only)."""
    at = _skip_ws(body, obj_start + 1)
    found = None
    while body[at : at + 1] == b'"':
        key_end = _skip_value(body, at)
        name = json.loads(body[at:key_end])
        value_start = _skip_ws(body, _skip_ws(body, key_end) + 1)
        value_end = _skip_value(body, value_start)
        if name == key:
            if found is not None:
                return None
            found = (value_start, value_end)
        at = _skip_ws(body, value_end)
        if body[at : at + 1] == b",":
            at = _skip_ws(body, at + 1)
    return found


def _skip_value(body: bytes, at: int) -> int:
    """The end of the JSON value starting at `at` (the body is known to be valid JSON)."""
    first = body[at : at + 1]
    if first == b'"':
        match = _STRING.match(body, at)
        if match is None:
            raise ValueError("not a JSON value")
        return match.end()
    if first not in (b"[", b"{"):
        match = _SCALAR.match(body, at)
        if match is None:
            raise ValueError("not a JSON value")
        return match.end()
    depth = 0
    while True:
        match = _STRUCTURAL.search(body, at)
        if match is None:
            raise ValueError("not a JSON value")
        at = match.start()
        char = body[at]
        if char == 0x22:  # '"'
            string = _STRING.match(body, at)
            if string is None:
                raise ValueError("unterminated string")
            at = string.end()
            continue
        depth += 1 if char in (0x5B, 0x7B) else -1
        at += 1
        if depth == 0:
            return at


def parse_catalogue(raw: bytes) -> JSON:
    """Parse catalogue bytes keeping every number's spelling and refusing duplicate keys.

    Fast path: orjson, proven exact when re-serializing reproduces the bytes. Otherwise the
    stdlib parser keeps each number as an orjson.Fragment of its original text (so `1.0`,
    `1e3`, `-0` and integers past 64 bits survive) and rejects duplicate keys.
    """
    try:
        value = orjson.loads(raw)
        if orjson.dumps(value) == raw:
            return value
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower():
            raise TooDeep(str(exc)) from exc
    text = raw.decode("utf-8")
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_float=orjson.Fragment,
            parse_int=orjson.Fragment,
            parse_constant=_reject_constant,
        )
    except RecursionError as exc:
        raise TooDeep("nesting") from exc


def _unique_pairs(pairs: list[tuple[str, JSON]]) -> dict[str, JSON]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise DuplicateKey(next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])))
    return obj


def _reject_constant(name: str) -> JSON:
    raise ValueError(f"{name} is not JSON")


def serialize(catalogue: JSON) -> bytes:
    """Compact, raw UTF-8, keys in the order given (callers pass the canonical form)."""
    return orjson.dumps(catalogue)


def rewrite(raw: bytes, components: Sequence[Rewrite]) -> Entry:
    """Run the components over one catalogue and decide whether to adopt the result."""
    names = len(components)
    try:
        catalogue = parse_catalogue(raw)
    except TooDeep:
        return _skipped(raw, names, "too_deep")
    except DuplicateKey:
        return _skipped(raw, names, "duplicate_keys")
    except (ValueError, UnicodeDecodeError):
        return _skipped(raw, names, "not_json")
    if not isinstance(catalogue, list):
        return _skipped(raw, names, "unsupported_shape")
    try:
        stages = [serialize(canonical(catalogue))]
    except TooDeep:
        return _skipped(raw, names, "too_deep")
    except orjson.JSONEncodeError:
        return _skipped(raw, names, "not_json")  # e.g. a lone surrogate escape
    changes = []
    errors = []
    current = catalogue
    for index, component in enumerate(components):
        try:
            new, change = rewrite_catalogue(current, component)
            stage = stages[-1] if new is current else serialize(canonical(new))
        except Exception as exc:  # one component failing must not stop the others
            errors.append((index, f"{type(exc).__name__}: {exc}"))
            new, change, stage = current, None, stages[-1]
        changes.append((change, new is not current))
        stages.append(stage)
        current = new
    output = stages[-1]
    adopted = len(output) < len(raw)
    runs = []
    failed = {index for index, _ in errors}
    before = len(raw)
    for index, (change, changed) in enumerate(changes):
        if index in failed or change is None:
            runs.append(CatalogueRun("error", dict(errors)[index].split(":")[0]))
            continue
        after = len(stages[index + 1])
        acted = changed or (index == 0 and after < before)
        if adopted and acted:
            runs.append(
                CatalogueRun(
                    "applied",
                    None,
                    change.tools_seen,
                    change.tools_changed,
                    change.removed,
                    before,
                    after,
                )
            )
            before = after
        else:
            # Not adopted: say whether this component had something to do at all.
            canonicalized = index == 0 and stages[0] != raw
            reason = (
                "not_smaller" if not adopted and (changed or canonicalized) else "nothing_to_strip"
            )
            runs.append(
                CatalogueRun(
                    "skipped", reason, change.tools_seen, change.tools_changed, change.removed
                )
            )
    if not adopted:
        return Entry(raw, None, tuple(runs), errors=tuple(errors))
    return Entry(raw, output, tuple(runs), tuple(stages), tuple(errors))


def _skipped(raw: bytes, names: int, reason: str) -> Entry:
    return Entry(raw, None, tuple(CatalogueRun("skipped", reason) for _ in range(names)))
