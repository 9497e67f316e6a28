"""PURE. Raw request bytes in, raw bytes out: find each tool catalogue in the body, rewrite it
through the catalogue components (memoized by SHA-256 of its exact bytes) and splice it back,
leaving every other byte of the body untouched. Never raises; says why when it skips.

The catalogue is the value of the body's last top-level member spelled `"tools"` (what
last-wins JSON readers use), as `scanner.catalogue_member` finds it without parsing the body;
plus, in OpenAI Responses bodies, the `tools` of each `{"type": "additional_tools"}` item of
`input` (Codex CLI), which a full parse of the body finds. The locate here is the reference:
the memo hit (memo.py) finds a memoized catalogue by its bytes by the same rule, and gives
the same output for every body, JSON or not.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolslim.core.entry import (
    Entry,
    SkipReason,
    Step,
    rewrite,
)
from toolslim.core.memo import SHORT_TAIL, Memo, memo_hit
from toolslim.core.scanner import (
    WS,
    catalogue_member,
    names_additional_tools,
    skip_value,
    skip_ws,
    value_after_key,
)
from toolslim.core.schema import JSON, is_too_deep

# APIs whose bodies cannot carry Codex's additional_tools items (they have no `input` list).
_NO_ADDITIONAL_TOOLS = frozenset({"anthropic", "openai-chat", "gemini"})
# Why a catalogue's entry skipped it as a whole that is said of the body: a body whose
# catalogue is not JSON is not JSON.
_WHOLE: dict[str | None, SkipReason] = {"not_json": "not_json", "too_deep": "too_deep"}


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
    a proxy can write them out without copying the whole body into a new one. At most one of
    `reason` and `error` is set, and then there are no catalogues.
    """

    pieces: tuple[Piece, ...]
    catalogues: tuple[tuple[Entry, bool], ...] = ()
    reason: SkipReason | None = None  # why the body as a whole was skipped
    error: str | None = None  # the class of an exception compact() caught: a bug, failed open

    @property
    def body(self) -> bytes:
        return joined(self.pieces)


_Found = tuple[int, Entry, bool]  # where a catalogue starts, its entry, whether a memo hit


def compact(
    body: bytes, memo: Memo[Entry, Any], rewrites: Sequence[Step], api: str | None = None
) -> Compacted:
    """Rewrite every catalogue in `body`; the same `body` object, as the one piece, comes back
    when none changed.

    `api` ("anthropic", "openai-chat", "openai-responses", "gemini", None for unknown) only
    says where Codex's additional_tools items can be; the result is otherwise the same.
    """
    try:
        nested = _may_nest(body, api)
        hit = None if nested else _hit(body, memo)
        if hit is not None:
            return hit
        located = _locate(body, nested)
        if isinstance(located, str):
            return Compacted((body,), reason=located)
        found = []
        for start, end, parsed in located:
            raw = body[start:end]
            key = memo.key(raw)
            entry = memo.get(key)
            was_hit = entry is not None
            if entry is None:
                entry = rewrite(raw, rewrites, parsed)
                memo.put(key, entry)
            found.append((start, entry, was_hit))
        if len(found) > 1:
            found.sort(key=_start)  # body order: additional_tools items may precede `tools`
        return _compacted(body, found)
    except Exception as exc:  # fail open: the body goes on exactly as it came
        return Compacted((body,), error=type(exc).__name__)


def compact_hit(body: bytes, memo: Memo[Entry, Any], api: str | None = None) -> Compacted | None:
    """What `compact` gives a body whose catalogue is a memo hit, found by comparing bytes (a
    cost that hardly grows with the body); None for any other body, which `compact` alone
    decides."""
    try:
        return None if _may_nest(body, api) else _hit(body, memo)
    except Exception:  # compact decides, and fails open itself
        return None


def _may_nest(body: bytes, api: str | None) -> bool:
    """Whether the body may carry Codex's additional_tools items, which only a full parse
    reads: the body names them, and its API has an `input` list they can stand in."""
    return api not in _NO_ADDITIONAL_TOOLS and names_additional_tools(body)


def _hit(body: bytes, memo: Memo[Entry, Any]) -> Compacted | None:
    hit = memo_hit(body, memo, False)
    if hit is None:
        return None
    at, memoized = hit
    return _compacted(body, [(at, memoized, True)])


def _compacted(body: bytes, found: list[_Found]) -> Compacted:
    """The result for the catalogues found (by either way in: the same for the same body)."""
    if len(found) == 1:
        entry = found[0][1]
        whole = _WHOLE.get(entry.runs[0].reason) if entry.output is None and entry.runs else None
        if whole is not None:
            return Compacted((body,), reason=whole)
    return Compacted(_splice(body, found), tuple([(e, was_hit) for _, e, was_hit in found]))


