"""PURE. Raw request bytes in, raw bytes out: find each tool catalogue in the body, rewrite it
through the catalogue components (memoized by SHA-256 of its exact bytes) and splice it back,
leaving every other byte of the body untouched. Never raises; says why when it skips.

The catalogue is the value of the body's last top-level member spelled `"tools"` (what
last-wins JSON readers use), plus, in OpenAI Responses bodies, the `tools` of each
`{"type": "additional_tools"}` item of `input` (Codex CLI). Both paths below, the memo-hit byte
search and the full parse, find exactly these, so the output never depends on memo state. The
one exception is a body that is not JSON on the side of the catalogue the memo-hit proof does
not read (the longer one): the full parse forwards it as it came, a memo hit compacted, and
either way the upstream gets it as broken as it came.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from toolslim.catalog import Rewrite, rewrite_catalogue, serialize
from toolslim.schema import JSON, TooDeep, is_too_deep

Outcome = Literal["applied", "skipped", "error"]

_WS = b" \t\r\n"
_TOOLS_KEY = b'"tools"'
_ADDITIONAL_TOOLS = b'"additional_tools"'
# APIs whose bodies cannot carry Codex's additional_tools items (they have no `input` list).
_NO_ADDITIONAL_TOOLS = frozenset({"anthropic", "openai-chat", "gemini"})
# A string token (escapes included) and the next structural byte, for skipping values.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURAL = re.compile(rb'["\[\]{}]')
_SCALAR = re.compile(rb"[^\s,\]}]+")
_PREFIX = 64  # bytes of a catalogue that index it for the memo-hit byte comparison
_MAX_CANDIDATES = 64  # `"tools":` keys the hit path looks at before it hands over
_TAIL_WINDOW = 64 * 1024  # bytes after a catalogue the reverse search looks through
# Bytes after the last catalogue that are sent joined to its output, and that an entry keeps
# as a rest it was proven with (Entry.layouts).
_SHORT_TAIL = 1024
# Rests an entry keeps, most recently used first. Sessions sharing a catalogue end their bodies
# differently (Claude Code's metadata.user_id): with one kept, two sessions taking turns
# missed both on every turn (in process at 80 KB: 11.0 us per hit, 6.8 with four kept).
_RESTS = 4


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


class StageTokens:
    """Token counts of one catalogue's canonical stages (input, then after each component),
    counted at most once. Apart from its Entry so that what a report holds on to does not
    point back at the entry: an entry in a reference cycle outlives its eviction until a full
    garbage collection, and under a flood of new catalogues thousands of them piled up."""

    def __init__(self, raw: bytes, rewrites: Sequence[Rewrite]) -> None:
        self._raw = raw
        self._rewrites = tuple(rewrites)
        self._tokens: tuple[int, ...] | None = None
        self._lock = threading.Lock()

    def cached_token_counts(self) -> tuple[int, ...] | None:
        """The stage token counts if already counted, without waiting or counting."""
        return self._tokens

    def token_counts(self, count: Callable[[bytes], int]) -> tuple[int, ...]:
        """Tokens of each canonical stage, counted once.

        Tokenizing is slow, so the proxy calls this off the request path (thread-safe); the
        stages are rebuilt from the raw bytes here rather than kept in memory meanwhile.
        """
        with self._lock:
            if self._tokens is None:
                self._tokens = tuple(count(s) for s in stages(self._raw, self._rewrites))
            return self._tokens


class Entry:
    """A memoized rewrite of one exact catalogue: the same input bytes give the same output."""

    def __init__(
        self,
        raw: bytes,
        output: bytes | None,
        runs: tuple[CatalogueRun, ...],
        rewrites: Sequence[Rewrite] = (),
        errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        self.raw = raw
        self.suffix = raw[-_PREFIX:]  # what the memo-hit search looks for (see _recent_hit)
        self.output = output  # None: keep the original bytes (skip)
        self.runs = runs
        self.errors = errors  # (component index, "ExcType: message")
        self.stages = StageTokens(raw, rewrites)
        self._with_tail: list[tuple[bytes, bytes]] = []  # (rest, output + rest)
        # (The key bytes before the catalogue, the short rest after it) of the last bodies it
        # was proven top level in by parsing that rest (see _same_place).
        self.layouts: list[tuple[bytes, bytes]] = []
        # What the pipeline reports for this catalogue, computed once and stored here so it
        # lives and dies with the entry (it must not refer back to the entry: see StageTokens).
        self.report_parts: Any = None

    def output_with_tail(self, body: bytes, start: int) -> bytes:
        """The output followed by body[start:], the short rest of the body, built once per
        distinct rest (compared in place, so a hit on the same rest copies nothing).

        Agents send `tools` near the end and the same few bytes after it on every turn
        (metadata, max_tokens, stream): one piece instead of two saves the proxy a write.
        """
        assert self.output is not None
        size = len(body) - start
        for index, (tail, joined) in enumerate(self._with_tail):
            if len(tail) == size and body.endswith(tail):
                _to_front(self._with_tail, index)
                return joined
        tail = body[start:]
        joined = self.output + tail
        _keep(self._with_tail, (tail, joined))
        return joined


def _keep(kept: list[tuple[bytes, bytes]], item: tuple[bytes, bytes]) -> None:
    """Put a new `item` first in `kept`, which holds at most _RESTS items: the least recently
    used go, so a session whose ending changes every turn does not push out the sessions
    taking turns (see `_to_front`)."""
    kept.insert(0, item)
    del kept[_RESTS:]


def _to_front(kept: list[tuple[bytes, bytes]], index: int) -> None:
    """Mark kept[index] the most recently used."""
    if index:
        kept.insert(0, kept.pop(index))


class Memo:
    """Bounded LRU of catalogue rewrites keyed by SHA-256 of the exact incoming bytes.

    A second index by the catalogue's first bytes lets a memo hit be proven by one byte
    comparison inside the body, without parsing the body or hashing the catalogue.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._entries: OrderedDict[bytes, Entry] = OrderedDict()
        self._by_prefix: dict[bytes, list[bytes]] = {}
        # The entry used last (None when empty): a session sends the same catalogue on every
        # turn, so the hit path looks at it first. Kept here rather than looked up through
        # the ordered dict: each step of a memo hit counts when the caches are cold (c=1).
        self.recent: Entry | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def key(raw: bytes) -> bytes:
        return hashlib.sha256(raw).digest()

    def get(self, key: bytes) -> Entry | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            self.recent = entry
        return entry

    def put(self, key: bytes, entry: Entry) -> None:
        if self.capacity == 0:
            return
        if key not in self._entries:
            self._by_prefix.setdefault(entry.raw[:_PREFIX], []).append(key)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        self.recent = entry  # last in the order, so never the one evicted below
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
                self.recent = entry
                return entry
        return None

    def clear(self) -> None:
        self._entries.clear()
        self._by_prefix.clear()
        self.recent = None


