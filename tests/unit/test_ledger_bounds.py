"""The byte bounds of the per-catalogue caches of the tool ledger and of lint (issue 23): what
they hold stays within the bound over a flood of distinct catalogues, and nothing counted is
lost past it (it is counted in `untracked`)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import orjson

from toolslim.core.facts import CatalogueFacts
from toolslim.core.tokens import count_tokens
from toolslim.core.toolfacts import ToolFacts, names_bytes, tool_facts
from toolslim.observe.health import Health, Linter
from toolslim.observe.ledger.book import ToolLedger, merge
from toolslim.observe.ledger.render import render
from toolslim.observe.ledger.state import counted, since
from toolslim.wire.usage import Usage

DAY = 1_796_428_800.0  # 2026-12-05T00:00:00Z
SCHEMA = {"type": "object"}
READ = Usage(input_tokens=10, cache_read_input_tokens=1000)


def catalogue(index: int, tools: int = 20) -> bytes:
    return orjson.dumps(
        [
            {"name": f"mcp__srv{index}__tool_{n}", "description": "d", "input_schema": SCHEMA}
            for n in range(tools)
        ]
    )


def ledger(max_bytes: int) -> ToolLedger:
    return ToolLedger(
        read_multiplier=0.1, write_multiplier=1.25, clock=lambda: DAY + 60, max_bytes=max_bytes
    )


def offer(book: ToolLedger, raw: bytes, session: str, calls: Any = ()) -> None:
    new = book.record(
        client="claude-cli",
        api="anthropic",
        model="claude-sonnet-4-5",
        session=session,
        catalogues=[CatalogueFacts(raw)],
        usage=READ,
        calls=calls,
        cache_miss=None,
    )
    for facts in new:
        book.known(facts.digest, tool_facts(facts.forwarded, count_tokens))


def requests_counted(export: dict[str, Any]) -> int:
    rows = sum(
        row["requests"]
        for clients in export["offers"].values()
        for rows in clients.values()
        for row in rows.values()
    )
    return rows + int(export["untracked"]["requests"])


def test_a_flood_of_distinct_catalogues_stays_within_the_ledgers_byte_bound() -> None:
    book = ledger(max_bytes=100_000)
    for index in range(500):
        offer(book, catalogue(index), f"s{index}")
    export = book.live()
    assert 0 < export["memory"]["bytes"] <= 100_000
    assert export["memory"]["max_bytes"] == 100_000
    assert export["untracked"]["requests"] > 0
    assert len(export["catalogues"]) < 500


def test_past_the_byte_bound_every_request_and_call_is_still_counted() -> None:
    book = ledger(max_bytes=50_000)
    for index in range(300):
        offer(book, catalogue(index), "s", calls=[(f"mcp__srv{index}__tool_0", None)])
    export = book.live()
    assert requests_counted(export) == 300
    calls = sum(
        row["calls"]
        for clients in export["calls"].values()
        for rows in clients.values()
        for row in rows.values()
    )
    assert calls + export["untracked"]["calls"] == 300
    assert export["input"]["requests"] == 300


def test_a_catalogue_kept_before_the_bound_is_reached_keeps_counting_after_it() -> None:
    book = ledger(max_bytes=30_000)
    first = catalogue(0)
    offer(book, first, "s")
    for index in range(1, 200):
        offer(book, catalogue(index), "s")
    offer(book, first, "s")
    export = book.live()
    (rows,) = export["offers"].values()
    assert rows["claude-cli"][CatalogueFacts(first).digest.hex()]["requests"] == 2
    assert export["untracked"]["requests"] > 0


def test_the_ledgers_memory_is_shown_and_the_workers_bytes_are_added() -> None:
    one, two = ledger(max_bytes=1_000_000), ledger(max_bytes=1_000_000)
    offer(one, catalogue(1), "a")
    offer(two, catalogue(2), "b")
    merged = merge([one.live(), two.live()])
    assert merged["memory"] == {
        "bytes": one.live()["memory"]["bytes"] + two.live()["memory"]["bytes"],
        "max_bytes": 1_000_000,
    }
    shown = render(merged, DAY + 60, min_requests=2, min_sessions=2)
    assert shown["memory"] == merged["memory"]


def test_a_count_that_failed_gives_its_bytes_back() -> None:
    book = ledger(max_bytes=1_000_000)
    raw = catalogue(7)
    new = book.record(
        client="c",
        api="anthropic",
        model=None,
        session="s",
        catalogues=[CatalogueFacts(raw)],
        usage=None,
        calls=(),
        cache_miss=None,
    )
    held = book.live()["memory"]["bytes"]
    book.forget(new[0].digest)
    assert book.live()["memory"]["bytes"] == held - names_bytes(new[0].tools.names)


def test_the_estimate_of_a_catalogues_tool_facts_is_within_half_and_twice_what_they_take() -> None:
    raws = [catalogue(index, tools=40) for index in range(50)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept: list[ToolFacts] = [tool_facts(raw, len) for raw in raws]
    taken = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    estimated = sum(names_bytes(facts.names) for facts in kept)
    assert taken / 2 <= estimated <= taken * 2


def test_lints_remembered_findings_stay_within_their_byte_bound() -> None:
    health = Health(lambda: DAY)
    linter = Linter(health, max_bytes=20_000)
    for index in range(200):
        dotted = {"name": f"mcp__fs{index}__read.file", "input_schema": SCHEMA}
        found = linter.request(
            "anthropic", [CatalogueFacts(orjson.dumps([dotted]))], "POST", "/v1/messages"
        )
        assert found  # each catalogue's finding is still found and counted
    assert 0 < health.held <= 20_000
    assert health.requests == 200


def test_what_was_written_last_is_kept_without_tool_facts_and_gives_the_same_delta() -> None:
    book = ledger(max_bytes=1_000_000)
    offer(book, catalogue(1), "a")
    before = book.live()
    offer(book, catalogue(1), "b")
    offer(book, catalogue(2), "c")
    after = book.live()
    kept = counted(before)
    assert all(facts is None for facts in kept["catalogues"].values())
    assert since(after, kept) == since(after, before)
