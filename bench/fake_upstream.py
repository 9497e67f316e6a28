"""The one fake upstream of every bench, on 127.0.0.1, in one of three modes:

- `messages` (the default): a fast Anthropic upstream, raw asyncio HTTP/1.1. `POST
  /v1/messages*` reads the whole Content-Length body and answers a JSON message with usage, or,
  when the body asks for `"stream": true` (found by byte search, never parsed), an SSE stream:
  message_start, content_block_start, K content_block_delta, content_block_stop, message_delta
  (with usage), message_stop, one write per event, chunked. Keep-alive; pipelining works.
- `responses`: an OpenAI Responses upstream (aiohttp) that answers each `response.create` on a
  WebSocket at GET /v1/responses, and each POST /v1/responses as SSE, with the same events:
  `response.created`, K `response.output_text.delta`, `response.completed` with usage.
- `bomb`: any request, any body (read in chunks, chunked or not) answered with a small JSON
  message with usage; with `X-Bomb: 1`, 1 GiB of spaces gzipped to about 1 MB instead.

Control (call it directly, not through a proxy): `GET /_bench/stats` (requests, streams,
WebSocket messages and bytes so far), `GET /_bench/last_body` and `/_bench/last_message` (the
last POST body and WebSocket message received, as received), `GET /_bench/reset`. Run:
`python bench/fake_upstream.py [--mode messages] [--port 18080] [--events 5]`; it prints
`listening on 127.0.0.1:PORT` once it accepts connections (`--port 0` picks a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import WSMsgType, web

HEAD_LIMIT = 64 * 1024
STREAM_KEY = b'"stream"'
MESSAGE_ID = "msg_01BenchFakeUpstream0000"


def message_reply() -> bytes:
    """The non-stream answer: an Anthropic message with usage."""
    message = {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Done: the parser test passes now. " * 8}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 1200,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 18000,
            "output_tokens": 80,
        },
    }
    return json.dumps(message, separators=(",", ":")).encode()


def sse_events(deltas: int) -> list[bytes]:
    """The stream answer, one `event:`/`data:` block per element."""
    start = {
        "type": "message_start",
        "message": {
            "id": MESSAGE_ID,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 1200,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 18000,
                "output_tokens": 1,
            },
        },
    }
    events = [
        ("message_start", start),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
    ]
    for index in range(deltas):
        delta = {"type": "text_delta", "text": f"chunk {index}: the parser test passes now. "}
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": delta},
            )
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 80},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        for name, data in events
    ]


def sse_reply(deltas: int) -> bytes:
    """The stream answer's bytes as a client sees them after de-chunking."""
    return b"".join(sse_events(deltas))


def wants_stream(body: bytes) -> bool:
    """Whether the body has a `"stream": true` member, by byte search (no JSON parse).

    Inside a JSON string a quote is escaped, so an unescaped `"stream"` followed by `:` is a
    key. The top-level key comes last in the bodies the benches send, hence rfind.
    """
    end = len(body)
    while (at := body.rfind(STREAM_KEY, 0, end)) >= 0:
        rest = body[at + len(STREAM_KEY) : at + len(STREAM_KEY) + 16].lstrip()
        if rest.startswith(b":"):
            return rest[1:].lstrip().startswith(b"true")
        end = at
    return False


@dataclass
class Counters:
    """What the upstream received, for the benches to check and count."""

    requests: int = 0  # POSTs answered
    streams: int = 0  # of them answered as a stream
    messages: int = 0  # response.create messages over WebSockets
    bytes: int = 0  # request bytes of both
    last_body: bytes = b""
    last_message: bytes = b""

    def reset(self) -> None:
        for name, value in vars(Counters()).items():
            setattr(self, name, value)

    def snapshot(self) -> bytes:
        numbers = ("requests", "streams", "messages", "bytes")
        return json.dumps({name: getattr(self, name) for name in numbers}).encode()

    def control(self, name: str) -> tuple[bytes, str]:
        """The answer to GET /_bench/<name>, and its content type."""
        if name in ("last_body", "last_message"):
            raw: bytes = getattr(self, name)
            return raw, "application/octet-stream"
        if name == "reset":
            self.reset()
        return self.snapshot(), "application/json"