Piece = bytes | memoryview


def joined(pieces: Sequence[Piece]) -> bytes:
    """The whole body the pieces make: the very object when it is one piece of bytes."""
    if len(pieces) == 1 and isinstance(pieces[0], bytes):
        return pieces[0]
    return b"".join(pieces)


@dataclass(slots=True)  # one per request: not frozen, see pipeline.RunReport
class Compacted:
    """The body to forward and, per catalogue found, its memo entry and whether it was a hit.

    The body comes as pieces (views of the original around each rewritten catalogue) so that
    a proxy can write them out without copying the whole body into a new one.
    """

    pieces: tuple[Piece, ...]
    catalogues: tuple[tuple[Entry, bool], ...] = ()
    reason: str | None = None  # why the body as a whole was skipped (then no catalogues)

    @property
    def body(self) -> bytes:
        return joined(self.pieces)


def compact(
    body: bytes, memo: Memo, rewrites: Sequence[Rewrite], api: str | None = None
) -> Compacted:
    """Rewrite every catalogue in `body`; the same `body` object, as the one piece, comes back
    when none changed.

    `api` ("anthropic", "openai-chat", "openai-responses", "gemini", None for unknown) only
    says where Codex's additional_tools items can be; the result is otherwise the same.
    """
    try:
        nested = api not in _NO_ADDITIONAL_TOOLS
        found = _memo_hit(body, memo, nested)
        if found is None:
            located = _locate(body, nested)
            if isinstance(located, str):
                return Compacted((body,), reason=located)
            found = []
            for start, end, parsed in located:
                raw = body[start:end]
                key = memo.key(raw)
                entry = memo.get(key)
                hit = entry is not None
                if entry is None:
                    entry = rewrite(raw, rewrites, parsed)
                    memo.put(key, entry)
                found.append((start, entry, hit))
        if len(found) > 1:
            found.sort(key=_start)
        return Compacted(_splice(body, found), tuple([(e, hit) for _, e, hit in found]))
    except Exception as exc:  # fail open: the body goes on exactly as it came
        return Compacted((body,), reason=f"error:{type(exc).__name__}")


