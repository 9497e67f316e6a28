"""PURE. The tool ledger's book: what each model call offered (per client and catalogue, per UTC
day) and what its answer called (per client and tool), kept as plain counters; `export()` is
their JSON form, which the workers merge (`merge`), the state file keeps and `render` shows.

A request costs one update of its catalogue's row, whatever the number of its tools: a tool's
figures are its tokens times its catalogues' sums, made when /stats asks. Must not import
aiohttp or prometheus_client. Called only from the event-loop thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from toolslim.core.facts import CatalogueFacts
from toolslim.core.owners import server_of
from toolslim.core.toolfacts import ToolFacts, names_bytes, tool_name
from toolslim.observe.ledger.prices import TIERS, Prices, Tier
from toolslim.wire.calls import CacheMiss, Call
from toolslim.wire.usage import Usage

Export = dict[str, Any]  # the ledger as JSON (see `export`)

MAX_ROWS: Final = 4096  # (day, client, catalogue) rows and (day, client, tool) call rows each
MAX_CATALOGUES: Final = 1024  # catalogues whose tool facts are kept
# The bytes the rows, the tool facts and the names kept for the calls may take, as estimated
# below (serving: `memo_bytes` // MEMO_SHARE); past them, as past the counts, a new row is
# counted in `untracked` and a new catalogue's tool facts are not kept. Nothing kept is
# evicted: the state file's deltas are taken against the rows (state.since), and a row
# whose tool facts went would lose its share of every tool's figures.
MEMO_SHARE: Final = 4
MAX_BYTES: Final = 25 * 2**20 // MEMO_SHARE
# Estimates, measured with tracemalloc in memory_bench --bytes (bench/README.md): a row (its
# key and digest text, its counters, its client's name, the dict's slot), a session in a row.
ROW_BYTES: Final = 1_100
SESSION_BYTES: Final = 120
NAMES_SHARE: Final = 8  # the names kept for the calls (a cache): this part of the bytes
SESSIONS_KEPT: Final = 64  # sessions told apart per row; beyond, a row's count stops there
MAX_NAMES: Final = 100  # names of unknown calls, models unpriced and cache-miss reasons kept
DAY_SECONDS: Final = 86_400
# The Responses namespace whose members a call may name without it: Codex 0.171 runs a bare
# `exec` of `functions`, and answers a bare `sleep` of `clock` "unsupported call: sleep".
DEFAULT_NAMESPACE: Final = "functions"
_TIER_INDEX: Final[dict[Tier, int]] = {tier: index for index, tier in enumerate(TIERS)}


def day_of(when: float) -> str:
    """The UTC day of a Unix time, as `YYYY-MM-DD`."""
    return time.strftime("%Y-%m-%d", time.gmtime(when))


def tier_of(usage: Usage | None) -> Tier:
    """The tier a request's catalogue was billed at: the catalogue renders first, so any cache
    read read it, cache writes without a read wrote it; no usage: unknown."""
    if usage is None:
        return "unknown"
    if usage.cache_read_input_tokens:
        return "read"
    if usage.cache_creation_input_tokens:
        return "write"
    return "uncached"


class Offer:
    """One (day, client, catalogue) row: requests that offered it by tier, and per token of
    any of its tools the sums of the cost multiplier and of the USD price over them."""

    __slots__ = ("equivalents", "first", "last", "requests", "sessions", "tiers", "usd")

    def __init__(self, now: float) -> None:
        self.requests = 0
        self.tiers = [0, 0, 0, 0]  # in TIERS order
        self.equivalents = 0.0
        self.usd = 0.0
        self.first = now
        self.last = now
        self.sessions: set[str] = set()

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tiers": dict(zip(TIERS, self.tiers, strict=True)),
            "equivalents": self.equivalents,
            "usd": self.usd,
            "first": self.first,
            "last": self.last,
            "sessions": sorted(self.sessions),
        }


class ToolLedger:
    """The counters of the tool ledger. `record` takes one model call; `known` the tool facts
    of a catalogue once counted; `export` all of it as JSON, with `base` (what the state file
    held at start) added."""

    def __init__(
        self,
        *,
        read_multiplier: float,
        write_multiplier: float,
        prices: Prices | None = None,
        clock: Callable[[], float] = time.time,
        base: Export | None = None,
        max_rows: int = MAX_ROWS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.multipliers: dict[Tier, float] = {
            "read": read_multiplier,
            "write": write_multiplier,
            "uncached": 1.0,
            "unknown": 0.0,
        }
        self.prices = prices or Prices()
        self.clock = clock
        self.base = base
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.held = 0  # bytes of the rows and tool facts (counted or being counted), estimated
        self.names_held = 0  # bytes of `names`, estimated
        # Keyed by the catalogue's digest as bytes, its hex made once at export (`live`).
        self.offers: dict[tuple[str, str, bytes], Offer] = {}
        self.called: dict[tuple[str, str, str], list[Any]] = {}  # -> [server, calls, last]
        self.facts: dict[bytes, ToolFacts] = {}  # catalogue digest -> its tools
        self.names: dict[bytes, Names] = {}  # digest -> its tool names, for the calls (LRU)
        self.counting: dict[bytes, int] = {}  # digests being counted -> their facts' bytes
        self.unknown_calls = 0
        self.unknown_names: dict[str, int] = {}
        self.unpriced = 0
        self.unpriced_models: dict[str, int] = {}
        self.cache_misses: dict[str, list[int]] = {}  # reason -> [requests, missed tokens]
        self.input_requests = 0
        self.input_tokens = 0
        self.untracked_requests = 0
        self.untracked_calls = 0
        self._day = (0.0, -1.0, "")  # (start, end, text) of the UTC day last met

    def _new_day(self, now: float) -> str:
        """`day_of(now)` for a `now` past the day last met, kept as the day now met (`record`
        compares with it, so the text is made once per day)."""
        start = now // DAY_SECONDS * DAY_SECONDS
        self._day = (start, start + DAY_SECONDS, text := day_of(now))
        return text

    def record(
        self,
        *,
        client: str,
        api: str,
        model: str | None,
        session: str,
        catalogues: Sequence[CatalogueFacts],
        usage: Usage | None,
        calls: Sequence[Call],
        cache_miss: CacheMiss | None,
    ) -> list[CatalogueFacts]:
        """One model call: its catalogues offered, its answer's calls. Returns the catalogues
        whose tool facts are not known yet (to count off the loop, then `known`)."""
        now = self.clock()
        start, end, day = self._day
        if not start <= now < end:
            day = self._new_day(now)
        tier = tier_of(usage)
        index = _TIER_INDEX[tier]
        equivalents = self.multipliers[tier]
        usd = 0.0
        if usage is not None:
            size = (
                usage.input_tokens
                + usage.cache_read_input_tokens
                + usage.cache_creation_input_tokens
            )
            self.input_requests += 1
            self.input_tokens += size
            unit = self.prices.per_token(model, api, tier, size)
            if unit is None:
                self.unpriced += 1
                _bump(self.unpriced_models, model or "(none)")
            else:
                usd = unit
        if cache_miss is not None:
            reason, missed = cache_miss
            counts = self.cache_misses.get(reason)
            if counts is None and len(self.cache_misses) < MAX_NAMES:
                counts = self.cache_misses[reason] = [0, 0]
            if counts is not None:
                counts[0] += 1
                counts[1] += missed
        unknown: list[CatalogueFacts] = []
        for catalogue in catalogues:
            digest = catalogue.digest
            key = (day, client, digest)
            offer = self.offers.get(key)
            if offer is None:
                if len(self.offers) >= self.max_rows or not self._take(ROW_BYTES):
                    self.untracked_requests += 1
                    continue
                offer = self.offers[key] = Offer(now)
            offer.requests += 1
            offer.tiers[index] += 1
            offer.equivalents += equivalents
            offer.usd += usd
            offer.last = now
            sessions = offer.sessions
            fits = len(sessions) < SESSIONS_KEPT and session not in sessions
            if fits and self._take(SESSION_BYTES):
                sessions.add(session)
            if (
                digest not in self.facts
                and digest not in self.counting
                and len(self.facts) + len(self.counting) < MAX_CATALOGUES
                and not (self.base and digest.hex() in self.base["catalogues"])
            ):
                size = names_bytes(catalogue.tools.names)
                if self._take(size):
                    self.counting[digest] = size
                    unknown.append(catalogue)
        if calls:
            self._calls(day, client, catalogues, calls, now)
        return unknown

    def _calls(
        self,
        day: str,
        client: str,
        catalogues: Sequence[CatalogueFacts],
        calls: Iterable[Call],
        now: float,
    ) -> None:
        offered = [self._names(catalogue) for catalogue in catalogues]
        for name, namespace in calls:
            tool = _offered_as(tool_name(name, namespace), name, namespace, offered)
            if tool is None:
                self.unknown_calls += 1
                _bump(self.unknown_names, tool_name(name, namespace))
                continue
            key = (day, client, tool)
            row = self.called.get(key)
            if row is None:
                if len(self.called) >= self.max_rows or not self._take(ROW_BYTES):
                    self.untracked_calls += 1
                    continue
                group, _, bare = tool.rpartition("/")
                row = self.called[key] = [server_of(bare, group or None), 0, now]
            row[1] += 1
            row[2] = now

    def _take(self, size: int) -> bool:
        """Whether `size` more bytes fit the bound; if they do, they are held."""
        if self.held + size > self.max_bytes:
            return False
        self.held += size
        return True

    def _names(self, catalogue: CatalogueFacts) -> Names:
        names = self.names.pop(catalogue.digest, None)  # put back last: the most recent
        if names is None:
            every = frozenset(catalogue.tools.names)
            members: dict[str, str | None] = {}
            for full in every:
                group, _, bare = full.rpartition("/")
                if group == DEFAULT_NAMESPACE:  # a call may name its members bare
                    members[bare] = full if bare not in members else None
            names = (every, members)
            self.names_held += names_bytes(every)
            budget = self.max_bytes // NAMES_SHARE
            while self.names and (
                self.names_held > budget or len(self.names) >= MAX_CATALOGUES
            ):  # the least recently used go first
                dropped, _ = self.names.pop(next(iter(self.names)))
                self.names_held -= names_bytes(dropped)
        self.names[catalogue.digest] = names
        return names

    def known(self, digest: bytes, facts: ToolFacts) -> None:
        """The tool facts of the catalogue `digest`, counted off the loop."""
        size = self.counting.pop(digest, None)
        if size is not None:  # its bytes were taken when its count began
            self.facts[digest] = facts

    def forget(self, digest: bytes) -> None:
        """The count of `digest`'s tools failed or was cancelled: a later request retries."""
        self.held -= self.counting.pop(digest, 0)

    def live(self) -> Export:
        """What this process counted since it started, as JSON."""
        offers: dict[str, dict[str, dict[str, Any]]] = {}
        for (day, client, digest), offer in self.offers.items():
            offers.setdefault(day, {}).setdefault(client, {})[digest.hex()] = offer.as_json()
        called: dict[str, dict[str, dict[str, Any]]] = {}
        for (day, client, tool), (server, calls, last) in self.called.items():
            called.setdefault(day, {}).setdefault(client, {})[tool] = {
                "server": server,
                "calls": calls,
                "last": last,
            }
        return {
            "catalogues": {
                digest.hex(): {
                    "names": list(facts.names),
                    "servers": list(facts.servers),
                    "tokens": list(facts.tokens),
                    "deferred": list(facts.deferred),
                }
                for digest, facts in self.facts.items()
            },
            "offers": offers,
            "calls": called,
            "unknown_calls": {"total": self.unknown_calls, "names": dict(self.unknown_names)},
            "unpriced": {"requests": self.unpriced, "models": dict(self.unpriced_models)},
            "cache_miss_reasons": {
                reason: {"requests": requests, "missed_tokens": missed}
                for reason, (requests, missed) in self.cache_misses.items()
            },
            "input": {"requests": self.input_requests, "tokens": self.input_tokens},
            "untracked": {"requests": self.untracked_requests, "calls": self.untracked_calls},
            "memory": {"bytes": self.held + self.names_held, "max_bytes": self.max_bytes},
        }

    def export(self) -> Export:
        """Everything: the base the state file held at start, and what was counted since."""
        live = self.live()
        return live if self.base is None else merge([self.base, live])


