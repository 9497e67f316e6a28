"""Tool health through the real proxy: a catalogue's findings are on /stats before the upstream
answers; the upstream's 400 reaches the client byte for byte and is counted as explained by
the finding, or as unexplained; one WARNING per finding and catalogue; the request goes out
unchanged."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy_harness import Proxy, dumps, stats_of, total_is

# The Messages API's answer to a root anyOf, as users quote it (docs/lint.md).
REFUSAL = (
    b'{"type":"error","error":{"type":"invalid_request_error","message":"tools.1.custom.'
    b'input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"},'
    b'"request_id":"req_011CUer5Hnhm1QQWCAASQRbD"}'
)
CLEAN = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "mcp__git__git_log", "description": "Log.", "input_schema": {"type": "object"}},
]
ROOT_ANY_OF = {
    "name": "mcp__gitlab__get_resource",
    "description": "Get a CI catalog resource by id or path.",
    "input_schema": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "path": {"type": "string"}},
        "anyOf": [{"required": ["id"]}, {"required": ["path"]}],
    },
}


def body_with(tools: list[dict[str, Any]]) -> bytes:
    """A Messages body whose catalogue is already in the compactor's canonical form (compact,
    keys sorted): toolslim forwards it as it came, so any change would be lint's."""
    canonical = json.dumps(tools, separators=(",", ":"), sort_keys=True).encode()
    head = dumps({"model": "claude-sonnet-4-5", "max_tokens": 64})[:-1]
    return head + b', "tools": ' + canonical + b', "messages": [{"role": "user", "content": "hi"}]}'


class Refusing:
    """An upstream that holds each answer until `release` is set, then answers 400 with
    `answer` (gzip-encoded when `gzipped`), and records the bodies it received."""

    def __init__(self, answer: bytes, gzipped: bool = False) -> None:
        self.answer = answer
        self.gzipped = gzipped
        self.release = asyncio.Event()
        self.arrived = asyncio.Event()
        self.received: list[bytes] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(await request.read())
        self.arrived.set()
        await self.release.wait()
        headers = {"request-id": "req_1"}
        body = self.answer
        if self.gzipped:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return web.Response(status=400, body=body, content_type="application/json",
                            headers=headers)  # fmt: skip

    async def start(self, aiohttp_server: Any) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        server: TestServer = await aiohttp_server(app)
        return f"http://127.0.0.1:{server.port}"


async def send(
    client: aiohttp.ClientSession, server: TestServer, body: bytes
) -> tuple[int, bytes, str | None]:
    async with client.post(server.make_url("/v1/messages"), data=body) as response:
        return response.status, await response.read(), response.headers.get("Content-Encoding")


def has_lint_requests(count: int) -> Any:
    return lambda snapshot: snapshot["lint"]["requests"] >= count


async def test_a_root_any_of_to_anthropic_is_on_stats_before_the_answer_and_its_400_explained(
    aiohttp_server: Any, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    upstream = Refusing(REFUSAL)
    server = await proxy(await upstream.start(aiohttp_server))
    body = body_with([CLEAN[0], ROOT_ANY_OF])
    sending = asyncio.create_task(send(client, server, body))
    await asyncio.wait_for(upstream.arrived.wait(), 5)
    before = await stats_of(client, server, has_lint_requests(1))  # the upstream still holds it
    lint = before["lint"]
    assert lint["requests"] == 1
    assert lint["rules"]["anthropic_root_combinator"] == {
        "severity": "rejected",
        "requests": 1,
        "upstream_rejections": 0,
    }
    [finding] = lint["findings"]
    assert (finding["tool"], finding["server"], finding["provider"]) == (
        "mcp__gitlab__get_resource",
        "gitlab",
        "anthropic",
    )
    assert "anyOf" in finding["detail"] and finding["fix"]
    upstream.release.set()
    status, answer, _ = await sending
    assert (status, answer) == (400, REFUSAL)  # relayed byte for byte
    assert upstream.received == [body]  # lint observes: the request went out as sent
    after = await stats_of(client, server, total_is(1))
    assert after["lint"]["rules"]["anthropic_root_combinator"]["upstream_rejections"] == 1
    assert after["lint"]["upstream_rejections"] == {"explained": 1, "unexplained": 0}


async def test_a_400_naming_a_tool_schema_of_a_clean_catalogue_is_counted_unexplained(
    aiohttp_server: Any, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    upstream = Refusing(REFUSAL, gzipped=True)  # compressed: read after decoding a copy
    upstream.release.set()
    server = await proxy(await upstream.start(aiohttp_server))
    status, answer, encoding = await send(client, server, body_with(CLEAN))
    assert (status, gzip.decompress(answer), encoding) == (400, REFUSAL, "gzip")
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["lint"]["requests"] == 0
    assert snapshot["lint"]["upstream_rejections"] == {"explained": 0, "unexplained": 1}


async def test_a_400_about_something_else_for_a_clean_catalogue_is_not_a_rejection(
    aiohttp_server: Any, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    other = b'{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 0"}}'
    upstream = Refusing(other)
    upstream.release.set()
    server = await proxy(await upstream.start(aiohttp_server))
    assert (await send(client, server, body_with(CLEAN)))[:2] == (400, other)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["lint"]["upstream_rejections"] == {"explained": 0, "unexplained": 0}


async def test_a_finding_is_warned_once_per_catalogue_and_counted_on_every_request(
    aiohttp_server: Any,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = Refusing(REFUSAL)
    upstream.release.set()
    server = await proxy(await upstream.start(aiohttp_server))
    body = body_with([CLEAN[0], ROOT_ANY_OF])
    with caplog.at_level(logging.WARNING, logger="toolslim.proxy.lint"):
        for _ in range(3):  # a memo miss, then hits
            assert (await send(client, server, body))[0] == 400
        snapshot = await stats_of(client, server, total_is(3))
    lint = snapshot["lint"]
    assert lint["rules"]["anthropic_root_combinator"]["requests"] == 3
    assert lint["upstream_rejections"]["explained"] == 3
    assert len(lint["findings"]) == 1
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("lint ")]
    assert len(warnings) == 1
    assert '"mcp__gitlab__get_resource"' in warnings[0] and '"gitlab"' in warnings[0]
    refused = [r.getMessage() for r in caplog.records if "upstream refused" in r.getMessage()]
    assert len(refused) == 3 and all("mcp__gitlab__get_resource" in m for m in refused)
    async with client.get(server.make_url("/metrics")) as response:
        metrics = await response.text()
    line = 'toolslim_lint_requests_total{rule="anthropic_root_combinator",severity="rejected"} 3.0'
    assert line in metrics.splitlines()
    assert 'toolslim_lint_upstream_rejections_total{rule="unexplained"} 0.0' in metrics