def _splice(body: bytes, found: list[tuple[int, Entry, bool]]) -> tuple[Piece, ...]:
    """The body with each adopted catalogue (in body order) replaced, as views of `body` and
    memoized outputs: nothing of the body is copied (joining a 2 MB body costs more than a
    memo hit) but a short rest after the last catalogue, once per distinct rest."""
    view = memoryview(body)
    pieces: list[Piece] = []
    position = 0
    for start, entry, _ in found:
        if entry.output is not None:
            if start > position:
                pieces.append(view[position:start])
            pieces.append(entry.output)
            position = start + len(entry.raw)
    if not pieces:
        return (body,)
    if position < len(body):
        last = found[-1][1]
        if len(body) - position <= _SHORT_TAIL and pieces[-1] is last.output:
            pieces[-1] = last.output_with_tail(body, position)
        else:
            pieces.append(view[position:])
    return tuple(pieces)


def _start(found: tuple[int, Entry, bool]) -> int:
    return found[0]


def _memo_hit(body: bytes, memo: Memo, nested: bool) -> list[tuple[int, Entry, bool]] | None:
    """The catalogue as a memo hit, proven without parsing the transcript.

    Scanning back from the end, the first `"tools":` key whose value bytes equal a memoized
    catalogue and that sits at the top level is the catalogue, if every later `"tools":` key
    lies inside it. Top level is proven by parsing only the shorter side of the body with a
    closer (head + `}`) or an opener (`{` + tail): a JSON prefix or suffix balances only at
    depth 1. The longer side is not parsed: a body broken there reaches the upstream as
    broken as it came. Anything unusual returns None and takes the full path.
    """
    recent = memo.recent
    if recent is None or (nested and _ADDITIONAL_TOOLS in body):
        return None  # an empty memo, or a body the full path must read
    if (value_start := _same_place(body, recent)) is not None:
        return [(value_start, recent, True)]
    if (found := _recent_hit(body, recent)) is not None:
        return found
    later: list[int] = []
    for key_start, value_start in _key_candidates_reversed(body, _TOOLS_KEY):
        if len(later) >= _MAX_CANDIDATES:
            return None
        entry = memo.match_at(body, value_start)
        if entry is not None:
            value_end = value_start + len(entry.raw)
            top = _top_level_member(body, key_start, value_end, "tools")
            if top is not None:
                if any(k >= value_end for k in later) or top:
                    return None  # a later `"tools"` outside this value: the full path decides
                return [(value_start, entry, True)]
        later.append(key_start)
    return None


