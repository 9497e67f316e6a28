"""PURE. The memo of catalogue rewrites, bounded in entries and in bytes, and the memo hit that
finds a memoized catalogue in a body by comparing bytes, without parsing the body or the
catalogue, hashing it or walking it again.

The reference the hit must agree with is the full locate (`envelope.compact` with an empty
memo): `scanner.catalogue_member` finds the catalogue, its bytes are looked up by SHA-256.
`memo_hit` answers the same catalogue at the same place, or None to hand over to the full
locate; tests/unit/test_memo.py and test_scanner.py hold the two together, on valid bodies
and broken ones. Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from toolslim.core.scanner import (
    CANDIDATES,
    TOOLS_KEY,
    budget,
    closes_body,
    names_additional_tools,
    skip_ws_back,
    tokens_after,
    value_after_key,
)

_BACKSLASH = ord("\\")
_COLON = ord(":")
_PREFIX = 64  # bytes of a catalogue that index it for the memo-hit byte comparison
_TAIL_WINDOW = 64 * 1024  # bytes after a catalogue the reverse search looks through
NEWS = 8  # new entries a telling memo keeps for another to learn (Memo.tell)
# Bytes after the last catalogue that are sent joined to its output (entry.Entry), and
# that the memo keeps as a rest a catalogue was found before (see _same_place).
SHORT_TAIL = 1024
# The key bytes before a catalogue, the short rest after it, and the rest's `"tools"` tokens
# (`tokens_after`): the rest's part of the rule's bounds, the same for the same bytes.
_Layout = tuple[bytes, bytes, int, int]
# Rests kept per catalogue, most recently used first. Sessions sharing a catalogue end their
# bodies differently (Claude Code's metadata.user_id): with one kept, two sessions taking
# turns would each push out the other's and miss the fast path on every turn.
RESTS = 4
# What the memo itself holds per entry beyond the entry's own bytes: its rests and key bytes
# (RESTS of them), the index by prefix, the objects around them.
_KEPT_BYTES = RESTS * (SHORT_TAIL + 128) + 1024


class Memoized(Protocol):
    """What the memo reads of what it keeps: the catalogue's exact bytes, and the most bytes
    the entry holds while kept (what the memo's byte bound counts)."""

    @property
    def raw(self) -> bytes: ...

    def held_bytes(self) -> int: ...


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

    __slots__ = ("cost", "entry", "layouts", "note", "raw", "suffix", "token_bytes", "tokens")

    def __init__(self, entry: E) -> None:
        self.entry = entry
        self.note: N | None = None
        self.raw = entry.raw
        self.suffix = self.raw[-_PREFIX:]
        self.cost = entry.held_bytes() + _KEPT_BYTES
        # `"tools"` tokens inside the catalogue and the bytes from each to its end, summed:
        # what the rule's bounds count of them (`_within`).
        self.tokens, self.token_bytes = tokens_after(self.raw, 0)
        # The layouts of the last bodies it was proven in, most recent first (_same_place).
        self.layouts: list[_Layout] = []


class Memo(Generic[E, N]):
    """LRU of catalogue rewrites keyed by SHA-256 of the exact incoming bytes, bounded by
    `capacity` entries and by `max_bytes` held (each entry's `held_bytes` and what the memo
    keeps with it): an entry larger than the whole bound is not kept.

    A second index by the catalogue's first bytes lets a memo hit be found by one byte
    comparison inside the body, without hashing the catalogue. Every entry's bytes are one
    array as `scanner.skip_value` reads it, found by `catalogue_member` (`memo_hit` relies on
    it: the same bytes anywhere end where they ended). `N` is what the memo's owner derives
    from an entry and keeps with it (see `derived`).
    """

    def __init__(self, capacity: int, max_bytes: int | None = None) -> None:
        self.capacity = max(0, capacity)
        self.max_bytes = max(0, max_bytes) if max_bytes is not None else None
        self.bytes = 0  # held by the entries kept, as the bound counts them
        self._entries: OrderedDict[bytes, _Kept[E, N]] = OrderedDict()
        self._by_prefix: dict[bytes, list[bytes]] = {}
        # The entry used last: a session sends the same catalogue on every turn, so the hit
        # path looks at it first, without a lookup through the ordered dict.
        self._recent: _Kept[E, N] | None = None
        # With `tell`: the last entries put, for a memo on another thread to take in
        # (`learn`). Only appended and popped, whole items: safe across threads.
        self.news: deque[tuple[bytes, E]] | None = None

    def tell(self) -> None:
        """From now on, keep the news of the entries put (the last NEWS of them)."""
        self.news = deque(maxlen=NEWS)

    def learn(self, teller: Memo[E, Any]) -> None:
        """Keep the entries `teller` put since the last time (those this memo lacks)."""
        news = teller.news
        while news:
            try:
                key, entry = news.popleft()
            except IndexError:  # taken meanwhile: there is no other taker, but no matter
                return
            if key not in self._entries:
                self.put(key, entry)

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
        kept = _Kept[E, N](entry)
        if self.max_bytes is not None and kept.cost > self.max_bytes:
            return
        old = self._entries.get(key)
        if old is None:
            self._by_prefix.setdefault(entry.raw[:_PREFIX], []).append(key)
        else:
            self.bytes -= old.cost
        self._entries[key] = kept
        self.bytes += kept.cost
        self._entries.move_to_end(key)
        self._recent = kept  # last in the order, and within the bounds: never evicted below
        if self.news is not None:
            self.news.append((key, entry))
        while len(self._entries) > self.capacity or (
            self.max_bytes is not None and self.bytes > self.max_bytes
        ):
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently used entry."""
        old_key, old = self._entries.popitem(last=False)
        self.bytes -= old.cost
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
        self.bytes = 0
        self._entries.clear()
        self._by_prefix.clear()
        self._recent = None


_Place = tuple[_Kept[Any, Any], int, int]  # the entry, where its key and its value start


def memo_hit(body: bytes, memo: Memo[E, N], nested: bool) -> tuple[int, E] | None:
    """(Where it starts, the entry) of the body's catalogue as a memo hit, or None.

    The plain version it must agree with is `scanner.catalogue_member` (the full locate's
    rule) and a lookup of the member's value by its exact bytes. Here a memoized catalogue is
    found by bytes alone (the layout it was last proven in, the most recent catalogue's own
    bytes, then the `"tools":` keys from the end), and the rule's conditions that its bytes do
    not settle are then checked: a key token, no more tokens after it than the rule looks at
    (`_within`), the body's rest closing it. A layout proven before settles all but the bounds
    (`_same_place`). `nested` says the body may carry Codex's additional_tools items, which
    only the full parse reads. Any doubt returns None, and the full locate decides.
    """
    recent = memo._recent
    if recent is None or (nested and names_additional_tools(body)):
        return None  # an empty memo, or a body the full path must read
    known = _same_place(body, recent)
    if known is not None:
        return known, recent.entry
    place = _recent_place(body, recent) or _search(body, memo)
    if place is None:
        return None
    kept, key_start, value_start = place
    value_end = value_start + len(kept.raw)
    if value_after_key(body, key_start, len(TOOLS_KEY)) != value_start:
        return None
    tokens, token_bytes = tokens_after(body, value_end)
    if not _within(body, kept, key_start, value_end, tokens, token_bytes):
        return None
    if not closes_body(body, value_end):
        return None
    if len(body) - value_end <= SHORT_TAIL:
        key, rest = body[key_start:value_start], body[value_end:]
        keep(kept.layouts, (key, rest, tokens, token_bytes))
    return value_start, kept.entry


def _within(
    body: bytes, kept: _Kept[E, N], key_start: int, value_end: int, tokens: int, token_bytes: int
) -> bool:
    """Whether the memoized catalogue at `key_start` is among the tokens `catalogue_member`
    looks at, with `tokens` `"tools"` tokens after it summing `token_bytes` to the body's end
    (`tokens_after`)."""
    tokens += kept.tokens
    # A token in the catalogue stands len(body) - value_end bytes further from the end.
    token_bytes += kept.token_bytes + kept.tokens * (len(body) - value_end)
    return tokens < CANDIDATES and token_bytes + len(body) - key_start <= budget(len(body))


def _same_place(body: bytes, kept: _Kept[E, N]) -> int | None:
    """Where the catalogue's value starts if the body ends as one it was proven in did: its
    key bytes, its bytes, then the very same rest. Each turn of a session differs only in the
    transcript before the catalogue, so this finds it without a search, and what the proof
    read of the key and the rest holds again: only the byte before the key (a backslash makes
    the key a string's) and the bounds, which count the body's length, are checked anew
    (`_recent_place` and the proof find the same place the long way)."""
    raw = kept.raw
    for index, (key, rest, tokens, token_bytes) in enumerate(kept.layouts):
        value_end = len(body) - len(rest)
        value_start = value_end - len(raw)
        key_start = value_start - len(key)
        if (
            key_start >= 0
            and body.endswith(rest)
            and body.startswith(raw, value_start)
            and body.startswith(key, key_start)
        ):
            if (key_start and body[key_start - 1] == _BACKSLASH) or not _within(
                body, kept, key_start, value_end, tokens, token_bytes
            ):
                return None
            to_front(kept.layouts, index)
            return value_start
    return None


def _recent_place(body: bytes, kept: _Kept[E, N]) -> _Place | None:
    """Where the most recent catalogue's own bytes follow a `"tools":` key: found by its last
    bytes near the end of the body (agents send `tools` after the transcript), else by its
    first bytes from the start. Reverse search is slow in CPython, so it only runs over a
    window at the end."""
    raw = kept.raw
    if len(raw) < _PREFIX:
        return None
    window = max(0, len(body) - len(raw) - _TAIL_WINDOW)
    end = body.rfind(kept.suffix, window)
    value_start = end + _PREFIX - len(raw) if end != -1 else body.find(raw[:_PREFIX])
    if value_start < 0 or not body.startswith(raw, value_start):
        return None
    colon = skip_ws_back(body, value_start - 1)
    if colon < 0 or body[colon] != _COLON:
        return None
    key_start = skip_ws_back(body, colon - 1) + 1 - len(TOOLS_KEY)
    if key_start < 0 or not body.startswith(TOOLS_KEY, key_start):
        return None
    return kept, key_start, value_start


def _search(body: bytes, memo: Memo[E, N]) -> _Place | None:
    """The last `"tools":` key (of the last CANDIDATES tokens) whose value is memoized."""
    end = len(body)
    for _ in range(CANDIDATES):
        key_start = body.rfind(TOOLS_KEY, 0, end)
        if key_start == -1:
            return None
        end = key_start
        value_start = value_after_key(body, key_start, len(TOOLS_KEY))
        if value_start is not None and (kept := memo._match_at(body, value_start)) is not None:
            return kept, key_start, value_start
    return None
