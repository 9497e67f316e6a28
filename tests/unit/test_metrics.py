"""metrics: /metrics renders the same snapshot as /stats, field by field, in an owned registry."""

from __future__ import annotations

import re
from typing import Any

import prometheus_client
from prometheus_client.parser import text_string_to_metric_families

from exposition import Sample, expected_samples, one
from fakes import FakeClock, mixed_stats
from toolslim.observe.metrics import CONTENT_TYPE, exposition, make_registry
from toolslim.observe.stats import Stats

REQUIRED = {
    "toolslim_requests_total",
    "toolslim_active_streams",
    "toolslim_client_disconnects_total",
    "toolslim_upstream_errors_total",
    "toolslim_component_runs_total",
    "toolslim_component_skips_total",
    "toolslim_tool_schema_bytes_saved_total",
    "toolslim_tool_schema_tokens_saved_total",
    "toolslim_component_bytes_saved_total",
    "toolslim_component_tokens_saved_total",
    "toolslim_component_deferred_bytes_saved_total",
    "toolslim_component_deferred_tokens_saved_total",
    "toolslim_component_removed_total",
    "toolslim_tools_seen_total",
    "toolslim_memo_hits_total",
    "toolslim_memo_misses_total",
    "toolslim_memo_entries",
    "toolslim_upstream_tokens_total",
    "toolslim_usage_unavailable_total",
    "toolslim_proxy_overhead_seconds",
    "toolslim_upstream_ttfb_seconds",
    "toolslim_cache_warm_break_even_requests",
    "toolslim_cache_cold_tokens_saved_total",
    "toolslim_cache_warm_tokens_saved_total",
}

# Snapshot fields /metrics leaves out on purpose: derived in Prometheus (uptime, windowed
# percentiles: use histogram_quantile), or a time series Prometheus keeps itself.
NOT_EXPORTED = {
    "version",
    "uptime_seconds",
    "series",
    "capture.enabled",  # configuration, not a measurement
    "timings.proxy_overhead_seconds.p50",
    "timings.proxy_overhead_seconds.p90",
    "timings.proxy_overhead_seconds.p99",
    "timings.upstream_ttfb_seconds.p50",
    "timings.upstream_ttfb_seconds.p90",
    "timings.upstream_ttfb_seconds.p99",
    "drift.recent",
    "advice.claude_code_tool_search_off.fix",
    "advice.gemini_declarations_over_limit.fix",
    "advice.websocket_disabled.fix",
    "advice.unused_mcp_server.fix",
    "advice.unused_mcp_server.servers",
    "tools",  # per server, summed over clients (see expected_samples); per tool: test_ledger_book
    "lint.findings",  # text: the distinct findings, with their tools and fixes
    "lint.upstream_rejections.explained",  # the sum of the rule-labelled rejections
}


def scrape(stats: Stats) -> dict[str, Any]:
    text = prometheus_client.generate_latest(make_registry(stats)).decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(families: dict[str, Any]) -> dict[Sample, float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value for f in families.values() for s in f.samples
    }


def leaf_paths(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return set().union(
            *(leaf_paths(v, f"{prefix}.{k}" if prefix else k) for k, v in value.items())
        )
    return {prefix}


def test_metrics_equal_the_snapshot_field_by_field() -> None:
    stats, _ = mixed_stats()
    snap = stats.snapshot()
    expected, _ = expected_samples(snap)
    assert samples(scrape(stats)) == expected


def test_every_snapshot_field_is_exported_or_deliberately_left_out() -> None:
    stats, _ = mixed_stats()
    snap = stats.snapshot()
    _, covered = expected_samples(snap)
    leaves = {
        path
        for path in leaf_paths(snap)
        if not any(path == skip or path.startswith(skip + ".") for skip in NOT_EXPORTED)
    }
    assert leaves - covered == set()


def test_every_required_family_is_present_with_help_text() -> None:
    stats, _ = mixed_stats()
    text = prometheus_client.generate_latest(make_registry(stats)).decode()
    names = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
    assert names >= REQUIRED
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, flags=re.MULTILINE))
    assert set(helps) == names
    assert all(len(h) > 10 for h in helps.values()), helps


