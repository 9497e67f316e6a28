"""The relay writes a response's headers with its first bytes when they came together, and at
once when the upstream's body has not begun: a client never waits for the headers longer than
it would going direct. Real sockets on 127.0.0.1, bounded waits."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy_harness import ANTHROPIC, KEY, TIMEOUT, dumps, settings_for
from toolslim.proxy.app import make_app

EVENT = b'event: ping\ndata: {"type":"ping"}\n\n'
HEADERS = {"x-api-key": KEY, "Content-Type": "application/json"}


async def proxied(aiohttp_server: Any, *routes: web.RouteDef) -> str:
    """The proxy's base URL, in front of an upstream answering `routes` under /a (the
    anthropic upstream's base path)."""
    upstream_app = web.Application()
    upstream_app.add_routes(routes)
    upstream: TestServer = await aiohttp_server(upstream_app)
    server: TestServer = await aiohttp_server(
        make_app(settings_for(f"http://127.0.0.1:{upstream.port}"))
    )
    return f"http://127.0.0.1:{server.port}"


async def test_headers_reach_the_client_before_the_upstream_body_begins(
    aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    go_on = asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)  # the headers, then nothing until the client has them
        await asyncio.wait_for(go_on.wait(), 10)
        await response.write(EVENT)
        await response.write_eof()
        return response

    base = await proxied(aiohttp_server, web.post("/a/v1/messages", answer))
    url = f"{base}/v1/messages"
    async with client.post(
        url, data=dumps(ANTHROPIC), headers=HEADERS, timeout=TIMEOUT
    ) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        go_on.set()  # only now does the upstream send its first event
        assert await response.read() == EVENT


async def test_an_answer_that_came_whole_with_its_headers_arrives_whole(
    aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    body = b'{"type":"message","content":[],"usage":{"input_tokens":3,"output_tokens":1}}'

    async def whole(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    async def chunked(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write_eof(EVENT * 3)
        return response

    base = await proxied(
        aiohttp_server,
        web.post("/a/v1/messages", whole),
        web.post("/a/v1/stream/messages", chunked),
    )
    async with client.post(
        f"{base}/v1/messages", data=dumps(ANTHROPIC), headers=HEADERS
    ) as response:
        assert response.headers["Content-Length"] == str(len(body))
        assert await response.read() == body
    async with client.post(
        f"{base}/v1/stream/messages", data=dumps(ANTHROPIC), headers=HEADERS
    ) as response:
        assert response.headers["Transfer-Encoding"] == "chunked"
        assert await response.read() == EVENT * 3


async def test_answers_without_a_body_arrive_with_their_headers(
    aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204, headers={"X-Answer": "none"})

    async def head(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 10, headers={"X-Answer": "head"})

    base = await proxied(
        aiohttp_server, web.post("/a/v1/messages", empty), web.head("/a/v1/models", head)
    )
    async with client.post(f"{base}/v1/messages", data=b"{}", headers=HEADERS) as response:
        assert (response.status, response.headers["X-Answer"]) == (204, "none")
        assert await response.read() == b""
    async with client.head(f"{base}/v1/models", headers=HEADERS) as response:
        assert (response.status, response.headers["X-Answer"]) == (200, "head")
        assert response.headers["Content-Length"] == "10"
        assert await response.read() == b""
