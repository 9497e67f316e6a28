"""toolorder through the real proxy: an order-only change at the client reaches the provider as
no change at all."""

from __future__ import annotations

import json

import aiohttp

from proxy_harness import FakeUpstream, Proxy, dumps, stats_of, tools_span, total_is
from toolslim.core.components.toolorder import REORDERED


async def test_an_order_only_change_at_the_client_is_no_change_at_the_upstream(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(pipeline=("toolorder", "toolschema"))
    tools = [
        {"name": name, "description": f"{name}.", "input_schema": {"type": "object"}}
        for name in ("Read", "Bash", "mcp__git__git_log", "Edit")
    ]
    orders = [tools, [tools[2], tools[0], tools[3], tools[1]], list(reversed(tools))]
    for turn, catalogue in enumerate(orders):
        body = dumps({"model": "claude-sonnet-4-5", "tools": catalogue,
                      "messages": [{"role": "user", "content": f"turn {turn}"}]})  # fmt: skip
        given = {"X-Claude-Code-Session-Id": "s", "Content-Type": "application/json"}
        async with client.post(server.make_url("/v1/messages"), data=body, headers=given) as r:
            assert r.status == 200
    snapshot = await stats_of(client, server, total_is(3))
    catalogues = set()
    for received in upstream.received:
        start, end = tools_span(received.body)
        catalogues.add(received.body[start:end])
    assert len(catalogues) == 1
    names = [t["name"] for t in json.loads(catalogues.pop())]
    assert names == sorted(names)
    order = snapshot["components"]["toolorder"]
    assert order["applied"] == 3 and order["removed"][REORDERED] > 0
    assert snapshot["drift"]["changes"]["order_only"] == 2  # drift sees what the client sent
