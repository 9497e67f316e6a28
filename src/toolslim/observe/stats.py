"""PURE. The one source of truth for every counter; `snapshot()` is what /stats, /metrics and
the dashboard all render, so they cannot disagree.

Must not import aiohttp or prometheus_client. Called only from the event-loop thread.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, get_args

from toolslim.config.options import READ_MULTIPLIER, WRITE_MULTIPLIER
from toolslim.config.settings import DEFAULTS
from toolslim.core.facts import CatalogueFacts
from toolslim.core.pipeline import RunReport
from toolslim.observe.advice import ADVICE, FIX, Advice
from toolslim.observe.counters import (
    CATALOGUES_PER_API,
    CatalogueCount,
    ComponentCounters,
    Histogram,
    break_even,
    deferred_of,
    most_requested,
    prompt_savings,
)
from toolslim.observe.drift import KINDS, Change
from toolslim.observe.health import Health
from toolslim.observe.ledger import book, render
from toolslim.wire.errors import Failure
from toolslim.wire.usage import Usage

# How a request arrived: an HTTP request, or a WebSocket's response.create.
Transport = Literal["http", "websocket"]
# Who ended a relayed WebSocket: either side closing, no message either way for
# timeouts.idle_websocket, the proxy shutting down, or a failure on either leg.
ClosedBy = Literal["client", "error", "idle", "shutdown", "upstream"]
# Why the door closed a client connection: a stalled body (408), room made at the connection
# limit, request headers or keep-alive past their limit, refused at the limit (503), or a
# request still in flight when the shutdown grace ended.
ConnectionClose = Literal[
    "body_timeout", "evicted", "headers_timeout", "keepalive_timeout", "refused", "shutdown"
]

SCHEMA_VERSION = 1
STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
UPSTREAM_ERROR_KINDS: tuple[Failure, ...] = get_args(Failure)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
TRANSPORTS: tuple[Transport, ...] = get_args(Transport)
WEBSOCKET_CLOSERS: tuple[ClosedBy, ...] = get_args(ClosedBy)
CONNECTION_CLOSES: tuple[ConnectionClose, ...] = get_args(ConnectionClose)
# What the door reports of the connections now (limits.Door.gauges).
CONNECTION_GAUGES = ("open", "busy", "max", "buffered_bytes", "max_buffered_bytes")
# Seconds. Proxy overhead is sub-millisecond when healthy; TTFB is the model thinking.
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)
TTFB_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
RECENT_CHANGES = 50  # catalogue changes /stats lists in drift.recent
RUNS_HELD = 64  # distinct reports' runs counted as repeats before they are added in
_NONE: Mapping[Any, Any] = MappingProxyType({})  # an empty mapping to read, never a new one
# An HTTP status -> its class in by_status (any other number counts as "other").
_STATUS_CLASS = {status: f"{status // 100}xx" for status in range(100, 600)}


class Stats:
    """Every counter the proxy keeps. Mutated by `record_*`, read only through `snapshot()`."""

    def __init__(
        self,
        components: Iterable[str],
        *,
        cache_read_multiplier: float = READ_MULTIPLIER,
        cache_write_multiplier: float = WRITE_MULTIPLIER,
        series_interval: float = 10.0,
        series_points: int = 360,
        clock: Callable[[], float] = time.time,
        memo_gauges: Callable[[], tuple[int, int]] = lambda: (0, 0),
        memo_byte_gauges: Callable[[], tuple[int, int]] = lambda: (0, 0),
        tokens_pending: Callable[[], int] = lambda: 0,
        connection_gauges: Callable[[], Mapping[str, int]] = dict,
        capture_counts: Callable[[], tuple[int, int, int]] | None = None,
        tools: book.ToolLedger | None = None,
        unused_after: tuple[int, int] = (
            DEFAULTS["ledger_min_requests"],
            DEFAULTS["ledger_min_sessions"],
        ),
        tool_metrics: bool = False,
    ) -> None:
        self.clock = clock
        # The tool ledger (observe/ledger), and (requests, sessions) before a tool is unused.
        self.tools = tools or book.ToolLedger(
            read_multiplier=cache_read_multiplier,
            write_multiplier=cache_write_multiplier,
            clock=clock,
        )
        self.unused_after = unused_after
        self.tool_metrics = tool_metrics  # /metrics series per tool (ledger.tool_metrics)
        self.started_at = clock()
        self.read_multiplier = cache_read_multiplier
        self.write_multiplier = cache_write_multiplier
        self.memo_gauges = memo_gauges
        self.memo_byte_gauges = memo_byte_gauges  # (bytes held, the bound)
        self.tokens_pending = tokens_pending  # requests whose catalogue tokens are being counted
        self.settle: Callable[[], None] = lambda: None  # see settle_with
        self.connection_gauges = connection_gauges
        self.capture_counts = capture_counts  # (written, dropped, errors); None: no capture
        self.connections_closed: Counter[str] = Counter({k: 0 for k in CONNECTION_CLOSES})
        self.components = {name: ComponentCounters() for name in components}
        self.requests = 0
        self.by_upstream: Counter[str] = Counter()
        self.by_api: Counter[str] = Counter()
        self.by_status: Counter[str] = Counter({c: 0 for c in STATUS_CLASSES})
        self.by_transport: Counter[str] = Counter({t: 0 for t in TRANSPORTS})
        self.bytes_received = 0
        self.bytes_forwarded = 0
        self.active_streams = 0
        self.websockets_active = 0
        self.websockets_total = 0
        self.websockets_refused = 0  # upgrades answered 426 because `websocket: false`
        self.websockets_closed_by: Counter[str] = Counter({k: 0 for k in WEBSOCKET_CLOSERS})
        self.tokens_skipped = 0  # requests whose tokens were not counted: the counter was full
        self.client_disconnects = 0
        self.upstream_errors: Counter[str] = Counter({k: 0 for k in UPSTREAM_ERROR_KINDS})
        self.memo_hits = 0
        self.memo_misses = 0
        self.usage_tokens: Counter[str] = Counter({k: 0 for k in TOKEN_KINDS})
        self.responses_with_usage = 0
        self.usage_unavailable = 0
        self.cold_requests = 0
        self.warm_requests = 0
        self.cold_tokens_saved = 0
        self.warm_tokens_saved = 0
        self.last_catalogue_tokens = 0  # P of the break-even, from the latest applied catalogue
        self.last_tokens_saved = 0  # s of the break-even
        self.last_tokens_at = 0.0  # when P and s were set: across workers, the latest wins
        # api -> catalogue identity -> its count, at most CATALOGUES_PER_API per API.
        self.catalogues: dict[str, dict[bytes, CatalogueCount]] = {}
        self.overhead = Histogram(OVERHEAD_BUCKETS)
        self.ttfb = Histogram(TTFB_BUCKETS)
        self.drift_sessions: Callable[[], int] = lambda: 0  # sessions tracked now (a gauge)
        self.drift_changes: Counter[str] = Counter({k: 0 for k in KINDS})
        self.drift_cache_writes: Counter[str] = Counter({k: 0 for k in KINDS})
        self.drift_recent: deque[Change] = deque(maxlen=RECENT_CHANGES)
        self.advice_requests: Counter[str] = Counter({a: 0 for a in ADVICE})
        self.advice_bytes: Counter[str] = Counter({a: 0 for a in ADVICE})
        self.health = Health(clock)  # tool health: lint findings and upstream rejections
        self.series_interval = series_interval
        self.series: deque[list[float]] = deque(maxlen=series_points)
        self._point: list[float] = [float("inf"), 0, 0, 0]  # the current one; none yet
        # id of a runs tuple -> [it, requests that reported it, bytes saved], since last added;
        # of token totals -> [them, requests, tokens saved, the prompt's catalogue tokens].
        self._runs: dict[int, list[Any]] = {}
        self._tokens: dict[int, list[Any]] = {}

    def _series_point(self) -> list[float]:
        """The point of the interval now falls in (kept: several calls per request ask)."""
        now, start = self.clock(), self._point[0]
        if not start <= now < start + self.series_interval:
            start = now // self.series_interval * self.series_interval
            if not self.series or self.series[-1][0] != start:
                self.series.append([start, 0, 0, 0])
            self._point = self.series[-1]
        return self._point

    def _counters(self, component: str) -> ComponentCounters:
        """A component's counters (made on first use, not built to be thrown away on every
        call as `setdefault` would)."""
        counters = self.components.get(component)
        if counters is None:
            counters = self.components[component] = ComponentCounters()
        return counters

    def record_request(
        self,
        *,
        upstream: str,
        api: str,
        status: int,
        bytes_in: int,
        bytes_out: int,
        transport: Transport = "http",
    ) -> None:
        """One proxied request, counted once when its response status is known: an HTTP
        request, or a `response.create` message on a WebSocket."""
        self.requests += 1
        self.by_upstream[upstream] += 1
        self.by_api[api] += 1
        self.by_transport[transport] += 1
        self.by_status[_STATUS_CLASS.get(status, "other")] += 1
        self.bytes_received += bytes_in
        self.bytes_forwarded += bytes_out
        self._series_point()[1] += 1

    def record_pipeline(self, report: RunReport) -> None:
        """What each component did to one request; tokens follow in `record_tokens`.

        A catalogue's memo hits report the very same runs: each distinct runs object is
        counted as repeats, added to the component counters when they are read (`_add_runs`).
        """
        self.memo_hits += report.memo_hits
        self.memo_misses += report.memo_misses
        runs = report.runs
        repeated = self._runs.get(id(runs))
        if repeated is None:
            if len(self._runs) >= RUNS_HELD:
                self._add_runs()
            saved = 0
            for run in runs:
                self._counters(run.component)  # made in the order requests first name them
                if run.outcome == "applied":
                    saved += run.bytes_saved - run.deferred_bytes_saved
            repeated = self._runs[id(runs)] = [runs, 0, saved]  # held: its id stays its own
        repeated[1] += 1
        self._series_point()[3] += repeated[2]

    def _add_runs(self) -> None:
        """Add the runs counted since the last time to the component counters."""
        for runs, times, _ in self._runs.values():
            for run in runs:
                self._counters(run.component).add_run(run, times)
        self._runs.clear()

    def record_tokens(
        self, tokens: Mapping[str, tuple[int, int]], catalogue: tuple[str, bytes] | None = None
    ) -> int:
        """Catalogue tokens before/after per component for one request; returns the tokens
        saved in the prompt (a TokenTotals' deferred part is counted apart). `catalogue`,
        (api, identity) as `record_catalogue` counted it, gets this P and s.

        `tokens` must not change once given: a catalogue's memo hits give its kept,
        read-only totals, so like runs each distinct totals object is counted as repeats,
        added to the counters when read."""
        repeated = self._tokens.get(id(tokens))
        if repeated is None:
            if len(self._tokens) >= RUNS_HELD:
                self._add_tokens()
            repeated = self._tokens[id(tokens)] = [tokens, 0, *prompt_savings(tokens)]
            for name in (*tokens, *deferred_of(tokens)):
                self._counters(name)  # made in the order requests first name them
        repeated[1] += 1
        saved: int = repeated[2]
        prompt: int = repeated[3]
        if tokens:
            self.last_catalogue_tokens = prompt
            self.last_tokens_saved = saved
            self.last_tokens_at = self.clock()
            if catalogue is not None:
                api, identity = catalogue
                count = self.catalogues.get(api, _NONE).get(identity)
                if count is not None:
                    count.catalogue_tokens, count.tokens_saved = self.last_catalogue_tokens, saved
        self._series_point()[2] += saved
        return saved

    def _add_tokens(self) -> None:
        """Add the catalogue tokens counted since the last time to the component counters."""
        for tokens, times, _, _ in self._tokens.values():
            for name, (before, after) in tokens.items():
                self._counters(name).add_tokens(before, after, times)
            for name, (before, after) in deferred_of(tokens).items():
                self._counters(name).deferred_tokens_saved += (before - after) * times
        self._tokens.clear()

    def record_catalogue(
        self, api: str, identity: bytes, catalogues: Sequence[CatalogueFacts]
    ) -> None:
        """One request of `api` that carried these catalogues (`identity`: drift.identity_of
        them). A new one, with the table full, takes the place of the least requested (the
        oldest of those): the most requested stay, whatever a flood of new ones does."""
        table = self.catalogues.get(api)
        if table is None:
            table = self.catalogues[api] = {}
        count = table.get(identity)
        if count is None:
            if len(table) >= CATALOGUES_PER_API:
                del table[min(table, key=lambda key: table[key].requests)]
            tools = sum(len(c.tools.names) for c in catalogues)
            count = table[identity] = CatalogueCount(tools, sum(c.size for c in catalogues))
        count.requests += 1

    def _catalogues_snapshot(self) -> dict[str, list[dict[str, Any]]]:
        read, write = self.read_multiplier, self.write_multiplier
        return {
            api: sorted(
                (count.snapshot(identity, read, write) for identity, count in table.items()),
                key=most_requested,
            )
            for api, table in sorted(self.catalogues.items())
        }

    def record_usage(self, usage: Usage | None, tokens_saved: int = 0) -> None:
        """Usage the upstream reported for one response; None counts as unavailable."""
        if usage is None:
            self.usage_unavailable += 1
            return
        self.responses_with_usage += 1
        self.usage_tokens["input"] += usage.input_tokens
        self.usage_tokens["output"] += usage.output_tokens
        self.usage_tokens["cache_read"] += usage.cache_read_input_tokens
        self.usage_tokens["cache_write"] += usage.cache_creation_input_tokens
        if tokens_saved:
            if usage.cache_read_input_tokens > 0:
                self.warm_requests += 1
                self.warm_tokens_saved += tokens_saved
            else:
                self.cold_requests += 1
                self.cold_tokens_saved += tokens_saved

    def record_catalogue_change(self, change: Change) -> None:
        """A session's catalogue changed (drift.Tracker), with what the provider charged."""
        self.drift_changes[change.kind] += 1
        self.drift_cache_writes[change.kind] += change.cache_write_tokens_after
        self.drift_recent.append(change)

    def settle_with(self, count_finished: Callable[[], None]) -> None:
        """What counts the requests that finished and are not counted yet (the ledger counts
        them in batches): every snapshot calls it first, so what it shows is never behind."""
        self.settle = count_finished

    def track_drift_sessions(self, gauge: Callable[[], int]) -> None:
        """Where `drift.sessions` is read at snapshot time: the drift tracker's size."""
        self.drift_sessions = gauge

    def record_advice(self, advice: Advice, catalogue_bytes: int) -> None:
        """One request that carries an advisory (counted once per request)."""
        self.advice_requests[advice] += 1
        self.advice_bytes[advice] += catalogue_bytes

    def _advice_snapshot(self) -> dict[str, dict[str, Any]]:
        # A refused upgrade is counted once, as a WebSocket: the advisory reads that count.
        requests = {**self.advice_requests, "websocket_disabled": self.websockets_refused}
        return {
            name: {"requests": requests[name], "bytes": self.advice_bytes[name], "fix": FIX[name]}
            for name in ADVICE
        }

    def record_upstream_error(self, kind: str) -> None:
        self.upstream_errors[kind] += 1

    def record_client_disconnect(self) -> None:
        self.client_disconnects += 1

    def record_connection_closed(self, reason: ConnectionClose) -> None:
        """A client connection the proxy closed, for one of CONNECTION_CLOSES."""
        self.connections_closed[reason] += 1

    def record_tokens_skipped(self) -> None:
        """A request whose new catalogue was not tokenized: too many counts were queued.
        Its bytes are counted; its tokens are not (token totals are then a lower bound)."""
        self.tokens_skipped += 1

    def websocket_opened(self) -> None:
        self.websockets_active += 1
        self.websockets_total += 1

    def websocket_closed(self, closed_by: ClosedBy) -> None:
        self.websockets_active -= 1
        self.websockets_closed_by[closed_by] += 1

    def record_websocket_refused(self) -> None:
        self.websockets_refused += 1

    def stream_opened(self) -> None:
        self.active_streams += 1

    def stream_closed(self) -> None:
        self.active_streams -= 1

    def observe_overhead(self, seconds: float) -> None:
        self.overhead.observe(seconds)

    def observe_ttfb(self, seconds: float) -> None:
        self.ttfb.observe(seconds)

    def break_even_requests(self) -> float | None:
        """Warm requests needed to repay re-anchoring the cache once: ((w-r)P - w s) / (r s)."""
        return break_even(
            self.last_catalogue_tokens,
            self.last_tokens_saved,
            self.read_multiplier,
            self.write_multiplier,
        )

    def _connections(self) -> dict[str, Any]:
        gauges = self.connection_gauges()
        return {
            **{name: gauges.get(name, 0) for name in CONNECTION_GAUGES},
            "closed": dict(sorted(self.connections_closed.items())),
        }

    def _capture(self) -> dict[str, Any]:
        written, dropped, errors = self.capture_counts() if self.capture_counts else (0, 0, 0)
        return {
            "enabled": self.capture_counts is not None,
            "written": written,
            "dropped": dropped,
            "errors": errors,
        }

    def tools_state(self) -> dict[str, Any]:
        """The tool ledger as a worker publishes it (fleet.state_of): its export and the
        settings /stats `tools` is rendered with (render.shown)."""
        return {
            "ledger": self.tools.export(),
            "unused_after": list(self.unused_after),
            "tool_metrics": self.tool_metrics,
        }

    def snapshot(self) -> dict[str, Any]:
        """Plain JSON-ready dict; the documented /stats schema (keys are added, never renamed)."""
        self.settle()  # the exchanges still to be counted first, then the repeats added in
        self._add_runs()
        self._add_tokens()
        memo_size, memo_capacity = self.memo_gauges()
        memo_bytes, memo_max_bytes = self.memo_byte_gauges()
        now = self.clock()
        tools = render.tools_of(self.tools_state(), now)
        return {
            "version": SCHEMA_VERSION,
            "started_at": self.started_at,
            "uptime_seconds": now - self.started_at,
            "requests": {
                "total": self.requests,
                "by_upstream": dict(sorted(self.by_upstream.items())),
                "by_api": dict(sorted(self.by_api.items())),
                "by_status": dict(sorted(self.by_status.items())),
                "by_transport": dict(sorted(self.by_transport.items())),
                "bytes_received": self.bytes_received,
                "bytes_forwarded": self.bytes_forwarded,
                "active_streams": self.active_streams,
                "tokens_pending": self.tokens_pending(),
                "tokens_skipped": self.tokens_skipped,
                "client_disconnects": self.client_disconnects,
                "upstream_errors": dict(sorted(self.upstream_errors.items())),
            },
            "connections": self._connections(),
            "capture": self._capture(),
            "websockets": {
                "active": self.websockets_active,
                "total": self.websockets_total,
                "refused": self.websockets_refused,
                "closed_by": dict(sorted(self.websockets_closed_by.items())),
            },
            "components": {n: c.snapshot() for n, c in self.components.items()},
            "memo": {
                "hits": self.memo_hits,
                "misses": self.memo_misses,
                "size": memo_size,
                "capacity": memo_capacity,
                "bytes": memo_bytes,
                "max_bytes": memo_max_bytes,
            },
            "usage": {
                "tokens": dict(self.usage_tokens),
                "responses_with_usage": self.responses_with_usage,
                "usage_unavailable": self.usage_unavailable,
            },
            "cache": {
                "read_multiplier": self.read_multiplier,
                "write_multiplier": self.write_multiplier,
                "cold_requests": self.cold_requests,
                "warm_requests": self.warm_requests,
                "cold_tokens_saved": self.cold_tokens_saved,
                "warm_tokens_saved": self.warm_tokens_saved,
                "catalogue_tokens": self.last_catalogue_tokens,
                "tokens_saved_per_request": self.last_tokens_saved,
                "warm_break_even_requests": self.break_even_requests(),
                "by_api": self._catalogues_snapshot(),
            },
            "timings": {
                "proxy_overhead_seconds": self.overhead.snapshot(),
                "upstream_ttfb_seconds": self.ttfb.snapshot(),
            },
            "drift": {
                "sessions": self.drift_sessions(),
                "changes": dict(self.drift_changes),
                "cache_write_tokens_after": dict(self.drift_cache_writes),
                "recent": [change.as_dict() for change in self.drift_recent],
            },
            "advice": render.with_unused_servers(self._advice_snapshot(), tools),
            "lint": self.health.snapshot(),
            "tools": tools,
            "series": {
                "interval_seconds": self.series_interval,
                "points": [
                    {"t": t, "requests": int(r), "tokens_saved": int(k), "bytes_saved": int(b)}
                    for t, r, k, b in self.series
                ],
            },
        }