def _recent_hit(body: bytes, entry: Entry) -> list[tuple[int, Entry, bool]] | None:
    """The same proof as `_memo_hit`, found by searching for the most recent catalogue's own
    bytes: its last bytes near the end of the body (agents send `tools` after the
    transcript), else its first bytes from the start. Reverse search is slow in CPython, so
    it only runs over a window at the end."""
    raw = entry.raw
    if len(raw) < _PREFIX:
        return None
    window = max(0, len(body) - len(raw) - _TAIL_WINDOW)
    end = body.rfind(entry.suffix, window)
    value_start = end + _PREFIX - len(raw) if end != -1 else body.find(raw[:_PREFIX])
    if value_start < 0 or not body.startswith(raw, value_start):
        return None
    colon = _skip_ws_back(body, value_start - 1)
    if colon < 0 or body[colon] != 0x3A:  # ':'
        return None
    key_start = _skip_ws_back(body, colon - 1) + 1 - len(_TOOLS_KEY)
    if key_start < 0 or not body.startswith(_TOOLS_KEY, key_start):
        return None
    if key_start > 0 and body[key_start - 1] == 0x5C:  # an escaped quote: inside a string
        return None
    value_end = value_start + len(raw)
    if _key_candidates(body, _TOOLS_KEY, value_end):
        return None  # a later `"tools"` key: the general search decides
    if _top_level_member(body, key_start, value_end, "tools") is not False:
        return None
    if key_start > len(body) - value_end and len(body) - value_end <= _SHORT_TAIL:
        _keep(entry.layouts, (body[key_start:value_start], body[value_end:]))  # proven by the rest
    return [(value_start, entry, True)]


def _same_place(body: bytes, entry: Entry) -> int | None:
    """Where the catalogue starts if the body ends as one `entry.layouts` was proven in: its
    key bytes, the catalogue's bytes, then the very same rest, shorter than what comes
    before. That proof (top level, no later `"tools"` key) read nothing but the rest, so it
    holds again without a search or a parse: each turn of a session differs only in the
    transcript before the catalogue. `_recent_hit` reaches the same answer the long way."""
    raw = entry.raw
    for index, (key, rest) in enumerate(entry.layouts):
        value_start = len(body) - len(rest) - len(raw)
        key_start = value_start - len(key)
        if (
            key_start > len(rest)  # else the head is the shorter side: _recent_hit parses it
            and body.endswith(rest)
            and body.startswith(raw, value_start)
            and body.startswith(key, key_start)
            and body[key_start - 1] != 0x5C  # not an escaped quote: not inside a string
        ):
            _to_front(entry.layouts, index)
            return value_start
    return None


def _skip_ws_back(body: bytes, at: int) -> int:
    """The last index at or before `at` that is not JSON whitespace (-1 if none)."""
    while at >= 0 and body[at] in _WS:
        at -= 1
    return at


def _key_candidates_reversed(body: bytes, key: bytes) -> Iterator[tuple[int, int]]:
    """(key start, value start) of each `"key":` in the body, last first, found lazily."""
    end = len(body)
    while (at := body.rfind(key, 0, end)) != -1:
        end = at
        value_start = _value_after_key(body, at, len(key))
        if value_start is not None:
            yield at, value_start


def _value_after_key(body: bytes, at: int, length: int) -> int | None:
    """Where the value starts if the string at `at` is followed by a colon, else None."""
    # In valid JSON a quote after a backslash is escaped or closes a string: never a key.
    if at > 0 and body[at - 1] == 0x5C:
        return None
    colon = _skip_ws(body, at + length)
    if colon < len(body) and body[colon] == 0x3A:  # ':'
        return _skip_ws(body, colon + 1)
    return None


def _key_candidates(body: bytes, key: bytes, start: int = 0) -> list[tuple[int, int]]:
    """(key start, value start) of every `"key":` in the body from `start`, in order."""
    found = []
    at = body.find(key, start)
    while at != -1:
        value_start = _value_after_key(body, at, len(key))
        if value_start is not None:
            found.append((at, value_start))
        at = body.find(key, at + 1)
    return found


def _skip_ws(body: bytes, at: int) -> int:
    while at < len(body) and body[at] in _WS:
        at += 1
    return at


