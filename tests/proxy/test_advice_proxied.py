"""advice through the real proxy: an advisory is counted once per request, with its fix on
/stats, its metric, and one WARNING per advisory and catalogue."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest

from advisories import BUILT_IN, CLAUDE_CODE, MCP, claude_body, gemini_body, mcp_bytes
from exposition import metric_samples
from proxy_harness import FakeUpstream, Proxy, dumps, stats_of, total_is
from toolslim.observe.advice import ADVICE, FIX, GEMINI_DECLARATION_LIMIT


async def post(
    client: aiohttp.ClientSession, url: Any, body: bytes, headers: dict[str, str]
) -> None:
    async with client.post(url, data=body, headers=headers) as response:
        await response.read()


async def test_an_advisory_is_counted_once_per_request_with_its_fix_metric_and_one_warning(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await proxy()
    url = server.make_url("/v1/messages?beta=true")
    with caplog.at_level(logging.WARNING, logger="toolslim"):
        for _ in range(3):
            await post(client, url, claude_body(BUILT_IN + MCP), CLAUDE_CODE)
        await post(client, url, claude_body(BUILT_IN + MCP[:1]), CLAUDE_CODE)  # another catalogue
        await post(client, url, claude_body(BUILT_IN), CLAUDE_CODE)  # nothing to advise
        await post(client, url, claude_body(BUILT_IN + MCP), {})  # not Claude Code
        snapshot = await stats_of(client, server, total_is(6))
    advice = snapshot["advice"]
    assert advice["claude_code_tool_search_off"] == {
        "requests": 4,
        "bytes": 3 * mcp_bytes(MCP, dumps) + mcp_bytes(MCP[:1], dumps),
        "fix": FIX["claude_code_tool_search_off"],
    }
    assert advice["gemini_declarations_over_limit"]["requests"] == 0
    async with client.get(server.make_url("/metrics")) as response:
        samples = metric_samples(await response.text(), "toolslim_advice_requests_total")
    assert samples == {name: float(advice[name]["requests"]) for name in ADVICE}
    warnings = [r for r in caplog.records if "advice claude_code_tool_search_off" in r.message]
    assert len(warnings) == 2  # one per catalogue
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "ENABLE_TOOL_SEARCH=true" in warnings[0].getMessage()


async def test_a_gemini_request_over_the_limit_is_advised_through_the_proxy(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    url = server.make_url("/v1beta/models/gemini-2.5-pro:generateContent")
    await post(client, url, gemini_body(GEMINI_DECLARATION_LIMIT + 1), {"x-goog-api-key": "k"})
    await post(client, url, gemini_body(3), {"x-goog-api-key": "k"})
    snapshot = await stats_of(client, server, total_is(2))
    assert snapshot["advice"]["gemini_declarations_over_limit"]["requests"] == 1
    assert snapshot["advice"]["claude_code_tool_search_off"]["requests"] == 0


async def test_websocket_disabled_counts_each_refused_upgrade_and_warns_once(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await proxy(websocket=False)
    with caplog.at_level(logging.WARNING, logger="toolslim"):
        for _ in range(2):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await client.ws_connect(server.make_url("/v1/responses"))
            assert refused.value.status == 426
        snapshot = await stats_of(client, server)
    advice = snapshot["advice"]["websocket_disabled"]
    assert (advice["requests"], advice["bytes"]) == (2, 0)
    assert advice["requests"] == snapshot["websockets"]["refused"]
    assert advice["fix"] == FIX["websocket_disabled"]
    warnings = [r for r in caplog.records if "advice websocket_disabled" in r.getMessage()]
    assert len(warnings) == 1
