"""What /metrics must say for a /stats snapshot, and the samples a scrape's text holds: the
readings the metrics, workers, drift and advice tests share."""

from typing import Any

Sample = tuple[str, frozenset[tuple[str, str]]]


def one(name: str, **labels: str) -> Sample:
    return (name, frozenset(labels.items()))


def expected_samples(snap: dict[str, Any]) -> tuple[dict[Sample, float], set[str]]:
    """What /metrics must show for `snap`, written independently of metrics.py, and the
    snapshot paths it covers."""
    out: dict[Sample, float] = {}
    covered: set[str] = set()

    def put(path: str, sample: Sample, value: Any) -> None:
        covered.add(path)
        if value is not None:
            out[sample] = value

    req = snap["requests"]
    put("started_at", one("toolslim_start_time_seconds"), snap["started_at"])
    put("requests.total", one("toolslim_requests_total"), req["total"])
    for key, label, name in (
        ("by_upstream", "upstream", "toolslim_requests_by_upstream_total"),
        ("by_api", "api", "toolslim_requests_by_api_total"),
        ("by_status", "status_class", "toolslim_requests_by_status_total"),
        ("upstream_errors", "kind", "toolslim_upstream_errors_total"),
        ("by_transport", "transport", "toolslim_requests_by_transport_total"),
    ):
        for value_name, value in req[key].items():
            put(f"requests.{key}.{value_name}", one(name, **{label: value_name}), value)
    websockets = snap["websockets"]
    put("websockets.active", one("toolslim_websockets_active"), websockets["active"])
    put("websockets.total", one("toolslim_websockets_total"), websockets["total"])
    put("websockets.refused", one("toolslim_websockets_refused_total"), websockets["refused"])
    for closer, value in websockets["closed_by"].items():
        sample = one("toolslim_websockets_closed_total", closed_by=closer)
        put(f"websockets.closed_by.{closer}", sample, value)
    connections = snap["connections"]
    for key, name in (
        ("open", "toolslim_client_connections"),
        ("busy", "toolslim_client_connections_busy"),
        ("max", "toolslim_client_connections_max"),
        ("buffered_bytes", "toolslim_request_buffer_bytes"),
        ("max_buffered_bytes", "toolslim_request_buffer_capacity_bytes"),
    ):
        put(f"connections.{key}", one(name), connections[key])
    for reason, value in connections["closed"].items():
        sample = one("toolslim_client_connections_closed_total", reason=reason)
        put(f"connections.closed.{reason}", sample, value)
    for key in ("written", "dropped", "errors"):
        put(f"capture.{key}", one(f"toolslim_capture_{key}_total"), snap["capture"][key])
    put(
        "requests.bytes_received",
        one("toolslim_request_received_bytes_total"),
        req["bytes_received"],
    )
    put(
        "requests.bytes_forwarded",
        one("toolslim_request_forwarded_bytes_total"),
        req["bytes_forwarded"],
    )
    put("requests.active_streams", one("toolslim_active_streams"), req["active_streams"])
    put("requests.tokens_pending", one("toolslim_token_counts_pending"), req["tokens_pending"])
    put(
        "requests.tokens_skipped",
        one("toolslim_token_counts_skipped_total"),
        req["tokens_skipped"],
    )
    put(
        "requests.client_disconnects",
        one("toolslim_client_disconnects_total"),
        req["client_disconnects"],
    )

    for comp, c in snap["components"].items():
        p = f"components.{comp}"
        for outcome in ("applied", "skipped", "error"):
            put(
                f"{p}.{outcome}",
                one("toolslim_component_runs_total", component=comp, outcome=outcome),
                c[outcome],
            )
        for reason, value in c["skip_reasons"].items():
            put(
                f"{p}.skip_reasons.{reason}",
                one("toolslim_component_skips_total", component=comp, reason=reason),
                value,
            )
        for keyword, value in c["removed"].items():
            put(
                f"{p}.removed.{keyword}",
                one("toolslim_component_removed_total", component=comp, keyword=keyword),
                value,
            )
        for key, name in (
            ("tools_seen", "toolslim_tools_seen_total"),
            ("tools_changed", "toolslim_tools_changed_total"),
            ("bytes_saved", "toolslim_component_bytes_saved_total"),
            ("tokens_saved", "toolslim_component_tokens_saved_total"),
            ("deferred_bytes_saved", "toolslim_component_deferred_bytes_saved_total"),
            ("deferred_tokens_saved", "toolslim_component_deferred_tokens_saved_total"),
        ):
            put(f"{p}.{key}", one(name, component=comp), c[key])
        for unit in ("bytes", "tokens"):
            for stage in ("before", "after"):
                put(
                    f"{p}.catalogue_{unit}_{stage}",
                    one(f"toolslim_component_catalogue_{unit}_total", component=comp, stage=stage),
                    c[f"catalogue_{unit}_{stage}"],
                )
    tool_schema = snap["components"]["toolschema"]
    out[one("toolslim_tool_schema_bytes_saved_total")] = tool_schema["bytes_saved"]
    out[one("toolslim_tool_schema_tokens_saved_total")] = tool_schema["tokens_saved"]

    memo = snap["memo"]
    put("memo.hits", one("toolslim_memo_hits_total"), memo["hits"])
    put("memo.misses", one("toolslim_memo_misses_total"), memo["misses"])
    put("memo.size", one("toolslim_memo_entries"), memo["size"])
    put("memo.capacity", one("toolslim_memo_capacity_entries"), memo["capacity"])
    put("memo.bytes", one("toolslim_memo_bytes"), memo["bytes"])
    put("memo.max_bytes", one("toolslim_memo_capacity_bytes"), memo["max_bytes"])

    usage = snap["usage"]
    for kind, value in usage["tokens"].items():
        put(f"usage.tokens.{kind}", one("toolslim_upstream_tokens_total", kind=kind), value)
    put(
        "usage.responses_with_usage",
        one("toolslim_responses_with_usage_total"),
        usage["responses_with_usage"],
    )
    put(
        "usage.usage_unavailable",
        one("toolslim_usage_unavailable_total"),
        usage["usage_unavailable"],
    )

    for key, name in (
        ("read_multiplier", "toolslim_cache_read_multiplier_ratio"),
        ("write_multiplier", "toolslim_cache_write_multiplier_ratio"),
        ("cold_requests", "toolslim_cache_cold_requests_total"),
        ("warm_requests", "toolslim_cache_warm_requests_total"),
        ("cold_tokens_saved", "toolslim_cache_cold_tokens_saved_total"),
        ("warm_tokens_saved", "toolslim_cache_warm_tokens_saved_total"),
        ("catalogue_tokens", "toolslim_cache_catalogue_tokens"),
        ("tokens_saved_per_request", "toolslim_cache_saved_per_request_tokens"),
        ("warm_break_even_requests", "toolslim_cache_warm_break_even_requests"),
    ):
        put(f"cache.{key}", one(name), snap["cache"][key])
    for api, catalogues in snap["cache"]["by_api"].items():
        top = catalogues[0]  # the most requested: its figures, per API
        for key, name in (
            ("requests", "toolslim_cache_top_catalogue_requests"),
            ("catalogue_tokens", "toolslim_cache_top_catalogue_tokens"),
            ("tokens_saved_per_request", "toolslim_cache_top_catalogue_saved_per_request_tokens"),
            ("warm_break_even_requests", "toolslim_cache_top_catalogue_warm_break_even_requests"),
        ):
            put(f"cache.by_api.{api}", one(name, api=api), top[key])

    drift = snap["drift"]
    put("drift.sessions", one("toolslim_drift_sessions"), drift["sessions"])
    for kind, value in drift["changes"].items():
        put(f"drift.changes.{kind}", one("toolslim_catalogue_changes_total", kind=kind), value)
    for kind, value in drift["cache_write_tokens_after"].items():
        sample = one("toolslim_catalogue_change_cache_write_tokens_total", kind=kind)
        put(f"drift.cache_write_tokens_after.{kind}", sample, value)
    for name, advice in snap["advice"].items():
        sample = one("toolslim_advice_requests_total", advice=name)
        put(f"advice.{name}.requests", sample, advice["requests"])
        sample = one("toolslim_advice_catalogue_bytes_total", advice=name)
        put(f"advice.{name}.bytes", sample, advice["bytes"])
    for row in snap["tools"]["servers"]:  # per server, summed over the clients
        server = row["server"]
        added = [
            (one("toolslim_tool_offered_tokens_total", server=server, tier=tier), value)
            for tier, value in row["offered_tokens"].items()
        ]
        added.append((one("toolslim_tool_calls_total", server=server), row["calls"]))
        added.append((one("toolslim_tool_cost_usd_total", server=server), row["cost"]["usd"]))
        for sample, value in added:
            out[sample] = out.get(sample, 0) + value
        sample = one("toolslim_tool_unused", server=server)
        out[sample] = max(out.get(sample, 0), int(row["unused"]))
    memory = snap["tools"]["memory"]
    put("tools.memory.bytes", one("toolslim_tool_ledger_bytes"), memory["bytes"])
    put("tools.memory.max_bytes", one("toolslim_tool_ledger_capacity_bytes"), memory["max_bytes"])
    lint = snap["lint"]
    put("lint.requests", one("toolslim_lint_flagged_requests_total"), lint["requests"])
    for rule, counts in lint["rules"].items():
        sample = one("toolslim_lint_requests_total", rule=rule, severity=counts["severity"])
        put(f"lint.rules.{rule}.requests", sample, counts["requests"])
        covered.add(f"lint.rules.{rule}.severity")  # a label of the sample above
        sample = one("toolslim_lint_upstream_rejections_total", rule=rule)
        put(f"lint.rules.{rule}.upstream_rejections", sample, counts["upstream_rejections"])
    sample = one("toolslim_lint_upstream_rejections_total", rule="unexplained")
    put("lint.upstream_rejections.unexplained", sample, lint["upstream_rejections"]["unexplained"])

    for key in ("proxy_overhead_seconds", "upstream_ttfb_seconds"):
        h, name, p = snap["timings"][key], f"toolslim_{key}", f"timings.{key}"
        put(f"{p}.count", one(f"{name}_count"), h["count"])
        put(f"{p}.sum", one(f"{name}_sum"), h["sum"])
        for bound, count in h["buckets"]:
            le = "+Inf" if bound == "+Inf" else repr(float(bound))
            put(f"{p}.buckets", one(f"{name}_bucket", le=le), count)
    return out, covered


def metric_samples(text: str, name: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            label = line.split('"')[1]
            found[label] = float(line.rsplit(" ", 1)[1])
    return found
