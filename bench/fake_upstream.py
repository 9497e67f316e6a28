"""A fast fake Anthropic upstream for the proxy benches: raw asyncio HTTP/1.1 on 127.0.0.1.

`POST /v1/messages*` reads the whole Content-Length body and answers a JSON message with usage,
or, when the body asks for `"stream": true` (found by byte search, never parsed), an SSE stream:
message_start, content_block_start, K content_block_delta, content_block_stop, message_delta
(with usage), message_stop, one write per event, chunked. Keep-alive; pipelining works.

Control (call it directly, not through a proxy): `GET /_bench/stats` (requests, bytes,
streams so far), `GET /_bench/last_body` (the last body received, as received),
`GET /_bench/reset`. Run: `python bench/fake_upstream.py --port 18080 [--events 5]`; it prints
`listening on 127.0.0.1:PORT` once it accepts connections (`--port 0` picks a free port).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json

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


class Counters:
    """What the upstream received, for the benches to check and count."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.streams = 0
        self.last_body = b""

    def snapshot(self) -> bytes:
        return json.dumps(
            {"requests": self.requests, "bytes": self.bytes, "streams": self.streams}
        ).encode()


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
            reply, kind = b"", "application/json"
            if path == "/_bench/stats":
                reply = counters.snapshot()
            elif path == "/_bench/last_body":
                reply, kind = counters.last_body, "application/octet-stream"
            elif path == "/_bench/reset":
                counters.reset()
                reply = counters.snapshot()
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


async def serve(port: int, deltas: int) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--events", type=int, default=5, help="content_block_delta events")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.events))


if __name__ == "__main__":
    main()
