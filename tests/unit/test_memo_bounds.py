"""Tests for the memo's byte bound (toolslim.core.memo.Memo with `max_bytes`): what it holds, as
its entries count it, never passes the bound, the least recently used go first, and the pipeline
reports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_envelope import STRIP, anthropic

from toolslim.core.entry import Entry
from toolslim.core.envelope import compact
from toolslim.core.memo import Memo
from toolslim.core.pipeline import MEMO_BYTES, MEMO_SIZE, Pipeline


def catalogue(n: int, size: int = 2000) -> bytes:
    return b'[{"name":"t%d","input_schema":{"title":"%s"}}]' % (n, b"x" * size)


def held(raw: bytes) -> int:
    """What one entry of `raw` costs the memo."""
    memo = Memo[Entry, Any](1)
    compact(b'{"tools":' + raw + b"}", memo, STRIP)
    return memo.bytes


def test_the_bytes_held_never_pass_the_bound_and_the_oldest_entries_go_first() -> None:
    one = held(catalogue(0))
    memo = Memo[Entry, Any](100, max_bytes=3 * one)
    for n in range(10):
        compact(b'{"tools":' + catalogue(n) + b"}", memo, STRIP)
        assert memo.bytes <= memo.max_bytes
    assert len(memo) == 3
    assert [e.raw for e in (memo.get(Memo.key(catalogue(n))) for n in (7, 8, 9)) if e] == [
        catalogue(7),
        catalogue(8),
        catalogue(9),
    ]
    assert memo.get(Memo.key(catalogue(6))) is None


def test_an_entry_larger_than_the_whole_bound_is_not_kept_and_changes_nothing() -> None:
    memo = Memo[Entry, Any](8, max_bytes=held(catalogue(0)) + 100)
    compact(b'{"tools":' + catalogue(0) + b"}", memo, STRIP)
    before = memo.bytes
    body = b'{"tools":' + catalogue(1, size=50_000) + b"}"
    assert compact(body, memo, STRIP).body == compact(body, Memo(0), STRIP).body
    assert (len(memo), memo.bytes) == (1, before)


def test_the_count_bound_still_holds_and_putting_an_entry_again_counts_it_once() -> None:
    memo = Memo[Entry, Any](2, max_bytes=10**9)
    for n in (0, 1, 0, 2):
        raw = catalogue(n)
        memo.put(Memo.key(raw), Entry(raw, None, ()))
    assert len(memo) == 2
    assert memo.bytes == sum(held_alone(catalogue(n)) for n in (0, 2))
    memo.clear()
    assert memo.bytes == 0


def held_alone(raw: bytes) -> int:
    memo = Memo[Entry, Any](1)
    memo.put(Memo.key(raw), Entry(raw, None, ()))
    return memo.bytes


def test_an_entry_counts_at_least_its_catalogue_and_every_copy_of_its_output_it_may_hold() -> None:
    raw = catalogue(0, size=10_000)
    pipeline = Pipeline(["toolschema"])
    report = pipeline.run(b'{"tools":' + raw + b"}")
    entry = pipeline.memo.recent
    assert entry is not None and entry.output is not None and report.memo_misses == 1
    assert entry.held_bytes() >= len(raw) + 5 * len(entry.output)


def test_the_pipeline_reports_the_bytes_its_memo_holds_and_its_bound() -> None:
    pipeline = Pipeline(["toolschema"], memo_bytes=5_000_000)
    assert pipeline.memo_byte_gauges() == (0, 5_000_000)
    pipeline.run(anthropic())
    held_now, bound = pipeline.memo_byte_gauges()
    assert 0 < held_now <= bound == 5_000_000
    assert Pipeline([]).memo_byte_gauges() == (0, MEMO_BYTES)


def test_the_default_byte_bound_has_room_for_the_default_count_of_claude_code_catalogues() -> None:
    body = (Path(__file__).parents[2] / "captures" / "claude-code.anthropic.json").read_bytes()
    pipeline = Pipeline(["toolschema"])
    pipeline.run(body)
    entry = pipeline.memo.recent
    assert entry is not None and entry.output is not None
    assert MEMO_SIZE * entry.held_bytes() <= MEMO_BYTES
