"""app: end to end through real sockets: a real aiohttp upstream on 127.0.0.1 records what it
receives, the proxy is `make_app(settings)` on its own port, the client a real ClientSession.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

import toolslim.app as app_module
from child import python_output
from toolslim.app import _ONE_WRITE, FORWARDING, _Patrol, make_app, route_request
from toolslim.config import Settings, Timeouts, load_settings
from toolslim.pipeline import Pipeline

TIMEOUT = aiohttp.ClientTimeout(total=15)
KEY = "sk-ant-test-0123456789-do-not-log"
TOKEN = "admin-token-0123456789abcdef"

# A tool schema the compactor acts on ($schema draft-07 and titles are annotations).
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "ReadFile",
    "type": "object",
    "properties": {
        "path": {"type": "string", "title": "Path", "description": "file to read"},
        "limit": {"type": "integer", "title": "Limit", "default": 100},
    },
    "required": ["path"],
    "additionalProperties": False,
}
COMPACT_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "file to read"},
        "limit": {"type": "integer", "default": 100},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def dumps(obj: Any) -> bytes:
    # Spaces after separators, as many SDKs write: bytes outside `tools` must survive as is.
    return json.dumps(obj, separators=(", ", ": ")).encode()


# A catalogue already in the compactor's canonical form (compact, keys sorted, no annotations).
CANONICAL_TOOLS = json.dumps(
    [{"name": "t", "input_schema": COMPACT_SCHEMA}], separators=(",", ":"), sort_keys=True
).encode()

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are a careful agent. ünïcödé ✓"}],
    "tools": [{"name": "read_file", "description": "Read a file.", "input_schema": SCHEMA}],
    "messages": [{"role": "user", "content": "read README.md"}],
    "stream": False,
}
OPENAI_CHAT = {
    "model": "gpt-5",
    "messages": [{"role": "user", "content": "read README.md"}],
    "tools": [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read.", "parameters": SCHEMA},
        }
    ],
}
RESPONSES = {
    "model": "gpt-5-codex",
    "input": [{"role": "user", "content": "read README.md"}],
    "tools": [{"type": "function", "name": "read_file", "parameters": SCHEMA, "strict": False}],
}
GEMINI = {
    "contents": [{"role": "user", "parts": [{"text": "read README.md"}]}],
    "tools": [{"functionDeclarations": [{"name": "read_file", "parametersJsonSchema": SCHEMA}]}],
}

# (path the client calls, body, path the upstream sees, API label, where the schema lives)
APIS = {
    "anthropic": ("/v1/messages?beta=true", ANTHROPIC, "/a/v1/messages?beta=true", "input_schema"),
    "openai-chat": ("/v1/chat/completions", OPENAI_CHAT, "/o/v1/chat/completions", "function"),
    "openai-responses": ("/v1/responses", RESPONSES, "/o/v1/responses", "parameters"),
    "gemini": (
        "/v1beta/models/gemini-2.5-pro:generateContent",
        GEMINI,
        "/g/v1beta/models/gemini-2.5-pro:generateContent",
        "functionDeclarations",
    ),
}


def schema_of(api: str, tools: list[Any]) -> Any:
    tool = tools[0]
    if api == "openai-chat":
        return tool["function"]["parameters"]
    if api == "gemini":
        return tool["functionDeclarations"][0]["parametersJsonSchema"]
    return tool["input_schema" if api == "anthropic" else "parameters"]


def tools_span(body: bytes) -> tuple[int, int]:
    """Byte offsets of the top-level `tools` value in a JSON object body."""
    text = body.decode()
    decoder = json.JSONDecoder()
    start = text.index('"tools"')
    start = text.index(":", start) + 1
    while text[start] == " ":
        start += 1
    _, end = decoder.raw_decode(text, start)
    return len(text[:start].encode()), len(text[:end].encode())


GZIPPED = (
    b'{"type": "message", "usage": {"input_tokens": 3, "output_tokens": 4}, "pad": "'
    + b"a" * 4000
    + b'"}'
)


# --- the fake upstream -------------------------------------------------------------------


@dataclasses.dataclass
class Received:
    method: str
    target: str
    headers: CIMultiDictProxy[str]
    body: bytes
    peer_port: int


class FakeUpstream:
    """Records each request; answers as the X-Fake request header asks (default: JSON).

    X-Fake: json | sse:N:MS (N events MS apart) | gzip | slow:MS | status:CODE | hang | reset
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.event_sent: list[float] = []
        self.cancelled = asyncio.Event()
        self.server: TestServer | None = None

    def app(self) -> web.Application:
        app = web.Application(handler_args={"auto_decompress": False})
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.content.read()
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.received.append(
            Received(
                request.method, request.raw_path, request.headers, body, peer[1] if peer else 0
            )
        )
        mode, _, arg = request.headers.get("X-Fake", "json").partition(":")
        try:
            answer: web.StreamResponse = await getattr(self, f"answer_{mode}")(request, arg)
            return answer
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def answer_json(self, request: web.Request, arg: str) -> web.StreamResponse:
        usage = {"input_tokens": 50, "output_tokens": 7, "cache_read_input_tokens": 20}
        payload = {"id": "msg_1", "type": "message", "usage": usage, "echo": len(self.received)}
        headers = {"X-Up-Hop": "1", "Connection": "X-Up-Hop", "Keep-Alive": "timeout=5"}
        headers["Proxy-Authenticate"] = "Basic"
        headers["request-id"] = "req_123"
        return web.json_response(payload, headers=headers)

    async def answer_status(self, request: web.Request, arg: str) -> web.StreamResponse:
        body = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
        return web.Response(
            status=int(arg),
            body=body,
            content_type="application/json",
            headers={"retry-after": "7"},
        )

    async def answer_gzip(self, request: web.Request, arg: str) -> web.StreamResponse:
        body = gzip.compress(GZIPPED)
        return web.Response(
            body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
        )

    async def answer_sse(self, request: web.Request, arg: str) -> web.StreamResponse:
        count, _, gap = arg.partition(":")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        tag = request.query.get("tag", "")
        start = {"type": "message_start", "message": {"usage": {"input_tokens": 11}}}
        await response.write(b"event: message_start\ndata: " + json.dumps(start).encode() + b"\n\n")
        for index in range(int(count)):
            if index:
                await asyncio.sleep(int(gap) / 1000)
            event = {"type": "content_block_delta", "index": index, "tag": tag}
            await response.write(b"event: delta\ndata: " + json.dumps(event).encode() + b"\n\n")
            self.event_sent.append(time.perf_counter())
        end = {"type": "message_delta", "usage": {"output_tokens": 5}}
        await response.write(b"event: message_delta\ndata: " + json.dumps(end).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def answer_slow(self, request: web.Request, arg: str) -> web.StreamResponse:
        await asyncio.sleep(int(arg) / 1000)
        return web.json_response({"slow": True})

    async def answer_hang(self, request: web.Request, arg: str) -> web.StreamResponse:
        stall, _, headers_after_ms = arg.partition(":")
        await asyncio.sleep(int(headers_after_ms or 0) / 1000)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: ping\ndata: {}\n\n")
        await asyncio.sleep(float(stall or 30))
        await response.write(b"event: late\ndata: {}\n\n")
        return response

    async def answer_reset(self, request: web.Request, arg: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: ping\ndata: {}\n\n")
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.abort()
        return response


# --- fixtures ------------------------------------------------------------------------------

Proxy = Callable[..., Awaitable[TestServer]]


@pytest.fixture
async def upstream(aiohttp_server: Any) -> FakeUpstream:
    fake = FakeUpstream()
    fake.server = await aiohttp_server(fake.app())
    return fake


def raw_url(server: TestServer, target: str) -> URL:
    """The URL with its target exactly as written (make_url would normalize %2F to /)."""
    return URL(f"http://127.0.0.1:{server.port}{target}", encoded=True)


def settings_for(base: str, **changes: Any) -> Settings:
    """Every upstream on `base`, told apart by a base path (/a, /o, /g), plus `changes`."""
    upstreams = {"anthropic": f"{base}/a", "openai": f"{base}/o", "gemini": f"{base}/g"}
    settings = load_settings(None, {"upstreams": upstreams}, {})
    return dataclasses.replace(settings, **changes)


@pytest.fixture
def proxy(aiohttp_server: Any, upstream: FakeUpstream) -> Proxy:
    async def start(base: str | None = None, **changes: Any) -> TestServer:
        app = make_app(settings_for(base or upstream.url, **changes))
        server: TestServer = await aiohttp_server(app)
        return server

    return start


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=TIMEOUT, auto_decompress=False) as session:
        yield session


async def stats_of(
    client: aiohttp.ClientSession,
    server: TestServer,
    until: Callable[[dict[str, Any]], bool] = lambda s: True,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """/stats once `until` holds (a handler counts after its last byte is written)."""
    deadline = time.monotonic() + 5
    while True:
        async with client.get(server.make_url("/stats"), headers=headers) as response:
            assert response.status == 200
            snapshot: dict[str, Any] = await response.json()
        if until(snapshot) or time.monotonic() > deadline:
            return snapshot
        await asyncio.sleep(0.02)


def total_is(count: int) -> Callable[[dict[str, Any]], bool]:
    """`count` requests counted, their catalogue tokens included (those are counted later)."""
    return lambda s: s["requests"]["total"] >= count and s["requests"]["tokens_pending"] == 0


def assert_components_agree(snapshot: dict[str, Any]) -> None:
    total = snapshot["requests"]["total"]
    for name, counters in snapshot["components"].items():
        runs = counters["applied"] + counters["skipped"] + counters["error"]
        assert runs == total, (name, counters, total)
        assert sum(counters["skip_reasons"].values()) == counters["skipped"]


# --- compaction and faithful forwarding ----------------------------------------------------


@pytest.mark.parametrize("api", list(APIS))
async def test_request_is_compacted_and_every_byte_outside_the_tools_value_is_identical(
    api: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    path, payload, seen_path, _ = APIS[api]
    body = dumps(payload)
    headers = {"Content-Type": "application/json", "x-api-key": KEY}
    async with client.post(server.make_url(path), data=body, headers=headers) as response:
        assert response.status == 200
        answer = await response.read()
    assert json.loads(answer)["id"] == "msg_1"

    [received] = upstream.received
    assert received.method == "POST" and received.target == seen_path
    assert received.headers["Content-Length"] == str(len(received.body))
    start, end = tools_span(body)
    new_start, new_end = tools_span(received.body)
    assert received.body[:new_start] == body[:start]
    assert received.body[new_end:] == body[end:]
    tools = json.loads(received.body[new_start:new_end])
    assert schema_of(api, tools) == COMPACT_SCHEMA
    assert len(received.body) < len(body)

    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["by_api"] == {api: 1}
    component = snapshot["components"]["toolschema"]
    assert component["applied"] == 1
    assert component["bytes_saved"] == len(body) - len(received.body)
    assert component["tokens_saved"] > 0
    assert snapshot["requests"]["bytes_received"] == len(body)
    assert snapshot["requests"]["bytes_forwarded"] == len(received.body)


@pytest.mark.parametrize(
    ("case", "method", "body", "content_type", "reason"),
    [
        ("json without tools", "POST", b'{"model": "m", "messages": []}', "application/json", None),
        (
            "nothing to strip",
            "POST",
            b'{"tools": ' + CANONICAL_TOOLS + b"}",
            "application/json",
            "nothing_to_strip",
        ),
        ("not json", "POST", b"\x00\x01binary\xff" * 100, "application/octet-stream", "not_json"),
        (
            "multipart",
            "POST",
            b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\n{"tools":[]}\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
            None,
        ),
        ("get", "GET", b"", None, "no_body"),
        ("empty post", "POST", b"", None, "no_body"),
    ],
    ids=["json without tools", "nothing to strip", "not json", "multipart", "get", "empty post"],
)
async def test_bodies_the_pipeline_does_not_change_are_forwarded_byte_identical(
    case: str,
    method: str,
    body: bytes,
    content_type: str | None,
    reason: str | None,
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
) -> None:
    server = await proxy()
    headers = {"Content-Type": content_type} if content_type else {}
    url = raw_url(server, "/v1/messages/count_tokens?x=1&y=%2F")
    async with client.request(method, url, data=body or None, headers=headers) as response:
        assert response.status == 200
    [received] = upstream.received
    assert received.method == method
    assert received.target == "/a/v1/messages/count_tokens?x=1&y=%2F"
    assert received.body == body
    if content_type:
        assert received.headers["Content-Type"] == content_type
    if method == "GET":
        assert "Content-Length" not in received.headers
    snapshot = await stats_of(client, server, total_is(1))
    component = snapshot["components"]["toolschema"]
    assert component["applied"] == 0 and component["skipped"] == 1
    if reason:
        assert component["skip_reasons"] == {reason: 1}


async def test_pure_pass_through_pipeline_forwards_everything_untouched(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(pipeline=())
    body = dumps(ANTHROPIC)
    async with client.post(server.make_url("/v1/messages"), data=body) as response:
        assert response.status == 200
    assert upstream.received[0].body == body
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["components"] == {}


async def test_headers_reach_upstream_with_credentials_but_without_hop_by_hop_and_with_its_host(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    headers = {
        "x-api-key": KEY,
        "Authorization": "Bearer sk-openai-like",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "prompt-caching-2024-07-31,tools-2024-05-16",
        "OpenAI-Organization": "org-1",
        "x-goog-api-key": "goog-key",
        "User-Agent": "claude-cli/2.0 (external, cli)",
        "Accept": "application/json",
        "Cookie": "a=b",
        "X-Custom-Hop": "drop me",
        "Connection": "keep-alive, X-Custom-Hop",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic Zm9vOmJhcg==",
        "TE": "trailers",
    }
    async with client.post(
        raw_url(server, "/v1/models?limit=5&after_id=x%20y&q=%2F"), data=b"{}", headers=headers
    ) as response:
        assert response.status == 200
        assert response.headers["request-id"] == "req_123"
        for hop in ("X-Up-Hop", "Keep-Alive", "Proxy-Authenticate"):
            assert hop not in response.headers
    [received] = upstream.received
    assert received.target == "/a/v1/models?limit=5&after_id=x%20y&q=%2F"
    assert received.headers["Host"] == f"127.0.0.1:{upstream.server.port}"  # type: ignore[union-attr]
    for name in (
        "x-api-key",
        "Authorization",
        "anthropic-version",
        "anthropic-beta",
        "OpenAI-Organization",
        "x-goog-api-key",
        "User-Agent",
        "Accept",
        "Cookie",
    ):
        assert received.headers.getall(name) == [headers[name]], name
    for hop in ("X-Custom-Hop", "Keep-Alive", "Proxy-Authorization", "TE"):
        assert hop not in received.headers
    assert received.headers.get("Connection", "keep-alive").lower() == "keep-alive"


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


async def test_upstream_connections_are_kept_alive_and_reused(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    for _ in range(5):
        async with client.post(server.make_url("/v1/messages"), data=b"{}") as response:
            await response.read()
    assert len({r.peer_port for r in upstream.received}) == 1


# --- compressed request bodies -------------------------------------------------------------


def brotli_compress(data: bytes) -> bytes:
    brotli = pytest.importorskip("brotli")
    result: bytes = brotli.compress(data)
    return result


def zstd_compress(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    result: bytes = zstandard.ZstdCompressor().compress(data)
    return result


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli_compress,
    "zstd": zstd_compress,
}


@pytest.mark.parametrize("coding", list(ENCODERS))
async def test_encoded_body_that_changed_is_forwarded_decoded_without_the_header(
    coding: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    body = dumps(ANTHROPIC)
    encoded = ENCODERS[coding](body)
    headers = {"Content-Encoding": coding, "Content-Type": "application/json"}
    async with client.post(server.make_url("/v1/messages"), data=encoded, headers=headers) as r:
        assert r.status == 200
    [received] = upstream.received
    assert "Content-Encoding" not in received.headers
    assert received.headers["Content-Length"] == str(len(received.body))
    start, end = tools_span(body)
    new_start, new_end = tools_span(received.body)
    assert (received.body[:new_start], received.body[new_end:]) == (body[:start], body[end:])
    assert schema_of("anthropic", json.loads(received.body[new_start:new_end])) == COMPACT_SCHEMA


@pytest.mark.parametrize(
    ("case", "encoded", "coding", "reason"),
    [
        ("unchanged", gzip.compress(b'{"messages": []}'), "gzip", "no_tools"),
        ("corrupt", b"\x1f\x8b\x08\x00garbage" + bytes(range(40)), "gzip", "undecodable"),
        ("truncated", gzip.compress(dumps(ANTHROPIC))[:-20], "gzip", "undecodable"),
        ("unknown coding", b"compressed?", "lzma", "undecodable"),
        ("bomb", gzip.compress(b" " * 50_000), "gzip", "too_large"),
    ],
    ids=["unchanged", "corrupt", "truncated", "unknown coding", "bomb"],
)
async def test_encoded_body_unchanged_or_undecodable_is_forwarded_as_sent_with_the_header(
    case: str,
    encoded: bytes,
    coding: str,
    reason: str,
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
) -> None:
    server = await proxy(max_body_bytes=10_000)
    headers = {"Content-Encoding": coding, "Content-Type": "application/json"}
    async with client.post(server.make_url("/v1/messages"), data=encoded, headers=headers) as r:
        assert r.status == 200
    [received] = upstream.received
    assert received.body == encoded
    assert received.headers["Content-Encoding"] == coding
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["components"]["toolschema"]["skip_reasons"] == {reason: 1}


# --- large bodies --------------------------------------------------------------------------


async def test_body_over_the_transform_limit_is_streamed_through_untouched(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(max_body_bytes=1024)
    body = dumps({**ANTHROPIC, "messages": [{"role": "user", "content": "x" * 5000}]})

    async def chunked() -> AsyncIterator[bytes]:
        for offset in range(0, len(body), 700):
            yield body[offset : offset + 700]

    async with client.post(server.make_url("/v1/messages"), data=body) as response:
        assert response.status == 200
    async with client.post(server.make_url("/v1/messages"), data=chunked()) as response:
        assert response.status == 200
    assert [r.body for r in upstream.received] == [body, body]
    assert upstream.received[0].headers["Content-Length"] == str(len(body))
    snapshot = await stats_of(client, server, total_is(2))
    component = snapshot["components"]["toolschema"]
    assert component["skip_reasons"] == {"too_large": 2}
    assert snapshot["requests"]["bytes_received"] == 2 * len(body)
    assert snapshot["requests"]["bytes_forwarded"] == 2 * len(body)


@pytest.mark.parametrize(
    "text", [_ONE_WRITE - 3000, _ONE_WRITE + 3000, 1_500_000], ids=["one write", "two", "1.5MB"]
)
async def test_compacted_bodies_of_every_size_are_forwarded_exactly_with_their_length(
    text: int, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    body = dumps({**ANTHROPIC, "messages": [{"role": "user", "content": "y" * text}]})
    async with client.post(server.make_url("/v1/messages"), data=io.BytesIO(body)) as response:
        assert response.status == 200
    [received] = upstream.received
    assert received.headers["Content-Length"] == str(len(received.body))
    assert received.body == Pipeline(("toolschema",)).run(body, "anthropic").body
    assert len(received.body) < len(body)


# --- responses -----------------------------------------------------------------------------


async def test_sse_events_reach_the_client_as_the_upstream_sends_them(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    arrivals: list[float] = []
    raw = b""
    headers = {"X-Fake": "sse:5:200", "Accept": "text/event-stream"}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        async for line in r.content:
            raw += line
            if line.startswith(b"event: delta"):
                arrivals.append(time.perf_counter())
    assert len(arrivals) == 5
    # The first event is seen long before the upstream sends the last one (4 x 200 ms later).
    assert arrivals[0] < upstream.event_sent[-1]
    assert arrivals[-1] - arrivals[0] > (upstream.event_sent[-1] - upstream.event_sent[0]) / 2
    assert raw.count(b"\n\n") == 7
    snapshot = await stats_of(client, server, lambda s: s["usage"]["responses_with_usage"] == 1)
    assert snapshot["usage"]["tokens"]["input"] == 11
    assert snapshot["usage"]["tokens"]["output"] == 5
    assert snapshot["requests"]["active_streams"] == 0


async def test_compressed_response_is_relayed_compressed(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    expected = gzip.compress(GZIPPED)
    headers = {"X-Fake": "gzip", "Accept-Encoding": "gzip"}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.headers["Content-Encoding"] == "gzip"
        assert await r.read() == expected
    snapshot = await stats_of(client, server, lambda s: s["usage"]["responses_with_usage"] == 1)
    assert snapshot["usage"]["tokens"]["output"] == 4


async def test_upstream_errors_are_relayed_exactly(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    for status in (400, 429, 500, 529):
        headers = {"X-Fake": f"status:{status}"}
        async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
            assert r.status == status
            assert r.headers["retry-after"] == "7"
            body = await r.read()
        assert body == b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
    snapshot = await stats_of(client, server, total_is(4))
    assert snapshot["requests"]["by_status"]["4xx"] == 2
    assert snapshot["requests"]["by_status"]["5xx"] == 2
    assert snapshot["requests"]["upstream_errors"] == {"connect": 0, "reset": 0, "timeout": 0}


async def test_client_disconnect_cancels_the_upstream_request_at_once(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    headers = {"X-Fake": "hang:30"}
    response = await client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers)
    assert await response.content.readline() == b"event: ping\n"
    response.close()
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, lambda s: s["requests"]["client_disconnects"] == 1)
    assert snapshot["requests"]["client_disconnects"] == 1
    assert snapshot["requests"]["active_streams"] == 0
    assert_components_agree(snapshot)


async def test_client_disconnect_while_waiting_for_headers_cancels_upstream(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    headers = {"X-Fake": "slow:30000"}
    with pytest.raises(asyncio.TimeoutError):
        async with client.post(
            server.make_url("/v1/messages"),
            data=b"{}",
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=0.3),
        ):
            pass
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["by_status"]["4xx"] == 1  # counted as 499
    assert snapshot["requests"]["client_disconnects"] == 1


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def assert_error_shape(api: str, status: int, body: dict[str, Any], words: str) -> None:
    if api == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
        message = body["error"]["message"]
    elif api == "gemini":
        assert body["error"]["code"] == status
        assert body["error"]["status"] == ("UNAVAILABLE" if status == 502 else "DEADLINE_EXCEEDED")
        message = body["error"]["message"]
    else:
        assert body["error"]["type"] == "upstream_error"
        message = body["error"]["message"]
    assert words in message
    for leak in ("127.0.0.1", "http", KEY):
        assert leak not in message


@pytest.mark.parametrize("api", list(APIS))
async def test_upstream_down_is_502_in_the_apis_error_shape(
    api: str, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(f"http://127.0.0.1:{closed_port()}")
    path, payload, _, _ = APIS[api]
    headers = {"x-api-key": KEY}
    async with client.post(server.make_url(path), data=dumps(payload), headers=headers) as r:
        assert r.status == 502
        assert r.content_type == "application/json"
        body = await r.json()
    upstream_name = "gemini" if api == "gemini" else "anthropic" if api == "anthropic" else "openai"
    assert_error_shape(api, 502, body, f"could not connect to the {upstream_name} upstream")
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["connect"] == 1
    assert snapshot["requests"]["by_status"]["5xx"] == 1
    assert_components_agree(snapshot)


async def test_an_upstream_host_that_does_not_resolve_is_a_502_saying_so(
    proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    # `.invalid` never resolves (RFC 6761); the message must not be "unknown error -2".
    server = await proxy("http://toolslim-test.invalid")
    async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as r:
        assert r.status == 502
        body = await r.json()
    message = body["error"]["message"]
    assert message.endswith("(its host name did not resolve)"), message
    assert "toolslim-test.invalid" not in message


@pytest.mark.parametrize("api", list(APIS))
async def test_slow_upstream_is_504_in_the_apis_error_shape(
    api: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=0.2, idle_chunk=5))
    path, payload, _, _ = APIS[api]
    headers = {"X-Fake": "slow:5000"}
    async with client.post(server.make_url(path), data=dumps(payload), headers=headers) as r:
        assert r.status == 504
        body = await r.json()
    assert_error_shape(api, 504, body, "sent no response headers within 0.2 s")
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 1


async def test_wait_for_headers_is_held_to_response_headers_not_to_idle_chunk(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=5, idle_chunk=0.2))
    headers = {"X-Fake": "slow:600"}  # headers after 0.6 s: three idle_chunks, within 5 s
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.status == 200
        await r.read()
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 0


async def test_the_patrol_cuts_a_wait_within_one_period_of_its_limit_and_sleeps_when_idle() -> None:
    loop = asyncio.get_running_loop()
    patrol = _Patrol(loop, period=0.05)

    async def wait_on_upstream(limit: float) -> float:
        watchdog = patrol.watch()
        started = loop.time()
        try:
            watchdog.waiting(limit)
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            assert watchdog.expired()  # its own cancellation, consumed
            return loop.time() - started
        finally:
            patrol.release(watchdog)
        raise AssertionError("not cut")

    cut = await asyncio.gather(wait_on_upstream(0.1), wait_on_upstream(0.2))
    assert 0.1 <= cut[0] < 0.1 + 0.05 + 0.05  # one period late at most (and a little slack)
    assert 0.2 <= cut[1] < 0.2 + 0.05 + 0.05
    await asyncio.sleep(0.12)
    assert patrol._timer is None  # nothing watched: no timer runs


async def test_upstream_reset_mid_stream_ends_the_clients_stream_and_counts_reset(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    async with client.post(
        server.make_url("/v1/messages"), data=b"{}", headers={"X-Fake": "reset"}
    ) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["reset"] == 1
    assert snapshot["requests"]["active_streams"] == 0


@pytest.mark.parametrize(
    "hang",
    ["hang:5", "hang:5:600"],  # the second sends headers after three idle_chunks, then stalls
    ids=["stall", "stall after slow headers"],
)
async def test_idle_gap_longer_than_idle_chunk_ends_the_stream_and_counts_timeout(
    hang: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    """Cut at idle_chunk into the stall, however long the headers took within their limit."""
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=10, idle_chunk=0.2))
    started = time.monotonic()
    headers = {"X-Fake": hang}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert await r.content.readline() == b"event: ping\n"
        with pytest.raises(aiohttp.ClientPayloadError):
            await r.read()
    assert time.monotonic() - started < 2.5  # cut ~0.2 s into the 5 s stall
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 1


async def test_stream_longer_than_idle_chunk_with_shorter_gaps_completes_intact(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=5, idle_chunk=0.3))
    started = time.monotonic()
    async with client.post(
        server.make_url("/v1/messages"), data=b"{}", headers={"X-Fake": "sse:8:100"}
    ) as response:
        raw = await response.read()
    assert time.monotonic() - started > 0.6  # the whole stream outlasted idle_chunk twice over
    assert len([line for line in raw.split(b"\n") if line.startswith(b"data: ")]) == 10
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 0


async def test_hundred_concurrent_streams_all_complete_intact(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()

    async def stream(tag: int) -> bytes:
        url = server.make_url(f"/v1/messages?tag={tag}")
        headers = {"X-Fake": "sse:3:20"}
        async with client.post(url, data=dumps(ANTHROPIC), headers=headers) as response:
            assert response.status == 200
            return await response.read()

    connector = client.connector
    assert connector is not None
    results = await asyncio.wait_for(
        asyncio.gather(*(stream(tag) for tag in range(100))), timeout=30
    )
    for tag, raw in enumerate(results):
        events = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
        assert len(events) == 5
        assert all(json.loads(e[6:])["tag"] == str(tag) for e in events[1:4])
    snapshot = await stats_of(client, server, total_is(100))
    assert snapshot["requests"]["total"] == 100
    assert snapshot["requests"]["active_streams"] == 0
    assert snapshot["components"]["toolschema"]["applied"] == 100
    assert snapshot["memo"]["hits"] == 99


# --- admin endpoints, stats, logs ----------------------------------------------------------


async def test_stats_count_proxied_requests_only_and_components_always_add_up(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(max_body_bytes=4096)
    for path in ("/healthz", "/readyz", "/stats", "/metrics", "/dashboard"):
        async with client.get(server.make_url(path)) as response:
            assert response.status == 200, path
    batch: list[tuple[str, bytes, dict[str, str]]] = [
        ("/v1/messages", dumps(ANTHROPIC), {}),
        ("/v1/messages", b'{"messages": []}', {}),
        ("/v1/messages", b"not json", {}),
        ("/v1/messages", dumps({**ANTHROPIC, "system": "z" * 5000}), {}),
        ("/v1/messages", b"{}", {"X-Fake": "status:429"}),
        ("/v1/messages", dumps(ANTHROPIC), {"X-Fake": "sse:2:1"}),
    ]
    for path, body, headers in batch:
        async with client.post(server.make_url(path), data=body, headers=headers) as response:
            await response.read()
    async with client.get(server.make_url("/v1/models")) as response:
        await response.read()
    snapshot = await stats_of(client, server, total_is(7))
    assert snapshot["requests"]["total"] == 7
    assert snapshot["requests"]["by_upstream"] == {"anthropic": 6, "openai": 1}
    assert snapshot["requests"]["by_status"]["2xx"] == 6
    assert snapshot["requests"]["by_status"]["4xx"] == 1
    assert_components_agree(snapshot)
    timings = snapshot["timings"]
    assert timings["proxy_overhead_seconds"]["count"] == 7
    assert timings["upstream_ttfb_seconds"]["count"] == 7
    reasons = snapshot["components"]["toolschema"]["skip_reasons"]
    assert reasons == {"no_body": 1, "no_tools": 2, "not_json": 1, "too_large": 1}
    assert snapshot["components"]["toolschema"]["applied"] == 2

    async with client.get(server.make_url("/metrics")) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    assert "toolslim_requests_total" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("toolslim_component_runs_total{")]
    runs = {ln.split('outcome="')[1].split('"')[0]: float(ln.split()[-1]) for ln in lines}
    assert runs == {"applied": 2.0, "skipped": 5.0, "error": 0.0}


async def test_a_response_is_counted_before_any_request_its_client_sends_next(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    """Exchanges are counted together after the loop's turn they end in, never later than
    the next thing a client can ask: /stats right after a response already shows it."""
    server = await proxy()
    for count in range(1, 6):
        async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as reply:
            await reply.read()
        assert (await stats_of(client, server))["requests"]["total"] == count

    async def one(headers: dict[str, str]) -> None:
        async with client.post(
            server.make_url("/v1/messages"), data=dumps(ANTHROPIC), headers=headers
        ) as reply:
            await reply.read()

    await asyncio.gather(*(one({"X-Fake": "sse:2:1"} if i % 2 else {}) for i in range(20)))
    snapshot = await stats_of(client, server)
    assert snapshot["requests"]["total"] == 25
    assert snapshot["timings"]["proxy_overhead_seconds"]["count"] == 25
    assert snapshot["usage"]["responses_with_usage"] + snapshot["usage"]["usage_unavailable"] == 25


def test_an_exchange_that_fails_to_be_counted_costs_the_rest_of_its_batch_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    counted: list[str] = []

    def count(forwarding: Any, exchange: Any) -> None:
        if exchange.path == "/bad":
            raise RuntimeError("a bug")
        counted.append(exchange.path)

    monkeypatch.setattr(app_module, "_count", count)
    batch = [types.SimpleNamespace(method="POST", path=p) for p in ("/a", "/bad", "/c")]
    forwarding = types.SimpleNamespace(finished=batch)
    app_module._count_finished(forwarding)  # a stand-in: only .finished is read
    assert counted == ["/a", "/c"] and forwarding.finished == []
    assert "toolslim failed to count POST /bad" in caplog.text


async def test_admin_token_guards_stats_and_metrics_but_not_the_api_or_the_dashboard_files(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(admin_token=TOKEN)
    for path in ("/stats", "/metrics"):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            async with client.get(server.make_url(path), headers=headers) as response:
                assert response.status == 401, (path, headers)
                assert response.headers["WWW-Authenticate"].startswith("Bearer")
        good = {"Authorization": f"Bearer {TOKEN}"}
        async with client.get(server.make_url(path), headers=good) as response:
            assert response.status == 200
    for path in ("/dashboard", "/dashboard/app.js", "/dashboard/style.css"):
        async with client.get(server.make_url(path)) as response:
            assert response.status == 200, path
            assert "default-src 'self'" in response.headers["Content-Security-Policy"]
            assert TOKEN.encode() not in await response.read()
    for path in ("/dashboard/nope.js", "/dashboard/.hidden", "/dashboard/%2e%2e%2fapp.py"):
        async with client.get(raw_url(server, path)) as response:
            assert response.status == 404, path
    async with client.get(raw_url(server, "/dashboard/../app.py")) as response:
        assert b"make_app" not in await response.read()
    headers = {"Authorization": "Bearer sk-client-own-key"}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.status == 200
    assert upstream.received[-1].headers["Authorization"] == "Bearer sk-client-own-key"


async def test_healthz_and_readyz_and_readyz_turns_503_on_shutdown(
    proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    async with client.get(server.make_url("/healthz")) as response:
        assert (response.status, await response.json()) == (200, {"status": "alive"})
    async with client.get(server.make_url("/readyz")) as response:
        assert response.status == 200
    assert server.app is not None
    await server.app.shutdown()
    async with client.get(server.make_url("/readyz")) as response:
        assert response.status == 503
    async with client.get(server.make_url("/healthz")) as response:
        assert response.status == 200


@pytest.fixture
def app_lines(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The request lines logged so far, with toolslim's loggers at info."""
    caplog.set_level(logging.INFO, logger="toolslim")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "toolslim.app"]


async def test_one_log_line_per_request_without_credentials_or_bodies(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    app_lines: Callable[[], list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await proxy()
    headers = {"x-api-key": KEY, "Authorization": f"Bearer {KEY}"}
    url = server.make_url(f"/v1/messages?key={KEY}")
    async with client.post(url, data=dumps(ANTHROPIC), headers=headers) as response:
        await response.read()
    await stats_of(client, server, total_is(1))
    [line] = app_lines()
    assert line.startswith("POST /v1/messages upstream=anthropic api=anthropic status=200")
    assert "toolschema=applied/-" in line and "overhead_ms=" in line
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY not in everything and "read README.md" not in everything


async def test_each_log_line_says_what_the_pipeline_did_to_its_own_request(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    app_lines: Callable[[], list[str]],
) -> None:
    """A session's memo hits share one summary; a request in between gets its own."""
    server = await proxy()
    url = server.make_url("/v1/messages")
    bodies = [dumps(ANTHROPIC), b"not json", dumps(ANTHROPIC), dumps(ANTHROPIC), b""]
    for count, body in enumerate(bodies, start=1):
        async with client.post(url, data=body) as response:
            await response.read()
        await stats_of(client, server, total_is(count))
    said = [line.split(" pipeline=")[1].split()[0] for line in app_lines()]
    applied = said[0]
    assert applied.startswith("toolschema=applied/-") and applied.endswith("B")
    assert said == [
        applied,
        "toolschema=skipped/not_json",
        applied,
        applied,
        "toolschema=skipped/no_body",
    ]


async def test_capture_is_off_by_default(proxy: Proxy) -> None:
    server = await proxy()
    assert server.app is not None and server.app[FORWARDING].capture is None
    assert server.app[FORWARDING].stats.requests == 0


async def test_capture_records_each_request_redacted_and_both_bodies(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    server = await proxy(capture_dir=str(tmp_path))
    body = dumps(ANTHROPIC)
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    url = raw_url(server, f"/v1beta/models/m:generateContent?key={KEY}&alt=sse")
    async with client.post(server.make_url("/v1/messages"), data=body, headers=headers) as r:
        await r.read()
    async with client.post(url, data=dumps(GEMINI)) as response:
        await response.read()
    assert server.app is not None
    recorder = server.app[FORWARDING].capture
    assert recorder is not None
    recorder.close()  # flushes the writer thread
    files = list(tmp_path.glob("toolslim-capture-*.jsonl"))
    raw = b"".join(f.read_bytes() for f in files)
    assert KEY.encode() not in raw
    lines = [json.loads(line) for line in raw.splitlines()]
    assert [line["path"] for line in lines] == [
        "/v1/messages",
        "/v1beta/models/m:generateContent",
    ]
    first = lines[0]
    assert first["headers"]["x-api-key"] == "[redacted]"
    assert first["body"] == body.decode()
    assert json.loads(first["forwarded"])["tools"][0]["input_schema"] == COMPACT_SCHEMA
    assert "alt=sse" in lines[1]["query"] and KEY not in lines[1]["query"]


async def test_a_catalogue_seen_again_is_counted_with_the_same_tokens_saved(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    for count in (1, 2, 3):
        async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as r:
            await r.read()
        snapshot = await stats_of(client, server, total_is(count))
        saved = snapshot["components"]["toolschema"]["tokens_saved"]
        if count == 1:
            first = saved
            assert first > 0
        assert saved == first * count
    assert snapshot["memo"] == {"hits": 2, "misses": 1, "size": 1, "capacity": 64}


async def test_a_flood_of_new_catalogues_is_tokenized_within_a_bound_and_the_rest_is_said(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolslim import tokens
    from toolslim.app import MAX_COUNTING

    gate = threading.Event()  # the token counter is stuck until the flood has been sent

    def slow_count(text: bytes | str) -> int:
        gate.wait(10)
        return len(text)

    monkeypatch.setattr(tokens, "count_tokens", slow_count)
    server = await proxy()
    flood = MAX_COUNTING + 6
    for index in range(flood):
        catalogue = [{"name": f"tool_{index}", "description": "d", "input_schema": SCHEMA}]
        body = dumps({**ANTHROPIC, "tools": catalogue})
        async with client.post(server.make_url("/v1/messages"), data=body) as response:
            await response.read()
    snapshot = await stats_of(client, server, lambda s: s["requests"]["total"] >= flood)
    requests = snapshot["requests"]
    assert (requests["tokens_pending"], requests["tokens_skipped"]) == (MAX_COUNTING, 6)
    assert snapshot["components"]["toolschema"]["applied"] == flood  # bytes are all counted
    gate.set()
    snapshot = await stats_of(client, server, total_is(flood))
    assert snapshot["requests"]["tokens_pending"] == 0
    assert snapshot["components"]["toolschema"]["tokens_saved"] > 0


# --- graceful shutdown (a real `serve` process and a real SIGTERM) ---------------------------


async def test_sigterm_stops_accepting_lets_the_stream_in_flight_finish_and_exits_0(
    upstream: FakeUpstream, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    port = closed_port()
    config = tmp_path / "toolslim.yaml"
    config.write_text(
        f"listen: {{host: 127.0.0.1, port: {port}}}\n"
        f"upstreams: {{anthropic: '{upstream.url}/a'}}\n"
        "shutdown_grace: 10\n"
    )
    code = "import sys; from toolslim import app, config; "
    code += "sys.exit(app.serve(config.load_settings(sys.argv[1], {}, {})))"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while True:
            try:
                async with client.get(f"{base}/healthz") as response:
                    if response.status == 200:
                        break
            except aiohttp.ClientConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                await asyncio.sleep(0.05)
        headers = {"X-Fake": "sse:6:200", "x-api-key": KEY}
        async with client.post(f"{base}/v1/messages", data=dumps(ANTHROPIC), headers=headers) as r:
            assert await r.content.readline() == b"event: message_start\n"
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            with pytest.raises(aiohttp.ClientConnectionError):
                async with aiohttp.ClientSession(timeout=TIMEOUT) as fresh:
                    await fresh.get(f"{base}/healthz")
            rest = await r.read()
        assert rest.count(b"event: delta") == 6
        assert rest.endswith(b"\n\n") and b"message_delta" in rest
        returncode = await asyncio.wait_for(asyncio.to_thread(process.wait), 15)
        assert returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
        _, err = process.communicate(timeout=5)
    log = err.decode()
    assert "POST /v1/messages upstream=anthropic api=anthropic status=200" in log
    assert KEY not in log


def test_serving_hides_start_up_objects_from_the_collector_and_collects_young_ones_rarely() -> None:
    """In a child process: the collector settings are process-wide, so tests never change them
    in the test runner itself."""
    code = (
        "import gc\n"
        "from toolslim.app import _tune_gc\n"
        "before = gc.get_threshold()\n"
        "_tune_gc()\n"
        "print(gc.get_freeze_count() > 1000, gc.get_threshold()[0] > before[0],"
        " gc.get_threshold()[1:] == before[1:])\n"
    )
    assert python_output(code).split() == ["True", "True", "True"]
