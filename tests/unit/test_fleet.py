"""fleet: the workers of one host answer as one. Traffic split over workers merges to exactly
what one worker that served all of it would show, field by field; an exited worker's counts
stay; the board never counts a worker twice."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from fakes import FakeClock
from toolslim.core.pipeline import ComponentRun, RunReport, skipped_report
from toolslim.observe.drift import Change, Kind
from toolslim.observe.fleet import (
    GAUGES,
    Board,
    Member,
    State,
    alone,
    merge,
    retire,
    state_of,
    view,
)
from toolslim.observe.stats import Stats
from toolslim.wire.usage import Usage

Event = Callable[[Stats], None]


def request(
    upstream: str,
    status: int,
    report: RunReport,
    tokens: tuple[int, int] | None = None,
    usage: Usage | None = None,
    overhead: float = 0.0009765625,  # binary fractions: float sums are exact in any order
    ttfb: float = 0.125,
) -> Event:
    def record(stats: Stats) -> None:
        stats.record_pipeline(report)
        saved = stats.record_tokens({"toolschema": tokens} if tokens else {})
        stats.record_request(
            upstream=upstream,
            api="anthropic" if upstream == "anthropic" else "openai-chat",
            status=status,
            bytes_in=4096,
            bytes_out=4096 - report.runs[0].bytes_saved,
        )
        stats.record_usage(usage, saved)
        stats.observe_overhead(overhead)
        stats.observe_ttfb(ttfb)

    return record


COMPACTED = RunReport(
    (b"{}",),
    (
        ComponentRun(
            "toolschema",
            "applied",
            tools_seen=25,
            tools_changed=23,
            removed={"title": 140, "$schema": 25},
            bytes_before=65_536,
            bytes_after=48_000,
        ),
    ),
    memo_misses=1,
)
HIT = RunReport((b"{}",), COMPACTED.runs, memo_hits=1)
OTHER_CATALOGUE = RunReport(
    (b"{}",),
    (ComponentRun("toolschema", "applied", bytes_before=1000, bytes_after=512),),
    memo_misses=1,
)


def traffic() -> list[tuple[float, Event]]:
    """(seconds after start, event): a mix of every kind of record, over several intervals."""
    events: list[tuple[float, Event]] = [
        (0, request("anthropic", 200, COMPACTED, (16_000, 12_000), Usage(3, 410, 0, 21_000))),
        (1, request("anthropic", 200, HIT, (16_000, 12_000), Usage(5, 388, 21_000, 0), 0.5)),
        (2, request("openai", 400, skipped_report(b"x", ["toolschema"], "not_json"))),
        (3, request("openai", 200, skipped_report(b"", ["toolschema"], "no_body"), ttfb=4.0)),
        (11, request("anthropic", 502, skipped_report(b"", ["toolschema"], "too_large"))),
        (
            12,
            request(
                "openai", 504, RunReport((b"{}",), (ComponentRun("toolschema", "error", "E"),))
            ),
        ),
        (13, lambda stats: stats.record_upstream_error("connect")),
        (14, lambda stats: stats.record_client_disconnect()),
        (15, lambda stats: stats.record_tokens_skipped()),
        (16, lambda stats: stats.websocket_opened()),
        (17, lambda stats: stats.websocket_closed("client")),
        (18, lambda stats: stats.record_websocket_refused()),
        (25, request("anthropic", 200, HIT, (16_000, 12_000), Usage(7, 1_024, 21_000, 0))),
        (26, request("anthropic", 429, HIT, (16_000, 12_000), None, 0.25)),
        (19, lambda stats: stats.record_catalogue_change(change(19.0, "added"))),
        (20, lambda stats: stats.record_catalogue_change(change(20.0, "order_only"))),
        (21, lambda stats: stats.record_advice("claude_code_tool_search_off", 30_000)),
        (22, lambda stats: stats.record_connection_closed("keepalive_timeout")),
        (31, lambda stats: stats.stream_opened()),
        (32, request("anthropic", 200, OTHER_CATALOGUE, (900, 500), Usage(1, 2, 3, 4), 0.0625)),
    ]
    return events


START = 1_000_000.0
DOCS = Path(__file__).resolve().parents[2] / "docs" / "stats.md"


def change(time: float, kind: Kind) -> Change:
    return Change(START + time, "a1b2", "anthropic", kind, ("Read",), (), 2_000)


def play(events: list[tuple[float, Event]], clock: FakeClock, *workers: Stats) -> None:
    """Each event on one worker in turn."""
    for index, (offset, event) in enumerate(events):
        clock.now = START + offset
        event(workers[index % len(workers)])
    clock.now = START + 40


def worker(clock: FakeClock, memo: tuple[int, int]) -> Stats:
    return Stats(["toolschema"], clock=clock, memo_gauges=lambda: memo)


def states(count: int) -> tuple[list[State], Stats, FakeClock]:
    """`count` workers that served traffic() between them, and one that served all of it."""
    clock = FakeClock(START)
    workers = [worker(clock, (index + 1, 64)) for index in range(count)]
    one = worker(clock, (sum(range(1, count + 1)), 64 * count))
    play(traffic(), clock, *workers)
    play(traffic(), clock, one)
    made = [
        state_of(stats, ident=f"{100 + index}-1", pid=100 + index)
        for index, stats in enumerate(workers)
    ]
    return made, one, clock


@pytest.mark.parametrize("count", [1, 2, 3])
def test_traffic_split_over_workers_merges_to_what_one_worker_serving_all_of_it_shows(
    count: int,
) -> None:
    made, one, clock = states(count)
    host = view(merge(made), made, 0, clock.now)
    workers = host.pop("workers")
    assert host == one.snapshot()
    assert list(host) == list(one.snapshot())  # the same keys, in the same order
    assert workers["count"] == count and workers["exited"] == 0
    assert sum(w["requests"] for w in workers["list"]) == host["requests"]["total"]


def test_the_invariant_applied_skipped_error_equals_total_holds_on_the_merge() -> None:
    made, _, clock = states(2)
    host = view(merge(made), made, 0, clock.now)
    runs = host["components"]["toolschema"]
    assert runs["applied"] + runs["skipped"] + runs["error"] == host["requests"]["total"] == 9


def test_gauges_of_live_workers_are_summed_and_memo_sizes_listed_per_worker() -> None:
    made, _, clock = states(2)
    host = view(merge(made), made, 0, clock.now)
    assert host["memo"]["size"] == 1 + 2 and host["memo"]["capacity"] == 128
    assert [w["memo_size"] for w in host["workers"]["list"]] == [1, 2]
    assert host["requests"]["active_streams"] == 1  # the one stream, on whichever worker


def test_the_latest_catalogue_of_any_worker_is_the_host_s_with_its_own_break_even() -> None:
    made, one, clock = states(2)
    cache = view(merge(made), made, 0, clock.now)["cache"]
    assert (cache["catalogue_tokens"], cache["tokens_saved_per_request"]) == (900, 400)
    assert cache["warm_break_even_requests"] == one.snapshot()["cache"]["warm_break_even_requests"]


def test_a_catalogue_compacted_again_is_the_latest_even_if_its_worker_had_it_before() -> None:
    clock = FakeClock(START)
    a, b = worker(clock, (0, 1)), worker(clock, (0, 1))
    big, small = (16_000, 12_000), (900, 500)
    for offset, stats, tokens in ((1, a, big), (2, b, small), (3, a, big)):
        clock.now = START + offset
        stats.record_tokens({"toolschema": tokens})
    made = [state_of(s, ident=f"{i}-1", pid=i) for i, s in enumerate((a, b))]
    cache = view(merge(made), made, 0, clock.now)["cache"]
    assert (cache["catalogue_tokens"], cache["tokens_saved_per_request"]) == (16_000, 4_000)


def test_every_gauge_docs_stats_md_names_is_summed_over_live_workers_only() -> None:
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|[^\n]*\(a gauge", DOCS.read_text(), re.M))
    assert documented and documented <= set(GAUGES)


def test_percentiles_are_recomputed_from_every_worker_s_samples_not_averaged() -> None:
    clock = FakeClock(START)
    fast, slow = worker(clock, (0, 1)), worker(clock, (0, 1))
    for _ in range(9):
        fast.observe_overhead(0.001)
    slow.observe_overhead(0.25)
    made = [state_of(s, ident=f"{i}-1", pid=i) for i, s in enumerate((fast, slow))]
    overhead = view(merge(made), made, 0, clock.now)["timings"]["proxy_overhead_seconds"]
    assert (overhead["p50"], overhead["p90"], overhead["p99"]) == (0.001, 0.001, 0.25)
    assert overhead["count"] == 10 and overhead["buckets"][-1] == ["+Inf", 10]
    assert "samples" not in overhead


def test_series_points_of_the_same_interval_are_added() -> None:
    clock = FakeClock(START)
    a, b = worker(clock, (0, 1)), worker(clock, (0, 1))
    for stats in (a, b, b):
        stats.record_pipeline(skipped_report(b"", ["toolschema"], "no_body"))
        stats.record_request(upstream="u", api="other", status=200, bytes_in=0, bytes_out=0)
    clock.now += 10
    a.record_request(upstream="u", api="other", status=200, bytes_in=0, bytes_out=0)
    made = [state_of(s, ident=f"{i}-1", pid=i) for i, s in enumerate((a, b))]
    points = view(merge(made), made, 0, clock.now)["series"]["points"]
    assert [(p["t"], p["requests"]) for p in points] == [(START, 3), (START + 10, 1)]


def test_merge_is_associative_so_exited_workers_fold_one_at_a_time() -> None:
    made, _, _ = states(3)
    assert merge([merge(made[:2]), made[2]])["snapshot"] == merge(made)["snapshot"]


def test_an_exited_worker_keeps_its_counters_and_loses_its_gauges() -> None:
    made, _, clock = states(2)
    gone = retire(made[1])
    host = view(merge([made[0], gone]), [made[0]], 1, clock.now)
    assert host["requests"]["total"] == view(merge(made), made, 0, clock.now)["requests"]["total"]
    assert host["memo"]["size"] == 1 and host["memo"]["capacity"] == 64
    assert host["workers"]["count"] == 1 and host["workers"]["exited"] == 1


def test_a_proxy_alone_answers_its_own_snapshot_plus_workers() -> None:
    clock = FakeClock(START)
    stats = worker(clock, (3, 64))
    play(traffic(), clock, stats)
    host = alone(stats)
    workers = host.pop("workers")
    assert host == stats.snapshot()
    assert workers["count"] == 1 and workers["list"][0]["requests"] == 9


def test_merging_never_changes_the_states_it_was_given() -> None:
    made, _, clock = states(2)
    before = json.dumps(made)
    view(merge(made), made, 0, clock.now)
    retire(made[0])
    assert json.dumps(made) == before


# --- the board: files in a directory shared by the workers -------------------------------


def members(folder: Path, count: int) -> tuple[list[Member], list[Stats]]:
    board = Board(folder)
    workers = [Stats(["toolschema"]) for _ in range(count)]
    return [Member(stats, board, pid=100 + index) for index, stats in enumerate(workers)], workers


def served(stats: Stats, requests: int) -> None:
    for _ in range(requests):
        stats.record_pipeline(skipped_report(b"", ["toolschema"], "no_body"))
        stats.record_request(upstream="u", api="other", status=200, bytes_in=1, bytes_out=1)


def test_any_worker_answers_the_total_of_all_of_them(tmp_path: Path) -> None:
    (a, b), (sa, sb) = members(tmp_path, 2)
    served(sa, 3)
    served(sb, 5)
    b.publish()
    assert a.host()["requests"]["total"] == 8
    assert b.host()["requests"]["total"] == 8
    assert a.host()["workers"]["count"] == 2


def test_an_answer_publishes_first_so_no_later_answer_shows_less(tmp_path: Path) -> None:
    (a, b), (sa, _) = members(tmp_path, 2)
    served(sa, 4)
    assert a.host()["requests"]["total"] == 4  # a's live count...
    assert b.host()["requests"]["total"] == 4  # ...is already on the board for b


def test_a_worker_writes_its_file_only_when_its_state_changed(tmp_path: Path) -> None:
    (a,), (sa,) = members(tmp_path, 1)
    a.publish()
    (path,) = tmp_path.glob("worker-*.json")
    path.unlink()
    a.publish()
    assert not path.exists()
    served(sa, 1)
    a.publish()
    assert json.loads(path.read_bytes())["snapshot"]["requests"]["total"] == 1


def test_an_exited_worker_s_counts_stay_in_every_answer(tmp_path: Path) -> None:
    (a, b, c), (sa, sb, sc) = members(tmp_path, 3)
    for stats, count in ((sa, 1), (sb, 10), (sc, 100)):
        served(stats, count)
    b.publish()
    c.publish()
    Board(tmp_path).retire(b.pid)
    host = a.host()
    assert host["requests"]["total"] == 111
    assert host["workers"]["exited"] == 1 and host["workers"]["count"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "exited.json",
        f"worker-{a.ident}.json",
        f"worker-{c.ident}.json",
    ]


def test_a_file_outliving_its_fold_is_not_counted_twice(tmp_path: Path) -> None:
    (a, b), (sa, sb) = members(tmp_path, 2)
    served(sa, 1)
    served(sb, 2)
    b.publish()
    (path,) = tmp_path.glob(f"worker-{b.ident}.json")
    data = path.read_bytes()
    Board(tmp_path).retire(b.pid)
    path.write_bytes(data)  # as if read between the fold and the file's removal
    assert a.host()["requests"]["total"] == 3


def test_exited_workers_fold_into_one_file(tmp_path: Path) -> None:
    board = Board(tmp_path)
    for generation in range(1, 4):
        stats = Stats(["toolschema"])
        served(stats, generation)
        state = state_of(stats, ident=f"{generation}-1", pid=generation)
        board.publish(state["id"], json.dumps(state).encode())
        board.retire(generation)
    others, exited, count = board.read("none")
    assert others == [] and count == 3 and exited is not None
    assert exited["snapshot"]["requests"]["total"] == 1 + 2 + 3
    assert [p.name for p in tmp_path.iterdir()] == ["exited.json"]
