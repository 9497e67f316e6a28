"""What the shell's end-to-end tests share: a real fake upstream that records what it receives,
the request bodies of each API, and helpers to read /stats."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDictProxy
from yarl import URL

from common import free_port as closed_port  # bench/common.py: a port nothing listens on
from toolslim.config.settings import Settings, load_settings

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


Proxy = Callable[..., Awaitable[TestServer]]


def raw_url(server: TestServer, target: str) -> URL:
    """The URL with its target exactly as written (make_url would normalize %2F to /)."""
    return URL(f"http://127.0.0.1:{server.port}{target}", encoded=True)


def settings_for(base: str, **changes: Any) -> Settings:
    """Every upstream on `base`, told apart by a base path (/a, /o, /g), plus `changes`."""
    upstreams = {"anthropic": f"{base}/a", "openai": f"{base}/o", "gemini": f"{base}/g"}
    settings = load_settings(None, {"upstreams": upstreams}, {})
    return dataclasses.replace(settings, **changes)


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


SERVE = (
    "import sys; from toolslim.config import settings; from toolslim.serve import serving; "
    "sys.exit(serving.serve(settings.load_settings(sys.argv[1], {}, {})))"
)


def serve_process(folder: Path, yaml: str) -> tuple[subprocess.Popen[bytes], str]:
    """`toolslim serve` in a child process on a free port, with `yaml` after its listen
    section; the process and its base URL."""
    port = closed_port()
    config = folder / "toolslim.yaml"
    config.write_text(f"listen: {{host: 127.0.0.1, port: {port}}}\n{yaml}")
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return process, f"http://127.0.0.1:{port}"


async def wait_healthy(
    client: aiohttp.ClientSession, base: str, process: subprocess.Popen[bytes]
) -> None:
    """Until the child answers /healthz (15 s at most, and not once it has exited)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            async with client.get(f"{base}/healthz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise
            await asyncio.sleep(0.05)


def stop_process(process: subprocess.Popen[bytes]) -> str:
    """Kill the child if it still runs; what it wrote to stderr."""
    if process.poll() is None:
        process.kill()
        process.wait(5)
    _, err = process.communicate(timeout=5)
    return err.decode()


async def raw_exchange(port: int, request: bytes) -> bytes:
    """The whole answer (until the server closes, at most 10 s) to these exact request bytes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def raw_post(body: bytes = b"", extra: bytes = b"", close: bool = True) -> bytes:
    """The bytes of a POST /v1/messages with this body and `extra` header lines."""
    head = b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nx-api-key: " + KEY.encode() + b"\r\n"
    tail = b"Connection: close\r\n" if close else b""
    return head + extra + b"Content-Length: %d\r\n" % len(body) + tail + b"\r\n" + body
