"""A catalogue's memo hits report the very same runs every time; Stats counts them as repeats
and adds them to the component counters when they are read. /stats shows what counting each
request's runs one by one shows, whatever the order, the repeats and the reads between."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import FakeClock
from toolslim.core.pipeline import ComponentRun, RunReport, TokenTotals
from toolslim.observe.counters import ComponentCounters
from toolslim.observe.stats import RUNS_HELD, Stats

RUNS = [
    (
        ComponentRun(
            "toolschema", "applied", None, 29, 3, {"$schema": 29, "title": 2}, 65_000, 63_600, 120
        ),
    ),
    (ComponentRun("toolschema", "skipped", "no_tools"),),
    (ComponentRun("toolschema", "error", "ValueError"),),
    (
        ComponentRun("toolschema", "applied", None, 4, 1, {"title": 1}, 900, 850),
        ComponentRun("tooldefs", "skipped", None, 4),
        ComponentRun("mine", "applied", None, 1, 1, {"x": 5}, 10, 4, 2),
    ),
    (),
]


def eagerly(counted: list[tuple[ComponentRun, ...]]) -> dict[str, Any]:
    """The component counters and bytes saved of counting each request's runs one by one."""
    components = {"toolschema": ComponentCounters()}
    saved = 0
    for runs in counted:
        for run in runs:
            counters = components.setdefault(run.component, ComponentCounters())
            counters.tools_seen += run.tools_seen
            if run.outcome == "applied":
                counters.applied += 1
                counters.catalogue_bytes_before += run.bytes_before
                counters.catalogue_bytes_after += run.bytes_after
                counters.deferred_bytes_saved += run.deferred_bytes_saved
                counters.tools_changed += run.tools_changed
                counters.removed.update(run.removed)
                saved += run.bytes_saved - run.deferred_bytes_saved
            elif run.outcome == "skipped":
                counters.skipped += 1
                counters.skip_reasons[run.reason or "unknown"] += 1
            else:
                counters.error += 1
    return {
        "components": {name: c.snapshot() for name, c in components.items()},
        "bytes_saved": saved,
    }


def shown(stats: Stats) -> dict[str, Any]:
    snapshot = stats.snapshot()
    points = snapshot["series"]["points"]
    return {
        "components": snapshot["components"],
        "bytes_saved": sum(point["bytes_saved"] for point in points),
    }


@settings(max_examples=60)
@given(
    st.lists(st.tuples(st.integers(0, len(RUNS) - 1), st.booleans(), st.booleans()), max_size=60)
)
def test_repeated_runs_show_as_counting_each_request(steps: list[tuple[int, bool, bool]]) -> None:
    stats = Stats(["toolschema"], clock=FakeClock())
    counted = []
    for which, copied, read in steps:
        runs = tuple(RUNS[which]) if not copied else tuple(list(RUNS[which]))
        stats.record_pipeline(RunReport((b"",), runs))
        counted.append(runs)
        if read:
            assert shown(stats) == eagerly(counted)
    assert shown(stats) == eagerly(counted)


def test_more_distinct_runs_than_held_are_all_counted() -> None:
    stats = Stats(["toolschema"], clock=FakeClock())
    counted = []
    for n in range(RUNS_HELD * 3):
        runs = (ComponentRun("toolschema", "applied", None, n, 1, {"title": n}, 100 + n, 90),)
        for _ in range(n % 3 + 1):
            stats.record_pipeline(RunReport((b"",), runs))
            counted.append(runs)
    assert shown(stats) == eagerly(counted)


TOTALS = [
    TokenTotals({"toolschema": (2000, 1900)}, {"toolschema": (800, 700)}),
    TokenTotals({"toolschema": (500, 450), "mine": (450, 400)}),
    TokenTotals({"toolschema": (500, 500)}),
    TokenTotals(),
]


def tokens_eagerly(counted: list[TokenTotals]) -> dict[str, Any]:
    """What counting each request's token totals one by one shows."""
    sums: dict[str, list[int]] = {"toolschema": [0, 0, 0]}
    saved_in_all = 0
    last = (0, 0)
    for tokens in counted:
        saved = 0
        for name, (before, after) in tokens.items():
            sums.setdefault(name, [0, 0, 0])
            sums[name][0] += before
            sums[name][1] += after
            saved += before - after
        for name, (before, after) in tokens.deferred.items():
            sums.setdefault(name, [0, 0, 0])[2] += before - after
            saved -= before - after
        if tokens:
            first, (first_before, _) = next(iter(tokens.items()))
            last = (first_before - tokens.deferred.get(first, (0, 0))[0], saved)
        saved_in_all += saved
    return {"sums": sums, "saved": saved_in_all, "last": last}


def tokens_shown(stats: Stats) -> dict[str, Any]:
    snapshot = stats.snapshot()
    components = snapshot["components"]
    return {
        "sums": {
            name: [
                c["catalogue_tokens_before"],
                c["catalogue_tokens_after"],
                c["deferred_tokens_saved"],
            ]
            for name, c in components.items()
        },
        "saved": sum(point["tokens_saved"] for point in snapshot["series"]["points"]),
        "last": (
            snapshot["cache"]["catalogue_tokens"],
            snapshot["cache"]["tokens_saved_per_request"],
        ),
    }


@settings(max_examples=60)
@given(
    st.lists(st.tuples(st.integers(0, len(TOTALS) - 1), st.booleans(), st.booleans()), max_size=60)
)
def test_repeated_token_totals_show_as_counting_each_request(
    steps: list[tuple[int, bool, bool]],
) -> None:
    stats = Stats(["toolschema"], clock=FakeClock())
    counted = []
    for which, copied, read in steps:
        kept = TOTALS[which]
        tokens = TokenTotals(kept, kept.deferred) if copied else kept
        assert stats.record_tokens(tokens) == tokens_eagerly([tokens])["saved"]
        counted.append(tokens)
        if read:
            assert tokens_shown(stats) == tokens_eagerly(counted)
    assert tokens_shown(stats) == tokens_eagerly(counted)
