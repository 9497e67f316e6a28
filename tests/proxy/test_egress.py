"""egress: upstream connections go through the forward proxy the environment (or
`upstream_proxy`) names, as the agents' own do; a body covered by a signature goes on untouched.

A real forward proxy on 127.0.0.1 (absolute-form requests, as HTTP proxies receive them) stands
between toolslim and the fake upstream.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy_harness import (
    ANTHROPIC,
    KEY,
    FakeUpstream,
    dumps,
    stats_of,
    tools_span,
    total_is,
)
from toolslim.config.settings import load_settings
from toolslim.proxy.app import make_app


@dataclass
class ForwardProxy:
    """Forwards each absolute-form request it gets and records its target and credentials."""

    targets: list[str] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    server: TestServer | None = None

    def app(self) -> web.Application:
        app = web.Application(handler_args={"auto_decompress": False})
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.targets.append(request.raw_path)
        self.authorizations.append(request.headers.get("Proxy-Authorization"))
        headers = {k: v for k, v in request.headers.items() if not k.lower().startswith("proxy-")}
        headers.pop("Host", None)
        async with (
            aiohttp.ClientSession(auto_decompress=False) as session,
            session.request(
                request.method, request.raw_path, headers=headers, data=await request.read()
            ) as answer,
        ):
            body = await answer.read()
            return web.Response(status=answer.status, body=body, headers={"X-Via": "proxy"})


@pytest.fixture
async def forward_proxy(aiohttp_server: Any) -> ForwardProxy:
    proxy = ForwardProxy()
    proxy.server = await aiohttp_server(proxy.app())
    return proxy


async def start(
    aiohttp_server: Any, upstream: FakeUpstream, env: dict[str, str], setting: str | None = None
) -> TestServer:
    """The proxy in front of `upstream`, with this environment and `upstream_proxy` setting."""
    flags = {"upstreams": {"anthropic": f"{upstream.url}/a"}, "upstream_proxy": setting}
    server: TestServer = await aiohttp_server(make_app(load_settings(None, flags, env)))
    return server


async def post(client: aiohttp.ClientSession, server: TestServer, **headers: str) -> bytes:
    body = dumps(ANTHROPIC)
    async with client.post(
        server.make_url("/v1/messages"), data=body, headers={"x-api-key": KEY, **headers}
    ) as response:
        assert response.status == 200
        return await response.read()


async def test_http_proxy_from_the_environment_carries_every_upstream_request(
    upstream: FakeUpstream,
    forward_proxy: ForwardProxy,
    aiohttp_server: Any,
    client: aiohttp.ClientSession,
) -> None:
    server = await start(aiohttp_server, upstream, {"HTTP_PROXY": forward_proxy.url})
    answer = await post(client, server)
    assert json.loads(answer)["id"] == "msg_1"
    assert forward_proxy.targets == [f"{upstream.url}/a/v1/messages"]
    [received] = upstream.received
    assert b'"title"' not in received.body  # compacted on the way, as without a proxy


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"NO_PROXY": "127.0.0.1"}, None),
        ({"no_proxy": "localhost,.example.com,127.0.0.1:9"}, None),
        ({}, "none"),
    ],
    ids=["NO_PROXY", "no_proxy with ports", "upstream_proxy none"],
)
async def test_an_exempt_host_or_upstream_proxy_none_connects_directly(
    env: dict[str, str],
    setting: str | None,
    upstream: FakeUpstream,
    forward_proxy: ForwardProxy,
    aiohttp_server: Any,
    client: aiohttp.ClientSession,
) -> None:
    env = {"HTTP_PROXY": forward_proxy.url, **env}
    server = await start(aiohttp_server, upstream, env, setting)
    await post(client, server)
    assert forward_proxy.targets == []
    assert len(upstream.received) == 1


async def test_upstream_proxy_overrides_the_environment_and_its_credentials_are_never_logged(
    upstream: FakeUpstream,
    forward_proxy: ForwardProxy,
    aiohttp_server: Any,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolslim")
    with_password = forward_proxy.url.replace("http://", "http://agent:s3cret-pass@")
    env = {"HTTP_PROXY": "http://127.0.0.1:9"}  # a dead proxy the setting must override
    server = await start(aiohttp_server, upstream, env, with_password)
    await post(client, server)
    assert len(forward_proxy.targets) == 1
    expected = "Basic " + base64.b64encode(b"agent:s3cret-pass").decode()
    assert forward_proxy.authorizations == [expected]
    assert "s3cret-pass" not in caplog.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "AWS4-HMAC-SHA256 Credential=AKIA/20261201/us-east-1/bedrock/aws4"},
        {"x-amz-content-sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b"},
    ],
    ids=["SigV4 authorization", "signed payload hash"],
)
async def test_a_body_covered_by_a_signature_is_forwarded_byte_identical_and_counted_signed(
    headers: dict[str, str],
    upstream: FakeUpstream,
    proxy: Any,
    client: aiohttp.ClientSession,
) -> None:
    server = await proxy()
    body = dumps(ANTHROPIC)
    async with client.post(server.make_url("/v1/messages"), data=body, headers=headers) as r:
        assert r.status == 200
    [received] = upstream.received
    assert received.body == body
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["components"]["toolschema"]["skip_reasons"] == {"signed": 1}


async def test_an_unsigned_payload_marker_is_compacted_as_usual(
    upstream: FakeUpstream, proxy: Any, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    body = dumps(ANTHROPIC)
    headers = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
    async with client.post(server.make_url("/v1/messages"), data=body, headers=headers) as r:
        assert r.status == 200
    [received] = upstream.received
    start, _ = tools_span(body)
    assert received.body[:start] == body[:start] and len(received.body) < len(body)