def _head(status: str, content_type: str, length: int, close: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {status}",
        f"Content-Type: {content_type}",
        f"Content-Length: {length}",
        "request-id: req_bench",
    ]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Upstream(asyncio.Protocol):
    """One connection: parse a request head, collect its body, answer, repeat."""

    def __init__(self, counters: Counters, json_body: bytes, sse_chunks: list[bytes]) -> None:
        self.counters = counters
        self.json_body = json_body
        self.sse_chunks = sse_chunks
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()
        self.parts: list[bytes] = []  # body chunks while one is being read
        self.have = 0
        self.need = -1  # body bytes still expected; -1 while reading a head
        self.method = ""
        self.target = ""
        self.close = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        while data and self.transport is not None:
            if self.need < 0:
                data = self._read_head(data)
                continue
            take = self.need - self.have
            if len(data) < take:
                self.parts.append(data)
                self.have += len(data)
                return
            self.parts.append(data[:take])
            data = data[take:]
            body = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
            self.parts, self.have, self.need = [], 0, -1
            self._answer(body)

    def _read_head(self, data: bytes) -> bytes:
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            if len(self.head) > HEAD_LIMIT:
                self._fail("431 Request Header Fields Too Large")
            return b""
        lines = bytes(self.head[:end]).decode("latin-1").split("\r\n")
        rest = bytes(self.head[end + 4 :])
        self.head.clear()
        parts = lines[0].split(" ")
        if len(parts) != 3:
            self._fail("400 Bad Request")
            return b""
        self.method, self.target = parts[0], parts[1]
        length, self.close = 0, parts[2] == "HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                self._fail("411 Length Required")  # the proxies under test send lengths
                return b""
            elif name == "connection":
                self.close = value.lower() == "close"
            elif name == "expect" and value.lower() == "100-continue":
                assert self.transport is not None
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.need = length
        if length == 0:
            self.need = -1
            self._answer(b"")
        return rest

    def _fail(self, status: str) -> None:
        assert self.transport is not None
        self.transport.write(_head(status, "text/plain", 0, True))
        self.transport.close()
        self.transport = None

    def _answer(self, body: bytes) -> None:
        transport = self.transport
        assert transport is not None
        path = self.target.partition("?")[0]
        counters = self.counters
        if path.startswith("/_bench/"):
            reply, kind = counters.control(path.removeprefix("/_bench/"))
            transport.write(_head("200 OK", kind, len(reply), self.close) + reply)
        elif self.method == "POST" and path.startswith("/v1/messages"):
            counters.requests += 1
            counters.bytes += len(body)
            counters.last_body = body
            if wants_stream(body):
                counters.streams += 1
                head = (
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                    "Cache-Control: no-cache\r\nrequest-id: req_bench\r\n"
                    "Transfer-Encoding: chunked\r\n"
                )
                transport.write((head + ("Connection: close\r\n" if self.close else "")).encode())
                transport.write(b"\r\n")
                for chunk in self.sse_chunks:  # one write per event, as a real stream arrives
                    if transport.is_closing():  # the client left (a load run that ended)
                        break
                    transport.write(chunk)
                else:
                    transport.write(b"0\r\n\r\n")
            else:
                reply = self.json_body
                transport.write(_head("200 OK", "application/json", len(reply), self.close) + reply)
        else:
            reply = b'{"type":"error","error":{"type":"not_found_error","message":"not found"}}'
            transport.write(_head("404 Not Found", "application/json", len(reply), self.close))
            transport.write(reply)
        if self.close:
            transport.close()
            self.transport = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve_messages(port: int, deltas: int) -> None:
    counters = Counters()
    json_body = message_reply()
    sse_chunks = [b"%x\r\n%b\r\n" % (len(event), event) for event in sse_events(deltas)]
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Upstream(counters, json_body, sse_chunks), "127.0.0.1", port, backlog=1024
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on 127.0.0.1:{bound}", flush=True)
    async with server:
        await server.serve_forever()


# --- the aiohttp modes: Responses over WebSocket and HTTP; the gzip bomb ----------------------

