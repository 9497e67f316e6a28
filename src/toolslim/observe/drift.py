"""PURE. Catalogue drift: which session a request belongs to, whether its catalogue differs
from the one that session sent before, and what kind of change that is.

A change of catalogue between two requests of a session turns the provider's cache read of
the whole prompt (0.1x) into a cache write (1.25x): the catalogue renders first in every
provider's cached prefix. Sessions are known by hashes only, in a bounded LRU. Must not
import aiohttp or prometheus_client.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args

from toolslim.config.options import DRIFT_MAX_SESSIONS as MAX_SESSIONS
from toolslim.core.facts import CatalogueFacts, Tools, digest
from toolslim.wire.usage import Usage

Kind = Literal["order_only", "added", "removed", "changed", "mixed"]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)

MAX_NAMED: Final = 20  # tools (and servers) an event names
# Distinct catalogues a session keeps as its own: going back to one of them (a subagent's
# catalogue, a server that came back) writes no new cache prefix, so it is no change.
RECENT: Final = 4
# Facts of previous catalogues are kept within this budget (estimated bytes), shared by all
# sessions: a session holds only hashes. A change whose previous facts were pushed out by a
# flood of distinct catalogues is counted as `mixed`, naming no tools.
KEPT_BYTES: Final = 64 * 1024 * 1024
# Serving, the budget is the memo's (`memo_bytes`) divided by this: a catalogue's facts are
# ~1/20 of its bytes, so the facts of ~5x as many catalogues as the memo holds are kept.
KEPT_SHARE: Final = 4
# A kept tool's digest, name, size, tuple slots and object headers beside its name's
# characters: tracemalloc measured ~4.3 KiB for the Tools of a 24-tool catalogue (120 counted
# ~1.5x too few, bench/README.md).
_TOOL_BYTES: Final = 170

# Where clients name their session, most trusted first: Claude Code's header, Codex's header
# (WebSocket and HTTP), then body members: OpenAI's prompt_cache_key (Codex: the thread id),
# Anthropic's metadata.user_id (Claude Code puts its session_id in it).
SESSION_HEADERS: Final = ("x-claude-code-session-id", "session-id", "session_id")
SESSION_MEMBERS: Final = (b'"prompt_cache_key"', b'"user_id"')
# The members an API's bodies have where that is known, each read at its LAST place in the
# tail: an Anthropic body has no prompt_cache_key (one in its tail is a tool call's input in
# the transcript), and Claude Code writes metadata.user_id after the transcript and the tools,
# so the last user_id is metadata's where the first may be a tool call's.
LAST_MEMBERS_OF: Final[Mapping[str, tuple[bytes, ...]]] = {"anthropic": (b'"user_id"',)}
# For clients that name none (Gemini CLI): the credential, the model and the first bytes of
# the system instruction, which together stay the same for one user's one conversation.
CREDENTIAL_HEADERS: Final = ("x-api-key", "authorization", "x-goog-api-key", "api-key")
SYSTEM_MEMBERS: Final = (
    b'"systemInstruction"',
    b'"system_instruction"',
    b'"system"',
    b'"instructions"',
)
SYSTEM_BYTES: Final = 256
# Session members sit after the transcript (agents send them last): only the body's end is
# searched, so a 2 MB transcript is not read for them.
_TAIL: Final = 16 * 1024
_HEAD: Final = 1024
_SESSION_PREFIXES: Final = tuple((name, name.encode() + b"\0") for name in SESSION_HEADERS)
# After a key: JSON whitespace, a colon, whitespace and a whole JSON string (the value).
_STRING_AFTER = re.compile(rb'[ \t\r\n]*:[ \t\r\n]*("[^"\\]*(?:\\.[^"\\]*)*")', re.DOTALL)
_GEMINI_MODEL = re.compile(r"/models/([^/:?]+)")


def session_of(target: str, headers: Mapping[str, str] | None, body: bytes, salt: bytes) -> bytes:
    """A short hash naming the session the request belongs to; never the value in clear.

    `headers` are the request's (case-insensitive, as aiohttp's), `target` its path, `salt`
    the tracker's own, so that a hash shown on /stats cannot be checked against a guess.
    """
    return hashlib.blake2b(session_key(target, headers, body), digest_size=8, key=salt).digest()


def session_key(
    target: str, headers: Mapping[str, str] | None, body: bytes, api: str | None = None
) -> bytes:
    """What names the request's session (to be hashed at once, never kept): the first of
    SESSION_HEADERS, else of SESSION_MEMBERS in the body's tail (for an `api` of
    LAST_MEMBERS_OF, the last of its members there), else credential, model and system bytes."""
    headers = headers or {}
    for name, prefix in _SESSION_PREFIXES:
        if value := headers.get(name):
            return prefix + value.encode()
    tail = max(0, len(body) - _TAIL)
    members: tuple[bytes, ...] = SESSION_MEMBERS
    find = member_string
    if api is not None and api in LAST_MEMBERS_OF:
        members, find = LAST_MEMBERS_OF[api], last_member_string
    for member in members:
        if (found := find(body, member, tail)) is not None:
            return b"%s\0%s" % (member, found)
    credential = next((headers[h] for h in CREDENTIAL_HEADERS if h in headers), "")
    model = _GEMINI_MODEL.search(target.partition("?")[0])
    named = model.group(1).encode() if model else _model_in(body)
    system = b""
    for member in SYSTEM_MEMBERS:
        at = body.find(member)
        if at != -1:
            system = body[at : at + len(member) + SYSTEM_BYTES]
            break
    return b"\0".join((credential.encode(), named, system))


def member_string(body: bytes, member: bytes, start: int) -> bytes | None:
    """`member_string_forward`, found from the end: CPython's `rfind` skips through JSON (whose
    every other byte is a quote) ~3x faster than `find`, and the members sit last, so the
    places of `member` after `start` are found backwards (few: usually one, then one miss)
    and tried first to last, as the forward search tries them."""
    places = []
    end = len(body)
    while (at := body.rfind(member, start, end)) != -1:
        places.append(at)
        end = at + len(member) - 1  # an occurrence overlapping this one starts before it
    for at in reversed(places):
        if (found := _string_after(body, at + len(member))) is not None:
            return found
    return None


def last_member_string(body: bytes, member: bytes, start: int) -> bytes | None:
    """The raw JSON string after the last `member` key at or after `start` that has one."""
    end = len(body)
    while (at := body.rfind(member, start, end)) != -1:
        if (found := _string_after(body, at + len(member))) is not None:
            return found
        end = at + len(member) - 1  # an occurrence overlapping this one starts before it
    return None


def member_string_forward(body: bytes, member: bytes, start: int) -> bytes | None:
    """The raw JSON string after the first `member` key at or after `start`, if any."""
    at = body.find(member, start)
    while at != -1:
        if (found := _string_after(body, at + len(member))) is not None:
            return found
        at = body.find(member, at + 1)
    return None


def _string_after(body: bytes, at: int) -> bytes | None:
    """The raw JSON string after `: ` at `at` (a key's end), if there is one."""
    match = _STRING_AFTER.match(body, at)
    return None if match is None else match.group(1)


def _model_in(body: bytes) -> bytes:
    """The `model` member's string, from the head or the end of the body (SDKs put it first)."""
    head = member_string(body[:_HEAD], b'"model"', 0)
    if head is not None:
        return head
    return member_string(body, b'"model"', max(0, len(body) - _TAIL)) or b""


# --- what changed ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Classified:
    """The kind of one change and what it involved."""

    kind: Kind
    tools: tuple[str, ...]  # at most MAX_NAMED
    servers: tuple[str, ...]  # the MCP servers of those tools, sorted, at most MAX_NAMED


def classify(before: Sequence[Listed], after: Sequence[Listed]) -> Classified | None:
    """How the tools `after` differ from the tools `before` (each request's catalogues in
    body order), or None when no tool differs (the bytes between tools did).

    `order_only`: the same tools, byte-identical, another order. `added`: every previous tool
    unchanged and in its order, plus new names. `removed`: some names gone, the rest
    unchanged and in order. `changed`: the same names, some tool's bytes differ (order may
    differ too). `mixed`: anything else, e.g. a rename (one removed, one added).
    """
    old_names, old_digests, old_servers = _joined(before)
    new_names, new_digests, new_servers = _joined(after)
    old = dict(zip(old_names, old_digests, strict=True))
    new = dict(zip(new_names, new_digests, strict=True))
    added = [name for name in new_names if name not in old]
    removed = [name for name in old_names if name not in new]
    changed = [name for name in new_names if name in old and old[name] != new[name]]
    kept_old = [name for name in old_names if name in new]
    kept_new = [name for name in new_names if name in old]
    reordered = kept_old != kept_new
    kind: Kind
    if not (added or removed or changed):
        if not reordered:
            return None
        kind, tools = "order_only", _moved(kept_old, kept_new)
    elif added and not (removed or changed or reordered):
        kind, tools = "added", added
    elif removed and not (added or changed or reordered):
        kind, tools = "removed", removed
    elif changed and not (added or removed):
        kind, tools = "changed", changed
    else:
        kind, tools = "mixed", removed + added + changed
    servers = {**dict(zip(old_names, old_servers, strict=True))}
    servers.update(zip(new_names, new_servers, strict=True))
    named = sorted({s for name in tools if (s := servers.get(name)) is not None})
    return Classified(kind, tuple(tools[:MAX_NAMED]), tuple(named[:MAX_NAMED]))


def _joined(catalogues: Sequence[Listed]) -> tuple[list[str], list[bytes], list[str | None]]:
    if len(catalogues) == 1:
        only = catalogues[0]
        return list(only.names), list(only.digests), list(only.servers)
    names: list[str] = []
    digests: list[bytes] = []
    servers: list[str | None] = []
    for tools in catalogues:
        names += tools.names
        digests += tools.digests
        servers += tools.servers
    return names, digests, servers


def _moved(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """The fewest tools that, moved, turn order `before` into `after`: those outside a longest
    run that kept its order (a longest increasing subsequence of the old positions)."""
    position = {name: index for index, name in enumerate(before)}
    seq = [position[name] for name in after]
    tails: list[int] = []  # tails[k]: index into seq of the smallest tail of a run of k+1
    links = [-1] * len(seq)
    for index, value in enumerate(seq):
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            if seq[tails[middle]] < value:
                low = middle + 1
            else:
                high = middle
        if low:
            links[index] = tails[low - 1]
        if low == len(tails):
            tails.append(index)
        else:
            tails[low] = index
    kept = set()
    at = tails[-1] if tails else -1
    while at != -1:
        kept.add(at)
        at = links[at]
    return [name for index, name in enumerate(after) if index not in kept]


def cache_write_after(usage: Usage | None, cached_before: int) -> int:
    """What the provider charged for the change, from the usage of the request that carried
    it: Anthropic's cache_creation_input_tokens; elsewhere (OpenAI, Gemini report only reads)
    the uncached input tokens, when the cached tokens fell below the session's previous."""
    if usage is None:
        return 0
    if usage.cache_creation_input_tokens:
        return usage.cache_creation_input_tokens
    if usage.cache_read_input_tokens < cached_before:
        return usage.input_tokens
    return 0


@dataclass(frozen=True, slots=True)
class Change:
    """One catalogue change in one session, as /stats lists it in `drift.recent`."""

    time: float
    session: str  # the session's short hash, hex
    api: str
    kind: Kind
    tools: tuple[str, ...]
    servers: tuple[str, ...]
    cache_write_tokens_after: int
    # The provider's own word on the cache miss (Anthropic's cache_miss_reason type), if the
    # answer to the request that carried the change named one.
    cache_miss_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "session": self.session,
            "api": self.api,
            "kind": self.kind,
            "tools": list(self.tools),
            "servers": list(self.servers),
            "cache_write_tokens_after": self.cache_write_tokens_after,
            "cache_miss_reason": self.cache_miss_reason,
        }


class Listed(Protocol):
    """What `classify` reads of a catalogue: its tools' names, digests and servers, in
    order (`Tools`, or `Kept` as a shared store gives them back)."""

    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def digests(self) -> tuple[bytes, ...]: ...
    @property
    def servers(self) -> tuple[str | None, ...]: ...


@dataclass(frozen=True, slots=True)
class Kept:
    """The part of a catalogue's `Tools` that a change is classified from."""

    names: tuple[str, ...]
    digests: tuple[bytes, ...]
    servers: tuple[str | None, ...]


Seen = tuple[list[bytes], int]  # a session's recent catalogue identities (newest first), cached


def visited(recent: Sequence[bytes], identity: bytes) -> list[bytes]:
    """A session's recent identities after a request with `identity`: it first, at most
    RECENT (the one rule every `Sessions` keeps)."""
    return [identity, *(kept for kept in recent if kept != identity)][:RECENT]


class Sessions(Protocol):
    """Where a tracker keeps its sessions (and can find the tools of catalogues it has not
    seen itself): this process's memory, or a store the workers of a host share."""

    salt: bytes  # keys the session hashes: the same for every tracker of one store

    def __len__(self) -> int: ...

    def visit(self, session: bytes, identity: bytes, cached: int | None) -> Seen | None:
        """Record a request of `session` with catalogue `identity` (and its cache read
        tokens, None: unknown) and return what the session was before (None: it is new).
        The least recently visited sessions go beyond the store's bound."""
        ...

    def keep(self, identity: bytes, tools: Sequence[Listed]) -> None:
        """Make a catalogue's tools findable by the other trackers of the store."""
        ...

    def kept(self, identity: bytes) -> tuple[Listed, ...] | None:
        """The tools of a catalogue some tracker of the store kept, if still kept."""
        ...


class _Session:
    """What a session is known by: hashes of its recent catalogues and its last cache read."""

    __slots__ = ("cached", "recent")

    def __init__(self, identity: bytes, cached: int) -> None:
        self.recent = [identity]  # most recent first, at most RECENT
        self.cached = cached


class LocalSessions:
    """The sessions of one process, an LRU of `max_sessions` in memory."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max(1, max_sessions)
        self.salt = secrets.token_bytes(16)
        self._sessions: OrderedDict[bytes, _Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def visit(self, session: bytes, identity: bytes, cached: int | None) -> Seen | None:
        state = self._sessions.get(session)
        if state is None:
            self._sessions[session] = _Session(identity, cached or 0)
            if len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
            return None
        self._sessions.move_to_end(session)
        before = state.recent, state.cached
        if cached is not None:
            state.cached = cached
        if state.recent[0] != identity:  # the usual request: the catalogue of the last one
            state.recent = visited(state.recent, identity)
        return before

    def keep(self, identity: bytes, tools: Sequence[Listed]) -> None:
        return None  # the tracker's own kept facts are all there is

    def kept(self, identity: bytes) -> tuple[Listed, ...] | None:
        return None


Catalogues = Sequence[CatalogueFacts]


def identity_of(catalogues: Catalogues) -> bytes:
    """The identity of a request's catalogues: the one catalogue's digest, else all of them."""
    if len(catalogues) == 1:
        return catalogues[0].digest
    return digest(b"".join(c.digest for c in catalogues))


class Tracker:
    """The sessions' last catalogues, bounded: `max_sessions` sessions (least recently seen
    go first) and the facts of previous catalogues within KEPT_BYTES.

    `observe` decides per request at memo-hit cost: a session sending the catalogue it sent
    before is one comparison of two hashes; only a different one is classified. With shared
    `sessions`, the trackers of every worker see one history per session.
    """

    def __init__(
        self,
        max_sessions: int = MAX_SESSIONS,
        kept_bytes: int = KEPT_BYTES,
        sessions: Sessions | None = None,
    ) -> None:
        self.sessions = LocalSessions(max_sessions) if sessions is None else sessions
        self.salt = self.sessions.salt
        self._keyed = hashlib.blake2b(digest_size=8, key=self.salt)  # copied: cheaper than new
        self._kept: OrderedDict[bytes, tuple[tuple[Tools, ...], int]] = OrderedDict()
        self._kept_bytes = 0
        self._budget = kept_bytes

    def __len__(self) -> int:
        return len(self.sessions)

    def session(self, target: str, headers: Mapping[str, str] | None, body: bytes) -> bytes:
        """`session_of` with this tracker's salt."""
        return self.session_named(session_key(target, headers, body))

    def session_named(self, key: bytes) -> bytes:
        """`session` of the request whose `session_key` is `key` (read once per request)."""
        keyed = self._keyed.copy()
        keyed.update(key)
        return keyed.digest()

    def observe(
        self,
        session: bytes,
        api: str,
        catalogues: Catalogues,
        usage: Usage | None,
        now: float,
    ) -> Change | None:
        """The change this request's catalogues make in its session, or None."""
        identity = identity_of(catalogues)
        self._keep(identity, catalogues)
        cached = None if usage is None else usage.cache_read_input_tokens
        seen = self.sessions.visit(session, identity, cached)
        if seen is None:
            return None
        recent, cached_before = seen
        if identity in recent:  # usually recent[0]: the catalogue of the session's last request
            return None
        found_kept = self._kept.get(recent[0])
        previous = found_kept[0] if found_kept is not None else self.sessions.kept(recent[0])
        tools = tuple(c.tools for c in catalogues)
        if previous is None:
            found: Classified | None = Classified("mixed", (), ())
        else:
            found = classify(previous, tools)
        if found is None:
            return None
        return Change(
            now,
            session.hex(),
            api,
            found.kind,
            found.tools,
            found.servers,
            cache_write_after(usage, cached_before),
        )

    def _keep(self, identity: bytes, catalogues: Catalogues) -> None:
        """Keep the facts of `identity` as the most recently used, within the budget."""
        kept = self._kept
        found = kept.get(identity)
        if found is not None:
            kept.move_to_end(identity)
            for facts, read in zip(catalogues, found[0], strict=True):
                if not facts.read:  # the same bytes met in new facts: no second read
                    facts.known(read)
            return
        tools = tuple(c.tools for c in catalogues)
        size = sum(len(t.names) * _TOOL_BYTES + sum(map(len, t.names)) for t in tools)
        kept[identity] = (tools, size)
        self._kept_bytes += size
        while self._kept_bytes > self._budget and len(kept) > 1:
            _, (_, dropped) = kept.popitem(last=False)
            self._kept_bytes -= dropped
        self.sessions.keep(identity, tools)
