"""routing through the real proxy: which upstream and API a request goes to, and the requests
refused with 400 before they reach one."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from proxy_harness import (
    FakeUpstream,
    Proxy,
    raw_exchange,
    settings_for,
)
from toolslim.wire.routing import route_request


@pytest.mark.parametrize(
    ("path", "headers", "seen", "api"),
    [
        ("/v1/messages", {}, "/a/v1/messages", "anthropic"),
        ("/v1/messages/batches/b1", {}, "/a/v1/messages/batches/b1", "anthropic"),
        ("/v1/chat/completions", {"x-api-key": "k"}, "/o/v1/chat/completions", "openai-chat"),
        ("/v1/responses/resp_1/cancel", {}, "/o/v1/responses/resp_1/cancel", "openai-responses"),
        ("/v1/models", {"anthropic-version": "2023-06-01"}, "/a/v1/models", "other"),
        ("/v1/models", {"x-api-key": "k"}, "/a/v1/models", "other"),
        ("/v1/models", {"Authorization": "Bearer k"}, "/o/v1/models", "other"),
        ("/v1/files", {}, "/o/v1/files", "other"),
        (
            "/v1beta/models/g:streamGenerateContent?alt=sse",
            {},
            "/g/v1beta/models/g:streamGenerateContent?alt=sse",
            "gemini",
        ),
        ("/v1alpha/models", {}, "/g/v1alpha/models", "gemini"),
        ("/openai/v1/models?x=1", {"x-api-key": "k"}, "/o/v1/models?x=1", "other"),
        ("/anthropic/v1/chat/completions", {}, "/a/v1/chat/completions", "openai-chat"),
        (
            "/gemini/v1beta/openai/chat/completions",
            {},
            "/g/v1beta/openai/chat/completions",
            "openai-chat",
        ),
        ("/gemini", {}, "/g/", "gemini"),
        ("/api/event_logging/batch", {}, "/a/api/event_logging/batch", "other"),
        ("/", {}, "/a/", "other"),
    ],
)
async def test_routing_by_path_and_headers(
    path: str,
    headers: dict[str, str],
    seen: str,
    api: str,
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
) -> None:
    settings = settings_for(upstream.url)
    assert route_request(path, CIMultiDictProxy(CIMultiDict(headers)), settings).api == api
    server = await proxy()
    async with client.post(server.make_url(path), data=b"{}", headers=headers) as response:
        assert response.status == 200
    assert upstream.received[0].target == seen


async def test_default_upstream_takes_paths_no_rule_matches(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(default_upstream="openai")
    async with client.get(server.make_url("/health")) as response:
        assert response.status == 200
    assert upstream.received[0].target == "/o/health"


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        (b"GET http://169.254.169.254/latest/meta-data HTTP/1.1", 400),
        (b"POST http://api.anthropic.com/v1/messages HTTP/1.1", 400),
        (b"CONNECT api.anthropic.com:443 HTTP/1.1", 405),
    ],
)
async def test_absolute_form_targets_and_connect_are_refused_never_an_open_proxy(
    request_line: bytes, status: int, upstream: FakeUpstream, proxy: Proxy
) -> None:
    server = await proxy()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(
            request_line + b"\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        answer = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    assert answer.startswith(f"HTTP/1.1 {status}".encode())
    assert b"reverse proxy" in answer
    assert upstream.received == []


# --- requests that cannot be forwarded faithfully -------------------------------------------


async def test_headers_arrive_byte_for_byte_or_the_request_is_refused_with_400_saying_why(
    upstream: FakeUpstream, proxy: Proxy
) -> None:
    server = await proxy()
    cases = [(b"sk-\xc3\xbcn\xc3\xaf", 200), (b"sk-\xff\xfekey", 400), (b"sk-\x80", 400)]
    for value, status in cases:
        answer = await raw_exchange(
            server.port,
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + value + b"\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        assert answer.startswith(f"HTTP/1.1 {status}".encode()), (value, answer)
        if status == 400:
            assert b"x-api-key header holds bytes that are not UTF-8" in answer
            assert value not in answer
    [received] = upstream.received  # only the request that could arrive exactly
    assert received.headers["x-api-key"].encode() == b"sk-\xc3\xbcn\xc3\xaf"


@pytest.mark.parametrize("path", [b"/gemini/../v1/messages", b"/v1/%2e%2e/stats"])
async def test_dot_segments_are_refused_with_400_and_never_reach_the_upstream(
    path: bytes, upstream: FakeUpstream, proxy: Proxy
) -> None:
    server = await proxy()
    answer = await raw_exchange(
        server.port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 400")
    assert b". or .. segments" in answer
    assert upstream.received == []


async def test_a_websocket_upgrade_is_held_to_the_same_rules(
    upstream: FakeUpstream, proxy: Proxy
) -> None:
    server = await proxy()
    upgrade = (
        b"Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    )
    for request in (
        b"GET /openai/%2e%2e/v1/responses HTTP/1.1\r\n" + upgrade + b"\r\n",
        b"GET /v1/responses HTTP/1.1\r\n" + upgrade + b"x-api-key: sk-\xff\r\n\r\n",
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.close()
        assert head.startswith(b"HTTP/1.1 400"), head
    assert upstream.received == []