COUNTERS = web.AppKey("counters", Counters)
FRAMES = web.AppKey("frames", list)
BOMB_BYTES = 1 << 30


def responses_events(deltas: int) -> list[bytes]:
    """One Responses answer's events, compact JSON, `type` first as the API sends them."""
    shell = {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": "gpt-5-codex",
        "status": "in_progress",
        "output": [],
        "usage": None,
    }
    out: list[dict[str, Any]] = [{"type": "response.created", "response": shell}]
    position = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    out += [{"type": "response.output_text.delta", **position, "delta": "word "}] * deltas
    usage = {
        "input_tokens": 19_000,
        "input_tokens_details": {"cached_tokens": 18_000},
        "output_tokens": deltas,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 19_000 + deltas,
    }
    text = {"type": "output_text", "text": "word " * deltas, "annotations": []}
    item = {"id": "msg_bench", "type": "message", "role": "assistant", "status": "completed"}
    done = {**shell, "status": "completed", "output": [{**item, "content": [text]}]}
    out.append({"type": "response.completed", "response": {**done, "usage": usage}})
    return [orjson.dumps({**event, "sequence_number": n}) for n, event in enumerate(out)]


def as_sse(frames: list[bytes]) -> list[bytes]:
    """The same events as an HTTP stream's SSE events, one chunk each."""
    return [b"event: %s\ndata: %s\n\n" % (orjson.loads(f)["type"].encode(), f) for f in frames]


async def responses_websocket(request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=0, decode_text=False)
    await ws.prepare(request)
    counters, frames = request.app[COUNTERS], request.app[FRAMES]
    async for msg in ws:
        if msg.type is not WSMsgType.TEXT:
            break
        counters.messages += 1
        counters.bytes += len(msg.data)
        counters.last_message = msg.data
        for frame in frames:
            await ws.send_frame(frame, WSMsgType.TEXT)
    return ws


async def responses_post(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    counters = request.app[COUNTERS]
    counters.requests += 1
    counters.streams += 1
    counters.bytes += len(body)
    counters.last_body = body
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for chunk in as_sse(request.app[FRAMES]):
        await response.write(chunk)
    await response.write_eof()
    return response


async def control(request: web.Request) -> web.Response:
    reply, kind = request.app[COUNTERS].control(request.match_info["name"])
    return web.Response(body=reply, content_type=kind)


def responses_app(deltas: int) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[COUNTERS], app[FRAMES] = Counters(), responses_events(deltas)
    app.router.add_get("/v1/responses", responses_websocket)
    app.router.add_post("/v1/responses", responses_post)
    app.router.add_get("/_bench/{name}", control)
    return app


def bomb_app() -> web.Application:
    """JSON answers with usage; `X-Bomb: 1` answers 1 GiB of spaces, gzipped (built once)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1 << 20)
    bomb = b"".join(packer.compress(block) for _ in range(BOMB_BYTES // len(block)))
    bomb += packer.flush()
    answer = json.dumps(
        {"id": "msg_1", "type": "message", "usage": {"input_tokens": 10, "output_tokens": 2}}
    ).encode()

    async def handle(request: web.Request) -> web.StreamResponse:
        counters = request.app[COUNTERS]
        async for chunk in request.content.iter_chunked(1 << 16):
            counters.bytes += len(chunk)
        counters.requests += 1
        if request.headers.get("X-Bomb"):
            headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
            return web.Response(body=bomb, headers=headers)
        return web.Response(body=answer, content_type="application/json")

    app = web.Application(handler_args={"auto_decompress": False}, client_max_size=1 << 31)
    app[COUNTERS] = Counters()
    app.router.add_get("/_bench/{name}", control)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def serve_app(app: web.Application, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    print(f"listening on 127.0.0.1:{runner.addresses[0][1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("messages", "responses", "bomb"), default="messages")
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--events", type=int, default=5, help="delta events per stream answer")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        if args.mode == "messages":
            asyncio.run(serve_messages(args.port, args.events))
        elif args.mode == "responses":
            asyncio.run(serve_app(responses_app(args.events), args.port))
        else:
            asyncio.run(serve_app(bomb_app(), args.port))


if __name__ == "__main__":
    main()