# A catalogue's tool names, and its `functions` members by bare name (None: named twice).
Names = tuple[frozenset[str], dict[str, str | None]]


def _offered_as(
    tool: str, name: str, namespace: str | None, offered: Sequence[Names]
) -> str | None:
    """The offered tool a call names: by its full name, else (a call that names no namespace)
    the one member of that bare name of the `functions` namespace; None when the request
    offered none."""
    for every, _ in offered:
        if tool in every:
            return tool
    if namespace is None:
        for _, members in offered:
            if (found := members.get(name)) is not None:
                return found
    return None


def _bump(names: dict[str, int], name: str) -> None:
    if name in names or len(names) < MAX_NAMES:
        names[name] = names.get(name, 0) + 1


def empty() -> Export:
    """The export of a ledger that counted nothing."""
    return ToolLedger(read_multiplier=0.1, write_multiplier=1.25, max_bytes=0).live()


def _add_offer(into: dict[str, Any], row: Mapping[str, Any]) -> None:
    into["requests"] += row["requests"]
    for tier in TIERS:
        into["tiers"][tier] += row["tiers"].get(tier, 0)
    into["equivalents"] += row["equivalents"]
    into["usd"] += row["usd"]
    into["first"] = min(into["first"], row["first"])
    into["last"] = max(into["last"], row["last"])
    sessions = set(into["sessions"]) | set(row["sessions"])
    into["sessions"] = sorted(sessions)[:SESSIONS_KEPT]