def test_names_are_toolslim_thing_unit_and_counters_end_in_total() -> None:
    stats, _ = mixed_stats()
    text = prometheus_client.generate_latest(make_registry(stats)).decode()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE):
        assert re.fullmatch(r"toolslim_[a-z][a-z0-9_]*[a-z]", name), name
        assert (kind == "counter") == name.endswith("_total"), (name, kind)
        assert kind in {"counter", "gauge", "histogram"}, (name, kind)
    for family in scrape(stats).values():
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample.name


def test_labels_are_the_bounded_documented_sets() -> None:
    stats, _ = mixed_stats()
    labels: dict[str, set[str]] = {}
    for family in scrape(stats).values():
        for sample in family.samples:
            labels.setdefault(family.name, set()).update(sample.labels)
    allowed = {
        "upstream",
        "api",
        "status_class",
        "kind",
        "component",
        "outcome",
        "reason",
        "keyword",
        "stage",
        "le",
        "transport",
        "closed_by",
        "advice",
        "rule",
        "severity",
    }
    assert set().union(*labels.values()) <= allowed
    assert labels["toolslim_component_runs"] == {"component", "outcome"}
    assert labels["toolslim_component_skips"] == {"component", "reason"}
    assert labels["toolslim_upstream_tokens"] == {"kind"}


def test_break_even_sample_is_absent_until_there_is_a_catalogue() -> None:
    families = scrape(Stats(["toolschema"]))
    assert families["toolslim_cache_warm_break_even_requests"].samples == []
    assert families["toolslim_tool_schema_tokens_saved"].samples[0].value == 0


def test_each_api_s_most_requested_catalogue_is_exported_and_its_nulls_have_no_sample() -> None:
    stats, _ = mixed_stats()
    found = samples(scrape(stats))
    by_api = stats.snapshot()["cache"]["by_api"]
    assert set(by_api) == {"anthropic", "openai-chat"}
    assert found[one("toolslim_cache_top_catalogue_requests", api="anthropic")] == 5
    assert found[one("toolslim_cache_top_catalogue_tokens", api="anthropic")] == 16_000
    assert by_api["openai-chat"][0]["catalogue_tokens"] is None  # nothing was saved on it
    assert one("toolslim_cache_top_catalogue_tokens", api="openai-chat") not in found
    assert one("toolslim_cache_top_catalogue_warm_break_even_requests", api="openai-chat") not in (
        found
    )
    assert found[one("toolslim_cache_top_catalogue_requests", api="openai-chat")] == 1


def test_tool_schema_families_read_zero_when_toolschema_is_not_configured() -> None:
    found = samples(scrape(Stats([])))
    assert found[one("toolslim_tool_schema_bytes_saved_total")] == 0
    assert found[one("toolslim_tool_schema_tokens_saved_total")] == 0


def test_each_scrape_takes_exactly_one_fresh_snapshot() -> None:
    clock = FakeClock()
    stats = Stats(["toolschema"], clock=clock)
    calls = 0
    original = stats.snapshot

    def counting_snapshot() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return original()

    stats.snapshot = counting_snapshot  # type: ignore[method-assign]
    registry = make_registry(stats)
    assert calls == 0  # registering does not scrape
    prometheus_client.generate_latest(registry)
    assert calls == 1
    stats.record_request(upstream="anthropic", api="anthropic", status=200, bytes_in=1, bytes_out=1)
    text = prometheus_client.generate_latest(registry).decode()
    assert calls == 2
    assert "toolslim_requests_total 1.0" in text


def test_the_global_registry_is_never_touched() -> None:
    before = prometheus_client.generate_latest(prometheus_client.REGISTRY)
    stats, _ = mixed_stats()
    registries = make_registry(stats), make_registry(stats)  # two apps, no clash
    assert registries[0] is not registries[1]
    after = prometheus_client.generate_latest(prometheus_client.REGISTRY)
    assert b"toolslim_" not in after
    assert {line for line in after.splitlines() if line.startswith(b"#")} == {
        line for line in before.splitlines() if line.startswith(b"#")
    }


def test_exposition_is_the_prometheus_text_format_of_one_scrape() -> None:
    stats, _ = mixed_stats()
    registry = make_registry(stats)
    assert exposition(registry) == prometheus_client.generate_latest(registry)
    assert CONTENT_TYPE == prometheus_client.CONTENT_TYPE_LATEST
    assert CONTENT_TYPE.startswith("text/plain; version=")
