"""counters: histograms count every sample in cumulative buckets and give nearest-rank
percentiles over a recent window."""

from __future__ import annotations

from toolslim.observe.counters import Histogram, percentile


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
