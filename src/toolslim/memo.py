"""PURE. The memo of catalogue rewrites, and the memo-hit proof that finds a memoized catalogue
in a body without parsing the transcript.

The reference the proof must agree with is the full parse (`envelope.compact` with an empty
memo): parse the body, take its last top-level `tools` member, look its bytes up by SHA-256.
`memo_hit` answers the same catalogue at the same place, or None to hand over to the full parse;
tests/test_memo.py holds the two together. Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

import orjson

_WS = b" \t\r\n"
_TOOLS_KEY = b'"tools"'
_ADDITIONAL_TOOLS = b'"additional_tools"'
_PREFIX = 64  # bytes of a catalogue that index it for the memo-hit byte comparison
_MAX_CANDIDATES = 64  # `"tools":` keys the hit path looks at before it hands over
_TAIL_WINDOW = 64 * 1024  # bytes after a catalogue the reverse search looks through
# Bytes after the last catalogue that are sent joined to its output (envelope.Entry), and
# that the memo keeps as a rest a catalogue was proven with (see _same_place).
SHORT_TAIL = 1024
# Rests kept per catalogue, most recently used first. Sessions sharing a catalogue end their
# bodies differently (Claude Code's metadata.user_id): with one kept, two sessions taking
# turns would each push out the other's and miss the fast path on every turn.
RESTS = 4


class Memoized(Protocol):
    """What the memo reads of what it keeps: the catalogue's exact bytes."""

    @property
    def raw(self) -> bytes: ...


E = TypeVar("E", bound=Memoized)
N = TypeVar("N")  # what the memo's owner derives from an entry and keeps with it
T = TypeVar("T")


def keep(kept: list[T], item: T) -> None:
    """Put a new `item` first in `kept`, which holds at most RESTS items: the least recently
    used go, so a session whose ending changes every turn does not push out the sessions
    taking turns (see `to_front`)."""
    kept.insert(0, item)
    del kept[RESTS:]


def to_front(kept: list[T], index: int) -> None:
    """Mark kept[index] the most recently used."""
    if index:
        kept.insert(0, kept.pop(index))


class _Kept(Generic[E, N]):
    """One memoized entry, what the memo-hit proof learnt about it, and its owner's note."""

    __slots__ = ("entry", "layouts", "note", "raw", "suffix")

    def __init__(self, entry: E) -> None:
        self.entry = entry
        self.note: N | None = None
        self.raw = entry.raw
        self.suffix = self.raw[-_PREFIX:]  # what `_recent_hit` searches for
        # (The key bytes before the catalogue, the short rest after it) of the last bodies it
        # was proven top level in by parsing that rest (see _same_place).
        self.layouts: list[tuple[bytes, bytes]] = []