def _top_level_member(body: bytes, key_start: int, value_end: int, name: str) -> bool | None:
    """None unless the member `name` spanning [key_start, value_end) sits at depth 1 of the
    body; else whether a later top-level member has the same name (when the tail was parsed)."""
    try:
        if key_start <= len(body) - value_end:  # slice (copy) only the shorter side
            head = body[:key_start].strip(_WS)
            if head == b"{":
                return False
            if head.endswith(b",") and isinstance(orjson.loads(head[:-1] + b"}"), dict):
                return False
            return None
        tail = body[value_end:].lstrip(_WS)
        if tail.startswith(b"}"):
            return False if tail[1:].strip(_WS) == b"" else None
        if tail.startswith(b","):
            rest = orjson.loads(b"{" + tail[1:])
            if isinstance(rest, dict):
                return name in rest
        return None
    except orjson.JSONDecodeError:
        return None


_Span = tuple[int, int, JSON]  # start, end, and the parsed value when it is proven exact


def _locate(body: bytes, nested: bool) -> list[_Span] | str:
    """Byte spans of every catalogue in the body, or the reason there are none to rewrite."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return "too_deep" if is_too_deep(exc) else "not_json"
    if not isinstance(document, dict):
        return "unsupported_shape"
    spans: list[_Span] = []
    if "tools" in document:
        span = _top_level_span(body, "tools", document["tools"])
        if isinstance(span, str):
            return span
        spans.append(span)
    items = document.get("input")
    if nested and isinstance(items, list) and any(is_additional_tools(i) for i in items):
        found = _additional_tools_spans(body, items)
        if isinstance(found, str):
            return found
        spans += found
    return spans or "no_tools"


def is_additional_tools(item: JSON) -> bool:
    """Codex CLI's input item that carries more tools when it sends no top-level `tools`."""
    return (
        isinstance(item, dict)
        and item.get("type") == "additional_tools"
        and isinstance(item.get("tools"), list)
        and bool(item["tools"])
    )


def _top_level_span(body: bytes, key: str, value: JSON) -> _Span | str:
    """The value span of the last top-level member spelled `"key"` in a valid JSON body.

    When its bytes are exactly what orjson writes for `value`, `value` comes along: the
    round trip proves the parse exact (numbers, no duplicate keys), so it is not redone.
    """
    try:
        compact_value = orjson.dumps(value)  # what orjson kept: the last member, if compact
    except orjson.JSONEncodeError:
        compact_value = None  # nested deeper than orjson writes: find the end by scanning
    for key_start, value_start in reversed(_key_candidates(body, f'"{key}"'.encode())):
        exact = compact_value is not None and body.startswith(compact_value, value_start)
        if exact and compact_value is not None:
            value_end = value_start + len(compact_value)
        else:
            try:
                value_end = _skip_value(body, value_start)
            except ValueError:
                continue
        if _top_level_member(body, key_start, value_end, key) is not None:
            if body[value_start : value_start + 1] != b"[":
                return "unsupported_shape"
            return value_start, value_end, value if exact else None
    return "unsupported_shape"  # the key is spelled with escapes: leave it alone


def _additional_tools_spans(body: bytes, items: list[JSON]) -> list[_Span] | str:
    """Spans of `input[i].tools` for Codex's additional_tools items, by an exact scan."""
    span = _top_level_span(body, "input", items)
    if isinstance(span, str):
        return span
    spans = []
    at = _skip_ws(body, span[0] + 1)  # inside the `[`
    for item in items:
        end = _skip_value(body, at)
        if is_additional_tools(item):
            member = _member_span(body, at, "tools")
            if member is None:
                return "unsupported_shape"
            spans.append((*member, None))
        at = _skip_ws(body, end)
        if body[at : at + 1] == b",":
            at = _skip_ws(body, at + 1)
    return spans


def _member_span(body: bytes, obj_start: int, key: str) -> tuple[int, int] | None:
    """The value span of the last member `key` of the object at `obj_start`."""
    at = _skip_ws(body, obj_start + 1)
    found = None
    while body[at : at + 1] == b'"':
        key_end = _skip_value(body, at)
        name = json.loads(body[at:key_end])
        value_start = _skip_ws(body, _skip_ws(body, key_end) + 1)
        value_end = _skip_value(body, value_start)
        if name == key:
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
            raise ValueError("unterminated string")
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
            raise ValueError("unbalanced value")
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
        if is_too_deep(exc):
            raise TooDeep(str(exc)) from exc
    except orjson.JSONEncodeError:
        pass
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