def merge(exports: Sequence[Export]) -> Export:
    """One export holding what `exports` hold together (workers, or the state file and the
    live counts): rows of the same key added, first/last the earliest/latest, sessions
    united. Exact for every count; the order of `exports` changes no integer."""
    merged = empty()
    for export in exports:
        for digest, facts in export.get("catalogues", {}).items():
            merged["catalogues"].setdefault(digest, facts)
        for day, clients in export.get("offers", {}).items():
            for client, rows in clients.items():
                into = merged["offers"].setdefault(day, {}).setdefault(client, {})
                for digest, row in rows.items():
                    if digest not in into:
                        into[digest] = {**row, "tiers": dict(row["tiers"]), "sessions": []}
                        into[digest]["sessions"] = sorted(set(row["sessions"]))[:SESSIONS_KEPT]
                    else:
                        _add_offer(into[digest], row)
        for day, clients in export.get("calls", {}).items():
            for client, rows in clients.items():
                into = merged["calls"].setdefault(day, {}).setdefault(client, {})
                for tool, row in rows.items():
                    if tool not in into:
                        into[tool] = dict(row)
                    else:
                        into[tool]["calls"] += row["calls"]
                        into[tool]["last"] = max(into[tool]["last"], row["last"])
        for section, total, counts in (
            ("unknown_calls", "total", "names"),
            ("unpriced", "requests", "models"),
        ):
            part = export.get(section, {})
            merged[section][total] += part.get(total, 0)
            for name, count in part.get(counts, {}).items():
                merged[section][counts][name] = merged[section][counts].get(name, 0) + count
        for reason, row in export.get("cache_miss_reasons", {}).items():
            into = merged["cache_miss_reasons"].setdefault(
                reason, {"requests": 0, "missed_tokens": 0}
            )
            into["requests"] += row["requests"]
            into["missed_tokens"] += row["missed_tokens"]
        for section in ("input", "untracked"):
            for key, value in export.get(section, {}).items():
                merged[section][key] += value
        # The bytes every process holds, added; the bound each one has (the same setting).
        memory = export.get("memory", {"bytes": 0, "max_bytes": 0})
        merged["memory"]["bytes"] += memory["bytes"]
        merged["memory"]["max_bytes"] = max(merged["memory"]["max_bytes"], memory["max_bytes"])
    return merged
