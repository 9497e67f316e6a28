"""PURE. The kinds of counter Stats is made of, and the figures they give: a histogram with
its percentiles, one component's counters, one catalogue's request count with its cache
break-even, and how the workers' catalogue counts merge.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolslim.config.options import READ_MULTIPLIER, WRITE_MULTIPLIER
from toolslim.core.pipeline import ComponentRun, TokenTotals

CATALOGUES_PER_API = 8  # catalogues counted per API (cache.by_api), most requested first
CATALOGUE_ID = 12  # hex digits of a catalogue's identity on /stats: a name to tell them apart


def break_even(
    prefix: float, saved: float, read: float = READ_MULTIPLIER, write: float = WRITE_MULTIPLIER
) -> float | None:
    """Warm requests until compaction pays for the one cache write it causes:
    `((w - r) P - w s) / (r s)`, e.g. `(1.15 P - 1.25 s) / (0.1 s)`. None means never
    (nothing saved, or reads cost nothing); 0 means the first request already pays (the
    formula goes negative)."""
    if saved <= 0 or read <= 0:
        return None
    return max(0.0, ((write - read) * prefix - write * saved) / (read * saved))


def deferred_of(tokens: Mapping[str, tuple[int, int]]) -> Mapping[str, tuple[int, int]]:
    """The deferred tools' part of a request's token totals (none but in a TokenTotals)."""
    return tokens.deferred if isinstance(tokens, TokenTotals) else {}


def prompt_savings(tokens: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """The tokens a request's totals save in the prompt, and the prompt's catalogue tokens
    (P of the break-even: the first component's before, less its deferred tools, which are
    not in the prompt; 0 without totals)."""
    deferred = deferred_of(tokens)
    saved = sum(before - after for before, after in tokens.values())
    saved -= sum(before - after for before, after in deferred.values())
    if not tokens:
        return saved, 0
    first, (first_before, _) = next(iter(tokens.items()))
    return saved, first_before - deferred.get(first, (0, 0))[0]


class Histogram:
    """Cumulative-bucket histogram plus a bounded window of recent samples for percentiles."""

    def __init__(self, buckets: Sequence[float], window: int = 4096) -> None:
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last slot is +Inf
        self.total = 0.0
        self.recent: deque[float] = deque(maxlen=window)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.recent.append(value)

    def snapshot(self) -> dict[str, Any]:
        cumulative, running = [], 0
        for bound, count in zip((*self.bounds, "+Inf"), self.counts, strict=True):
            running += count
            cumulative.append([bound, running])
        ordered = sorted(self.recent)
        return {
            "count": running,
            "sum": self.total,
            "buckets": cumulative,
            **{f"p{q}": percentile(ordered, q) for q in (50, 90, 99)},
        }


Sample = TypeVar("Sample", int, float)


def percentile(ordered: Sequence[Sample], q: int) -> Sample | None:
    """Nearest-rank percentile of sorted samples: the smallest with at least q% of them at or
    below it (integer arithmetic, so no rounding), or None for no samples."""
    if not ordered:
        return None
    return ordered[max(0, -(-len(ordered) * q // 100) - 1)]


@dataclass
class ComponentCounters:
    applied: int = 0
    skipped: int = 0
    error: int = 0
    skip_reasons: Counter[str] = field(default_factory=Counter)
    tools_seen: int = 0
    tools_changed: int = 0
    removed: Counter[str] = field(default_factory=Counter)
    catalogue_bytes_before: int = 0
    catalogue_bytes_after: int = 0
    catalogue_tokens_before: int = 0
    catalogue_tokens_after: int = 0
    # Removed from deferred tools, which the provider keeps out of the prompt until a tool
    # search loads them: counted here instead of bytes_saved / tokens_saved.
    deferred_bytes_saved: int = 0
    deferred_tokens_saved: int = 0

    def add_run(self, run: ComponentRun, times: int = 1) -> None:
        """What the component did to `times` requests that each reported `run`."""
        self.tools_seen += run.tools_seen * times
        if run.outcome == "applied":  # a rewrite that was not adopted changed nothing
            self.applied += times
            self.catalogue_bytes_before += run.bytes_before * times
            self.catalogue_bytes_after += run.bytes_after * times
            self.deferred_bytes_saved += run.deferred_bytes_saved * times
            self.tools_changed += run.tools_changed * times
            removed = self.removed  # not Counter.update: its Mapping check is slow
            for keyword, count in run.removed.items():
                removed[keyword] += count * times
        elif run.outcome == "skipped":
            self.skipped += times
            self.skip_reasons[run.reason or "unknown"] += times
        else:
            self.error += times

    def add_tokens(self, before: int, after: int, times: int = 1) -> None:
        """The catalogue tokens of `times` requests, each `before` and `after` the component."""
        self.catalogue_tokens_before += before * times
        self.catalogue_tokens_after += after * times

    def snapshot(self) -> dict[str, Any]:
        return {
            "applied": self.applied,
            "skipped": self.skipped,
            "error": self.error,
            "skip_reasons": dict(sorted(self.skip_reasons.items())),
            "tools_seen": self.tools_seen,
            "tools_changed": self.tools_changed,
            "removed": dict(sorted(self.removed.items())),
            "catalogue_bytes_before": self.catalogue_bytes_before,
            "catalogue_bytes_after": self.catalogue_bytes_after,
            "bytes_saved": (
                self.catalogue_bytes_before - self.catalogue_bytes_after - self.deferred_bytes_saved
            ),
            "catalogue_tokens_before": self.catalogue_tokens_before,
            "catalogue_tokens_after": self.catalogue_tokens_after,
            "tokens_saved": (
                self.catalogue_tokens_before
                - self.catalogue_tokens_after
                - self.deferred_tokens_saved
            ),
            "deferred_bytes_saved": self.deferred_bytes_saved,
            "deferred_tokens_saved": self.deferred_tokens_saved,
        }


@dataclass(slots=True)
class CatalogueCount:
    """One catalogue an API's requests carried: how often, and its P and s once tokenized."""

    tools: int
    size: int  # bytes, as sent
    requests: int = 0
    catalogue_tokens: int | None = None  # P, None until a compacted request was tokenized
    tokens_saved: int = 0  # s

    def snapshot(self, identity: bytes, read: float, write: float) -> dict[str, Any]:
        p, s = self.catalogue_tokens, self.tokens_saved
        return {
            "catalogue": identity.hex()[:CATALOGUE_ID],
            "tools": self.tools,
            "bytes": self.size,
            "requests": self.requests,
            "catalogue_tokens": p,
            "tokens_saved_per_request": s,
            "warm_break_even_requests": None if p is None else break_even(p, s, read, write),
        }


def most_requested(entry: Mapping[str, Any]) -> tuple[int, str]:
    return -entry["requests"], entry["catalogue"]


_TOKENIZED = ("catalogue_tokens", "tokens_saved_per_request", "warm_break_even_requests")


def merge_catalogues(values: Sequence[Mapping[str, Sequence[Mapping[str, Any]]]]) -> dict[str, Any]:
    """`cache.by_api` of several workers as one: requests added per catalogue, P, s and the
    break-even from a worker that tokenized it (the same catalogue gives the same figures),
    the CATALOGUES_PER_API most requested kept per API."""
    merged: dict[str, dict[str, dict[str, Any]]] = {}
    for value in values:
        for api, entries in value.items():
            table = merged.setdefault(api, {})
            for entry in entries:
                known = table.get(entry["catalogue"])
                if known is None:
                    table[entry["catalogue"]] = dict(entry)
                    continue
                known["requests"] += entry["requests"]
                if known["catalogue_tokens"] is None and entry["catalogue_tokens"] is not None:
                    for key in _TOKENIZED:
                        known[key] = entry[key]
    return {
        api: sorted(table.values(), key=most_requested)[:CATALOGUES_PER_API]
        for api, table in sorted(merged.items())
    }