class Memo(Generic[E, N]):
    """Bounded LRU of catalogue rewrites keyed by SHA-256 of the exact incoming bytes.

    A second index by the catalogue's first bytes lets a memo hit be proven by one byte
    comparison inside the body, without parsing the body or hashing the catalogue. `N` is
    what the memo's owner derives from an entry and keeps with it (see `derived`).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._entries: OrderedDict[bytes, _Kept[E, N]] = OrderedDict()
        self._by_prefix: dict[bytes, list[bytes]] = {}
        # The entry used last: a session sends the same catalogue on every turn, so the hit
        # path looks at it first, without a lookup through the ordered dict.
        self._recent: _Kept[E, N] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def recent(self) -> E | None:
        """The entry used last by any way in (None when empty)."""
        return None if self._recent is None else self._recent.entry

    @staticmethod
    def key(raw: bytes) -> bytes:
        return hashlib.sha256(raw).digest()

    def get(self, key: bytes) -> E | None:
        kept = self._entries.get(key)
        if kept is None:
            return None
        self._entries.move_to_end(key)
        self._recent = kept
        return kept.entry

    def put(self, key: bytes, entry: E) -> None:
        if self.capacity == 0:
            return
        if key not in self._entries:
            self._by_prefix.setdefault(entry.raw[:_PREFIX], []).append(key)
        kept = self._entries[key] = _Kept(entry)
        self._entries.move_to_end(key)
        self._recent = kept  # last in the order, so never the one evicted below
        while len(self._entries) > self.capacity:
            old_key, old = self._entries.popitem(last=False)
            keys = self._by_prefix[old.raw[:_PREFIX]]
            keys.remove(old_key)
            if not keys:
                del self._by_prefix[old.raw[:_PREFIX]]

    def derived(self, entry: E, derive: Callable[[E], N]) -> N:
        """`derive(entry)`, made once and kept with the entry while the memo keeps it, so that
        what the owner makes of an entry lives and dies with it.

        Kept only with the entry used last, which a request with one catalogue has just
        looked up; any other entry's is derived afresh, the same value made again.
        """
        kept = self._recent
        if kept is None or kept.entry is not entry:
            return derive(entry)
        if kept.note is None:
            kept.note = derive(entry)
        return kept.note

    def match_at(self, body: bytes, start: int) -> E | None:
        """The memoized catalogue whose exact bytes stand in `body` at `start`, if any."""
        kept = self._match_at(body, start)
        return None if kept is None else kept.entry

    def _match_at(self, body: bytes, start: int) -> _Kept[E, N] | None:
        for key in self._by_prefix.get(body[start : start + _PREFIX], ()):
            kept = self._entries[key]
            if body.startswith(kept.raw, start):
                self._entries.move_to_end(key)
                self._recent = kept
                return kept
        return None

    def clear(self) -> None:
        self._entries.clear()
        self._by_prefix.clear()
        self._recent = None


def memo_hit(body: bytes, memo: Memo[E, N], nested: bool) -> tuple[int, E] | None:
    """(Where it starts, the entry) of the body's catalogue as a memo hit, or None.

    The plain version it must agree with is the full parse: the value of the body's last
    top-level `tools` member, looked up by its exact bytes. Scanning back from the end, the
    first `"tools":` key whose value bytes equal a memoized catalogue and that sits at the top
    level is the catalogue, if every later `"tools":` key lies inside it. Top level is proven by
    parsing only the shorter side of the body with a closer (head + `}`) or an opener (`{` +
    tail): a JSON prefix or suffix balances only at depth 1. The longer side is not parsed: a
    body broken there reaches the upstream as broken as it came. `nested` says the body may
    carry Codex's additional_tools items, which only the full parse reads. Anything unusual
    returns None.
    """
    recent = memo._recent
    if recent is None or (nested and _ADDITIONAL_TOOLS in body):
        return None  # an empty memo, or a body the full path must read
    if (value_start := _same_place(body, recent)) is not None:
        return value_start, recent.entry
    if (value_start := _recent_hit(body, recent)) is not None:
        return value_start, recent.entry
    later: list[int] = []
    for key_start, value_start in _key_candidates_reversed(body, _TOOLS_KEY):
        if len(later) >= _MAX_CANDIDATES:
            return None
        kept = memo._match_at(body, value_start)
        if kept is not None:
            value_end = value_start + len(kept.raw)
            top = top_level_member(body, key_start, value_end, "tools")
            if top is not None:
                if any(k >= value_end for k in later) or top:
                    return None  # a later `"tools"` outside this value: the full path decides
                return value_start, kept.entry
        later.append(key_start)
    return None


def _recent_hit(body: bytes, kept: _Kept[E, N]) -> int | None:
    """The same proof as `memo_hit`, found by searching for the most recent catalogue's own
    bytes: its last bytes near the end of the body (agents send `tools` after the
    transcript), else its first bytes from the start. Reverse search is slow in CPython, so
    it only runs over a window at the end."""
    raw = kept.raw
    if len(raw) < _PREFIX:
        return None
    window = max(0, len(body) - len(raw) - _TAIL_WINDOW)
    end = body.rfind(kept.suffix, window)
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
    if key_candidates(body, _TOOLS_KEY, value_end):
        return None  # a later `"tools"` key: the general search decides
    if top_level_member(body, key_start, value_end, "tools") is not False:
        return None
    if key_start > len(body) - value_end and len(body) - value_end <= SHORT_TAIL:
        keep(kept.layouts, (body[key_start:value_start], body[value_end:]))  # proven by the rest
    return value_start


def _same_place(body: bytes, kept: _Kept[E, N]) -> int | None:
    """Where the catalogue starts if the body ends as one of `kept.layouts` was proven in: its
    key bytes, the catalogue's bytes, then the very same rest, shorter than what comes
    before. That proof (top level, no later `"tools"` key) read nothing but the rest, so it
    holds again without a search or a parse: each turn of a session differs only in the
    transcript before the catalogue. `_recent_hit` reaches the same answer the long way."""
    raw = kept.raw
    for index, (key, rest) in enumerate(kept.layouts):
        value_start = len(body) - len(rest) - len(raw)
        key_start = value_start - len(key)
        if (
            key_start > len(rest)  # else the head is the shorter side: _recent_hit parses it
            and body.endswith(rest)
            and body.startswith(raw, value_start)
            and body.startswith(key, key_start)
            and body[key_start - 1] != 0x5C  # not an escaped quote: not inside a string
        ):
            to_front(kept.layouts, index)
            return value_start
    return None


def skip_ws(body: bytes, at: int) -> int:
    """The first index at or after `at` that is not JSON whitespace (len(body) if none)."""
    while at < len(body) and body[at] in _WS:
        at += 1
    return at


def _skip_ws_back(body: bytes, at: int) -> int:
    """The last index at or before `at` that is not JSON whitespace (-1 if none)."""
    while at >= 0 and body[at] in _WS:
        at -= 1
    return at


def key_candidates(body: bytes, key: bytes, start: int = 0) -> list[tuple[int, int]]:
    """(key start, value start) of every `"key":` in the body from `start`, in order."""
    found = []
    at = body.find(key, start)
    while at != -1:
        value_start = _value_after_key(body, at, len(key))
        if value_start is not None:
            found.append((at, value_start))
        at = body.find(key, at + 1)
    return found


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
    colon = skip_ws(body, at + length)
    if colon < len(body) and body[colon] == 0x3A:  # ':'
        return skip_ws(body, colon + 1)
    return None


def top_level_member(body: bytes, key_start: int, value_end: int, name: str) -> bool | None:
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
