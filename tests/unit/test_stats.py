"""Stats: the one source of truth; its snapshot is what /stats, /metrics and the dashboard show."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fakes import (
    CHAT,
    CHAT_OTHER,
    CLAUDE,
    FakeClock,
    applied,
    catalogue,
    mixed_stats,
)
from toolslim.core.facts import CatalogueFacts
from toolslim.core.pipeline import ComponentRun, RunReport, TokenTotals
from toolslim.observe.counters import CATALOGUES_PER_API
from toolslim.observe.drift import identity_of
from toolslim.observe.fleet import merge, state_of, view
from toolslim.observe.stats import Stats
from toolslim.wire.usage import Usage

DOCS = Path(__file__).resolve().parents[2] / "docs" / "stats.md"


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
    assert snap["memo"] == {
        "hits": 4,
        "misses": 1,
        "size": 3,
        "capacity": 256,
        "bytes": 0,
        "max_bytes": 0,
    }
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
