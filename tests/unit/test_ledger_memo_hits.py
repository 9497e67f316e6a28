"""A session's memo hits counted through the Ledger: two sessions (and two clients) sharing one
catalogue stay apart, a catalogue change after many hits is still one change, and /stats
counts every request's runs, tokens and bytes whenever it is read."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from multidict import CIMultiDict

from proxy_harness import settings_for
from sessions import BASH, EDIT, READ
from toolslim.core.pipeline import Pipeline
from toolslim.observe.exchange import Exchange, Ledger
from toolslim.observe.stats import Stats
from toolslim.wire.routing import route_request
from toolslim.wire.sse import UsageObserver

ANSWER = orjson.dumps(
    {
        "type": "message",
        "content": [{"type": "text", "text": "done"}],
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 900, "output_tokens": 5},
    }
)


def body(catalogue: list[dict[str, Any]], turn: int, user: str) -> bytes:
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(turn + 1)]
    return orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "messages": messages,
            "tools": catalogue,
            "metadata": {"user_id": user},
            "max_tokens": 100,
        }
    )


async def counted(ledger: Ledger, pipeline: Pipeline, sent: bytes, agent: str) -> None:
    route = route_request("/v1/messages", {}, settings_for("http://127.0.0.1:9"))
    headers = CIMultiDict({"User-Agent": agent})
    exchange = Exchange(route, "POST", "/v1/messages", 0.0, headers=headers, body=sent)
    ledger.pipeline_ran(exchange, pipeline.run(sent, "anthropic"))
    exchange.status, exchange.bytes_in, exchange.bytes_out = 200, len(sent), len(sent)
    exchange.observer = UsageObserver("anthropic", "application/json", None)
    exchange.observer.feed(ANSWER)
    ledger.count(exchange)
    if ledger.pending:  # a new catalogue's tokens, counted on the ledger's thread
        await asyncio.wait(set(ledger.pending))


async def test_sessions_sharing_a_catalogue_stay_apart_and_a_change_is_still_seen() -> None:
    stats = Stats(["toolschema"])
    ledger = Ledger(stats, asyncio.get_running_loop(), set())
    pipeline = Pipeline(["toolschema"])
    for turn in range(6):  # memo hits after the first, for both sessions and clients
        await counted(ledger, pipeline, body([READ, BASH], turn, "alice"), "claude-cli/2.1")
        await counted(ledger, pipeline, body([READ, BASH], turn, "bob"), "curl/8")
        if turn == 2:
            assert stats.snapshot()["requests"]["total"] == 6
    await counted(ledger, pipeline, body([READ, BASH, EDIT], 6, "alice"), "claude-cli/2.1")
    await counted(ledger, pipeline, body([READ, BASH], 6, "bob"), "curl/8")
    snapshot = stats.snapshot()
    assert snapshot["drift"]["sessions"] == 2
    assert snapshot["drift"]["changes"]["added"] == 1
    assert [change["tools"] for change in snapshot["drift"]["recent"]] == [["Edit"]]
    counters = snapshot["components"]["toolschema"]
    assert counters["tools_seen"] == 12 * 2 + 3 + 2
    assert snapshot["memo"]["hits"] + snapshot["memo"]["misses"] == 14
    offers = stats.tools.export()["offers"]
    [day] = offers
    by_client = offers[day]
    assert set(by_client) == {"claude-cli", "other"}
    shared = [digest for digest in by_client["claude-cli"] if digest in by_client["other"]]
    assert len(shared) == 1  # the one catalogue both clients sent
    rows = [by_client[client][shared[0]] for client in ("claude-cli", "other")]
    assert [row["requests"] for row in rows] == [6, 7]
    [alice], [bob] = (row["sessions"] for row in rows)
    assert alice != bob
