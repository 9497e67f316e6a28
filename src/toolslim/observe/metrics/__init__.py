"""The only importer of prometheus_client: a Collector that renders one `Stats.snapshot()` as
Prometheus families at scrape time, in a registry the app owns (never the global one). A
family group that grew on its own is a module here (`lint`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, get_args

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from toolslim.core.entry import Outcome
from toolslim.observe.metrics import lint, tools
from toolslim.observe.stats import Stats

TOOL_SCHEMA = "toolschema"  # the catalogue compactor, also exported under its own family names
# The `le` spelling prometheus_client's own histograms use ("0.0001", "1.0", "+Inf").
_le: Callable[[float], str] = floatToGoString
CONTENT_TYPE: str = CONTENT_TYPE_LATEST  # for the /metrics response
Registry = CollectorRegistry  # what make_registry returns, for the app's typed key


def make_registry(stats: Stats) -> CollectorRegistry:
    """A fresh registry holding one collector over `stats`; render it with `exposition`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsCollector(stats))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """One scrape of `registry` in the Prometheus text format (serve with `CONTENT_TYPE`)."""
    return generate_latest(registry)


class StatsCollector(Collector):
    """Builds every family from a single snapshot per scrape: no bookkeeping of its own."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        return iter(families(self.stats.snapshot()))


def families(snap: Mapping[str, Any]) -> list[Metric]:
    """Every Prometheus family for one /stats snapshot (see docs/stats.md for the list)."""
    req, memo, usage, cache = snap["requests"], snap["memo"], snap["usage"], snap["cache"]
    components: Mapping[str, Mapping[str, Any]] = snap["components"]
    return [
        _gauge("toolslim_start_time_seconds", "Unix time the proxy started.", snap["started_at"]),
        _counter("toolslim_requests", "Proxied requests (admin endpoints excluded).", req["total"]),
        _labelled(
            _counter_family(
                "toolslim_requests_by_upstream", "Proxied requests by upstream.", "upstream"
            ),
            req["by_upstream"],
        ),
        _labelled(
            _counter_family("toolslim_requests_by_api", "Proxied requests by API shape.", "api"),
            req["by_api"],
        ),
        _labelled(
            _counter_family(
                "toolslim_requests_by_status",
                "Proxied requests by response status class (1xx..5xx, other).",
                "status_class",
            ),
            req["by_status"],
        ),
        _labelled(
            _counter_family(
                "toolslim_requests_by_transport",
                "Proxied requests by transport (http, websocket: one per response.create).",
                "transport",
            ),
            req["by_transport"],
        ),
        *_websocket_families(snap["websockets"]),
        *_connection_families(snap["connections"]),
        *_capture_families(snap["capture"]),
        _counter(
            "toolslim_request_received_bytes",
            "Request body bytes received from clients.",
            req["bytes_received"],
        ),
        _counter(
            "toolslim_request_forwarded_bytes",
            "Request body bytes forwarded upstream (after compaction).",
            req["bytes_forwarded"],
        ),
        _gauge(
            "toolslim_active_streams", "Responses being relayed right now.", req["active_streams"]
        ),
        _counter(
            "toolslim_token_counts_skipped",
            "Requests whose catalogue tokens were not counted because the counter was busy.",
            req["tokens_skipped"],
        ),
        _gauge(
            "toolslim_token_counts_pending",
            "Requests whose catalogue tokens are still being counted off the request path.",
            req["tokens_pending"],
        ),
        _counter(
            "toolslim_client_disconnects",
            "Clients that went away before the response ended.",
            req["client_disconnects"],
        ),
        _labelled(
            _counter_family(
                "toolslim_upstream_errors",
                "Upstream failures by kind (connect, timeout, reset).",
                "kind",
            ),
            req["upstream_errors"],
        ),
        *_component_families(components),
        _counter("toolslim_memo_hits", "Catalogues served from the memo.", memo["hits"]),
        _counter("toolslim_memo_misses", "Catalogues compacted afresh.", memo["misses"]),
        _gauge("toolslim_memo_entries", "Catalogues held in the memo.", memo["size"]),
        _gauge("toolslim_memo_capacity_entries", "Memo capacity.", memo["capacity"]),
        _gauge("toolslim_memo_bytes", "Bytes the memo holds, as its bound counts.", memo["bytes"]),
        _gauge("toolslim_memo_capacity_bytes", "The memo's bound in bytes.", memo["max_bytes"]),
        _labelled(
            _counter_family(
                "toolslim_upstream_tokens",
                "Tokens the upstream reported (input, output, cache_read, cache_write).",
                "kind",
            ),
            usage["tokens"],
        ),
        _counter(
            "toolslim_responses_with_usage",
            "Responses whose token usage was read.",
            usage["responses_with_usage"],
        ),
        _counter(
            "toolslim_usage_unavailable",
            "Responses whose token usage could not be read (never an error).",
            usage["usage_unavailable"],
        ),
        *_cache_families(cache),
        *_drift_families(snap["drift"], snap["advice"]),
        *lint.families(snap["lint"]),
        *tools.families(snap["tools"]),
        _histogram(
            "toolslim_proxy_overhead_seconds",
            "Time the proxy adds: request received to upstream request sent, and upstream"
            " chunk to client write.",
            snap["timings"]["proxy_overhead_seconds"],
        ),
        _histogram(
            "toolslim_upstream_ttfb_seconds",
            "Upstream time to first response byte.",
            snap["timings"]["upstream_ttfb_seconds"],
        ),
    ]


def _websocket_families(websockets: Mapping[str, Any]) -> list[Metric]:
    return [
        _gauge(
            "toolslim_websockets_active",
            "WebSockets being relayed right now.",
            websockets["active"],
        ),
        _counter(
            "toolslim_websockets", "WebSockets relayed (accepted upgrades).", websockets["total"]
        ),
        _counter(
            "toolslim_websockets_refused",
            "Upgrades answered 426 because the websocket setting is off.",
            websockets["refused"],
        ),
        _labelled(
            _counter_family(
                "toolslim_websockets_closed",
                "Relayed WebSockets by what ended them (client, upstream, idle, shutdown, error).",
                "closed_by",
            ),
            websockets["closed_by"],
        ),
    ]


def _connection_families(connections: Mapping[str, Any]) -> list[Metric]:
    return [
        _gauge("toolslim_client_connections", "Client connections open now.", connections["open"]),
        _gauge(
            "toolslim_client_connections_busy",
            "Client connections whose request is being handled now.",
            connections["busy"],
        ),
        _gauge(
            "toolslim_client_connections_max",
            "The most client connections open at once (max_connections).",
            connections["max"],
        ),
        _labelled(
            _counter_family(
                "toolslim_client_connections_closed",
                "Client connections the proxy closed, by reason (body_timeout, evicted,"
                " headers_timeout, keepalive_timeout, refused).",
                "reason",
            ),
            connections["closed"],
        ),
        _gauge(
            "toolslim_request_buffer_bytes",
            "Request body bytes held in memory now.",
            connections["buffered_bytes"],
        ),
        _gauge(
            "toolslim_request_buffer_capacity_bytes",
            "The most request body bytes held at once (max_buffered_bytes).",
            connections["max_buffered_bytes"],
        ),
    ]


def _capture_families(capture: Mapping[str, Any]) -> list[Metric]:
    return [
        _counter(
            "toolslim_capture_written", "Requests written to the capture.", capture["written"]
        ),
        _counter(
            "toolslim_capture_dropped",
            "Requests not captured: the writer's queue was full or closed.",
            capture["dropped"],
        ),
        _counter(
            "toolslim_capture_errors",
            "Captured requests lost to a serialization or disk error.",
            capture["errors"],
        ),
    ]


def _component_families(components: Mapping[str, Mapping[str, Any]]) -> list[Metric]:
    runs = _counter_family(
        "toolslim_component_runs",
        "Pipeline component runs by outcome (applied, skipped, error); per component the"
        " outcomes sum to toolslim_requests_total.",
        "component",
        "outcome",
    )
    skips = _counter_family(
        "toolslim_component_skips",
        "Skipped component runs by reason.",
        "component",
        "reason",
    )
    removed = _counter_family(
        "toolslim_component_removed",
        "What a component removed in adopted rewrites, by name: keywords (toolschema), "
        "definitions (tooldefs), per-step counts (toolbudget); see docs/components.md.",
        "component",
        "keyword",
    )
    per_component = {
        "tools_seen": _counter_family(
            "toolslim_tools_seen", "Tools the component looked at.", "component"
        ),
        "tools_changed": _counter_family(
            "toolslim_tools_changed", "Tools whose schema the component changed.", "component"
        ),
        "bytes_saved": _counter_family(
            "toolslim_component_bytes_saved", "Catalogue bytes saved.", "component"
        ),
        "tokens_saved": _counter_family(
            "toolslim_component_tokens_saved",
            "Catalogue tokens saved (canonical compact form, cl100k).",
            "component",
        ),
        "deferred_bytes_saved": _counter_family(
            "toolslim_component_deferred_bytes_saved",
            "Catalogue bytes removed from deferred tools (out of the prompt until loaded).",
            "component",
        ),
        "deferred_tokens_saved": _counter_family(
            "toolslim_component_deferred_tokens_saved",
            "Catalogue tokens removed from deferred tools (out of the prompt until loaded).",
            "component",
        ),
    }
    catalogue_bytes = _counter_family(
        "toolslim_component_catalogue_bytes",
        "Catalogue bytes of applied runs, before and after the component.",
        "component",
        "stage",
    )
    catalogue_tokens = _counter_family(
        "toolslim_component_catalogue_tokens",
        "Catalogue tokens of applied runs, before and after the component.",
        "component",
        "stage",
    )
    for name, c in components.items():
        for outcome in get_args(Outcome):
            runs.add_metric([name, outcome], c[outcome])
        for reason, count in c["skip_reasons"].items():
            skips.add_metric([name, reason], count)
        for keyword, count in c["removed"].items():
            removed.add_metric([name, keyword], count)
        for key, family in per_component.items():
            family.add_metric([name], c[key])
        for stage in ("before", "after"):
            catalogue_bytes.add_metric([name, stage], c[f"catalogue_bytes_{stage}"])
            catalogue_tokens.add_metric([name, stage], c[f"catalogue_tokens_{stage}"])
    tool_schema = components.get(TOOL_SCHEMA, {})
    return [
        runs,
        skips,
        removed,
        *per_component.values(),
        catalogue_bytes,
        catalogue_tokens,
        _counter(
            "toolslim_tool_schema_bytes_saved",
            "Catalogue bytes the toolschema compactor saved.",
            tool_schema.get("bytes_saved", 0),
        ),
        _counter(
            "toolslim_tool_schema_tokens_saved",
            "Catalogue tokens the toolschema compactor saved.",
            tool_schema.get("tokens_saved", 0),
        ),
    ]


def _cache_families(cache: Mapping[str, Any]) -> list[Metric]:
    break_even = GaugeMetricFamily(
        "toolslim_cache_warm_break_even_requests",
        "Warm requests needed to repay re-anchoring the prompt cache once,"
        " ((w-r)P - w s) / (r s); absent until a catalogue was compacted.",
    )
    if cache["warm_break_even_requests"] is not None:
        break_even.add_metric([], cache["warm_break_even_requests"])
    # Per API, its most requested catalogue (cache.by_api's first); the catalogue's name is
    # text, left out: `api` is the only label.
    top = _gauge_family(
        "toolslim_cache_top_catalogue_requests",
        "Requests that carried the API's most requested catalogue.",
    )
    top_tokens = _gauge_family(
        "toolslim_cache_top_catalogue_tokens",
        "Tokens of the API's most requested catalogue before compaction (its P); absent"
        " until it was tokenized.",
    )
    top_saved = _gauge_family(
        "toolslim_cache_top_catalogue_saved_per_request_tokens",
        "Tokens compaction saves per request on the API's most requested catalogue (its s).",
    )
    top_break_even = _gauge_family(
        "toolslim_cache_top_catalogue_warm_break_even_requests",
        "The warm break-even of the API's most requested catalogue; absent while null.",
    )
    for api, catalogues in cache["by_api"].items():
        if not catalogues:
            continue
        first = catalogues[0]
        top.add_metric([api], first["requests"])
        top_saved.add_metric([api], first["tokens_saved_per_request"])
        if first["catalogue_tokens"] is not None:
            top_tokens.add_metric([api], first["catalogue_tokens"])
        if first["warm_break_even_requests"] is not None:
            top_break_even.add_metric([api], first["warm_break_even_requests"])
    return [
        _gauge(
            "toolslim_cache_read_multiplier_ratio",
            "Price of a cache-read token relative to an input token (r).",
            cache["read_multiplier"],
        ),
        _gauge(
            "toolslim_cache_write_multiplier_ratio",
            "Price of a cache-write token relative to an input token (w).",
            cache["write_multiplier"],
        ),
        _counter(
            "toolslim_cache_cold_requests",
            "Compacted requests that read nothing from the upstream cache.",
            cache["cold_requests"],
        ),
        _counter(
            "toolslim_cache_warm_requests",
            "Compacted requests that read from the upstream cache.",
            cache["warm_requests"],
        ),
        _counter(
            "toolslim_cache_cold_tokens_saved",
            "Catalogue tokens saved on requests with a cold cache prefix.",
            cache["cold_tokens_saved"],
        ),
        _counter(
            "toolslim_cache_warm_tokens_saved",
            "Catalogue tokens saved on requests with a warm cache prefix.",
            cache["warm_tokens_saved"],
        ),
        _gauge(
            "toolslim_cache_catalogue_tokens",
            "Tokens of the latest compacted catalogue before compaction (P).",
            cache["catalogue_tokens"],
        ),
        _gauge(
            "toolslim_cache_saved_per_request_tokens",
            "Tokens the latest compacted catalogue saved per request (s).",
            cache["tokens_saved_per_request"],
        ),
        break_even,
        top,
        top_tokens,
        top_saved,
        top_break_even,
    ]


def _drift_families(
    drift: Mapping[str, Any], advice: Mapping[str, Mapping[str, Any]]
) -> list[Metric]:
    return [
        _gauge(
            "toolslim_drift_sessions",
            "Sessions whose last catalogue the drift tracker knows now.",
            drift["sessions"],
        ),
        _labelled(
            _counter_family(
                "toolslim_catalogue_changes",
                "Catalogue changes within a session, by kind (order_only, added, removed,"
                " changed, mixed).",
                "kind",
            ),
            drift["changes"],
        ),
        _labelled(
            _counter_family(
                "toolslim_catalogue_change_cache_write_tokens",
                "Cache-write tokens the upstream reported on the request that carried a"
                " catalogue change, by kind.",
                "kind",
            ),
            drift["cache_write_tokens_after"],
        ),
        _labelled(
            _counter_family(
                "toolslim_advice_requests",
                "Requests that carried an advisory (see /stats advice.<name>.fix).",
                "advice",
            ),
            {name: a["requests"] for name, a in advice.items()},
        ),
        _labelled(
            _counter_family(
                "toolslim_advice_catalogue_bytes",
                "Catalogue bytes of the MCP tools of the requests that carried an advisory.",
                "advice",
            ),
            {name: a["bytes"] for name, a in advice.items()},
        ),
    ]


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    # CounterMetricFamily appends "_total" to the sample name itself.
    return CounterMetricFamily(name, documentation, value=value)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter_family(name: str, documentation: str, *labels: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, labels=labels)


def _gauge_family(name: str, documentation: str) -> GaugeMetricFamily:
    """A gauge per API."""
    return GaugeMetricFamily(name, documentation, labels=("api",))


def _labelled(family: CounterMetricFamily, values: Mapping[str, float]) -> CounterMetricFamily:
    for label, value in values.items():
        family.add_metric([label], value)
    return family


def _histogram(name: str, documentation: str, h: Mapping[str, Any]) -> HistogramMetricFamily:
    buckets = [(b if isinstance(b, str) else _le(b), count) for b, count in h["buckets"]]
    family = HistogramMetricFamily(name, documentation, labels=[])
    family.add_metric([], buckets, h["sum"])
    return family