def stages(raw: bytes, rewrites: Sequence[Rewrite]) -> list[bytes]:
    """Canonical bytes of the catalogue before the components and after each one."""
    current = parse_catalogue(raw)
    out = [serialize(current)]
    for component in rewrites:
        try:
            new, _ = rewrite_catalogue(current, component)
        except Exception:  # as in `rewrite`: a failing component passes its input on
            new = current
        out.append(out[-1] if new is current else serialize(new))
        current = new
    return out


def rewrite(raw: bytes, rewrites: Sequence[Rewrite], parsed: JSON = None) -> Entry:
    """Run the components over one catalogue and decide whether to adopt the result.

    `parsed`, when given, is `raw` already parsed and proven exact (see `_top_level_span`).
    """
    try:
        catalogue = parse_catalogue(raw) if parsed is None else parsed
    except TooDeep:
        return _skipped(raw, len(rewrites), "too_deep")
    except DuplicateKey:
        return _skipped(raw, len(rewrites), "duplicate_keys")
    except (ValueError, UnicodeDecodeError):
        return _skipped(raw, len(rewrites), "not_json")
    if not isinstance(catalogue, list):
        return _skipped(raw, len(rewrites), "unsupported_shape")
    if not catalogue:
        return _skipped(raw, len(rewrites), "no_tools")
    changes = []
    errors: list[tuple[int, str]] = []
    sizes: list[int] = []  # canonical size after each component but the last
    serialized: tuple[JSON, bytes] | None = None  # the last catalogue serialized, and its bytes
    current = catalogue
    last = len(rewrites) - 1
    try:
        for index, component in enumerate(rewrites):
            try:
                new, change = rewrite_catalogue(current, component)
            except TooDeep:
                raise
            except Exception as exc:  # one component failing must not stop the others
                errors.append((index, f"{type(exc).__name__}: {exc}"))
                new, change = current, None
            changes.append((change, new is not current))
            # Intermediate sizes attribute bytes per component; the last one is the output's.
            if index < last:
                if new is not current or serialized is None:
                    serialized = (new, serialize(new))
                sizes.append(len(serialized[1]))
            current = new
        if serialized is not None and serialized[0] is current:
            output = serialized[1]  # the last component changed nothing: serialized already
        else:
            output = serialize(current)
    except TooDeep:
        return _skipped(raw, len(rewrites), "too_deep")
    except orjson.JSONEncodeError as exc:  # a lone surrogate escape, or nesting orjson refuses
        reason = "too_deep" if is_too_deep(exc) else "not_json"
        return _skipped(raw, len(rewrites), reason)
    sizes.append(len(output))
    adopted = len(output) < len(raw)
    failed = dict(errors)
    runs = []
    before = len(raw)
    for index, (change, changed) in enumerate(changes):
        if change is None:
            runs.append(CatalogueRun("error", failed[index].split(":")[0]))
            continue
        after = sizes[index]
        acted = changed or (index == 0 and after < before)
        if adopted and acted:
            run = CatalogueRun(
                "applied",
                None,
                change.tools_seen,
                change.tools_changed,
                change.removed,
                before,
                after,
            )
            before = after
        else:
            # Not adopted: say whether this component had something to do at all.
            reason = "not_smaller" if not adopted and changed else "nothing_to_strip"
            run = CatalogueRun(
                "skipped", reason, change.tools_seen, change.tools_changed, change.removed
            )
        runs.append(run)
    if not adopted:
        return Entry(raw, None, tuple(runs), errors=tuple(errors))
    # orjson's result keeps the buffer it grew into (2-4x its length); the memo keeps an
    # exact-size copy instead.
    exact = memoryview(output).tobytes()
    return Entry(raw, exact, tuple(runs), rewrites, tuple(errors))


def _skipped(raw: bytes, count: int, reason: str) -> Entry:
    return Entry(raw, None, tuple(CatalogueRun("skipped", reason) for _ in range(count)))