def _splice(body: bytes, found: Sequence[_Found]) -> tuple[Piece, ...]:
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
        if len(body) - position <= SHORT_TAIL and pieces[-1] is last.output:
            pieces[-1] = last.output_with_tail(body, position)
        else:
            pieces.append(view[position:])
    return tuple(pieces)


def _start(found: _Found) -> int:
    return found[0]


_Span = tuple[int, int, JSON]  # start, end, and the parsed value when it is proven exact


def _locate(body: bytes, nested: bool) -> list[_Span] | SkipReason:
    """Byte spans of every catalogue in the body, or the reason there are none to rewrite:
    `catalogue_member`'s, unless the body may hold additional_tools items (`nested`)."""
    if nested:
        return _parsed_spans(body)
    member = catalogue_member(body)
    if member is None:
        return _reason(body)
    _, start, end = member
    if body[start : start + 1] != b"[":
        return "unsupported_shape"
    return [(start, end, None)]


def _reason(body: bytes) -> SkipReason:
    """Why a body in which `catalogue_member` found nothing has no catalogue to rewrite."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return "too_deep" if is_too_deep(exc) else "not_json"
    if not isinstance(document, dict) or "tools" in document:
        return "unsupported_shape"  # not an object, or a tools member the rule cannot take
    return "no_tools"


def _parsed_spans(body: bytes) -> list[_Span] | SkipReason:
    """`_locate` by a full parse, for bodies that may hold additional_tools items."""
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
    if isinstance(items, list) and any(is_additional_tools(i) for i in items):
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


def _top_level_span(body: bytes, key: str, value: JSON) -> _Span | SkipReason:
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
                value_end = skip_value(body, value_start)
            except ValueError:
                continue
        if _top_level_member(body, key_start, value_end, key) is not None:
            if body[value_start : value_start + 1] != b"[":
                return "unsupported_shape"
            return value_start, value_end, value if exact else None
    return "unsupported_shape"  # the key is spelled with escapes: leave it alone


def _key_candidates(body: bytes, key: bytes) -> list[tuple[int, int]]:
    """(key start, value start) of every `"key":` in the body, in order."""
    found = []
    at = body.find(key)
    while at != -1:
        value_start = value_after_key(body, at, len(key))
        if value_start is not None:
            found.append((at, value_start))
        at = body.find(key, at + 1)
    return found


def _top_level_member(body: bytes, key_start: int, value_end: int, name: str) -> bool | None:
    """None unless the member `name` spanning [key_start, value_end) of a JSON body sits at
    depth 1; else whether a later top-level member has the same name (when the tail was
    parsed). Only the shorter side is parsed (and copied): the body is known to be JSON."""
    try:
        if key_start <= len(body) - value_end:
            head = body[:key_start].strip(WS)
            if head == b"{":
                return False
            if head.endswith(b",") and isinstance(orjson.loads(head[:-1] + b"}"), dict):
                return False
            return None
        tail = body[value_end:].lstrip(WS)
        if tail.startswith(b"}"):
            return False if tail[1:].strip(WS) == b"" else None
        if tail.startswith(b","):
            rest = orjson.loads(b"{" + tail[1:])
            if isinstance(rest, dict):
                return name in rest
        return None
    except orjson.JSONDecodeError:
        return None


def _additional_tools_spans(body: bytes, items: list[JSON]) -> list[_Span] | SkipReason:
    """Spans of `input[i].tools` for Codex's additional_tools items, by an exact scan."""
    span = _top_level_span(body, "input", items)
    if isinstance(span, str):
        return span
    spans = []
    at = skip_ws(body, span[0] + 1)  # inside the `[`
    for item in items:
        end = skip_value(body, at)
        if is_additional_tools(item):
            member = _member_span(body, at, "tools")
            if member is None:
                return "unsupported_shape"
            spans.append((*member, None))
        at = skip_ws(body, end)
        if body[at : at + 1] == b",":
            at = skip_ws(body, at + 1)
    return spans


def _member_span(body: bytes, obj_start: int, key: str) -> tuple[int, int] | None:
    """The value span of the last member `key` of the object at `obj_start`."""
    at = skip_ws(body, obj_start + 1)
    found = None
    while body[at : at + 1] == b'"':
        key_end = skip_value(body, at)
        name = json.loads(body[at:key_end])
        value_start = skip_ws(body, skip_ws(body, key_end) + 1)
        value_end = skip_value(body, value_start)
        if name == key:
            found = (value_start, value_end)
        at = skip_ws(body, value_end)
        if body[at : at + 1] == b",":
            at = skip_ws(body, at + 1)
    return found
