"""watchdog: each wait on an upstream, over HTTP or a WebSocket upgrade, is held to its limit by
the one watchdog mechanism and answered in the API's shape. Real sockets on 127.0.0.1."""

from __future__ import annotations

import dataclasses
from typing import Any

import aiohttp
import pytest

from proxy_harness import FakeUpstream, settings_for
from toolslim.proxy.app import make_app


@pytest.mark.parametrize("upgrade", [False, True], ids=["http", "websocket upgrade"])
async def test_an_upstream_silent_past_response_headers_is_answered_504(
    upgrade: bool, aiohttp_server: Any, upstream: FakeUpstream, client: aiohttp.ClientSession
) -> None:
    settings = settings_for(upstream.url)
    timeouts = dataclasses.replace(settings.timeouts, response_headers=0.2)
    server = await aiohttp_server(make_app(dataclasses.replace(settings, timeouts=timeouts)))
    headers = {"Authorization": "Bearer sk-test", "X-Fake": "slow:5000"}
    if upgrade:
        headers |= {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        }
    method = "GET" if upgrade else "POST"
    async with client.request(
        method, server.make_url("/v1/responses"), headers=headers, data=None if upgrade else b"{}"
    ) as response:
        assert response.status == 504
        body = await response.json()
    assert "sent no response headers within 0.2 s" in body["error"]["message"]
    async with client.get(server.make_url("/stats")) as answer:
        snapshot = await answer.json()
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 1
