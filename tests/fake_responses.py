"""A fake OpenAI Responses upstream for client tests: the WebSocket on GET /v1/responses and
SSE on POST /v1/responses answer with the same events, and everything received is recorded.

Built for the real Codex CLI (docs/clients.md says what it sends and needs); runnable on its
own: `python -m tests.fake_responses --port N [--refuse-upgrade STATUS] [--record FILE]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import itertools
import json
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from aiohttp import WSMsgType, web

Transport = Literal["websocket", "http"]
Kind = Literal["upgrade", "message", "post", "other"]
JSON = Any

TEXT: Final = "Hello from the fake upstream."
MODELS: Final = ("gpt-fake",)  # what GET /v1/models lists


@dataclass(frozen=True, slots=True)
class Received:
    """One thing the fake got: an upgrade request, a WebSocket message, a POST or any other
    request. `raw` holds the exact bytes (a message's payload after permessage-deflate, a
    request's body); `body` is them parsed as JSON, or None when they are not JSON."""

    kind: Kind
    transport: Transport
    method: str
    path: str
    headers: dict[str, str]  # method, path, headers: of the HTTP request (or message's upgrade)
    status: int  # the fake's answer: 101 for an accepted upgrade, 0 for a message
    raw: bytes
    body: JSON

    def to_json(self) -> dict[str, JSON]:
        """A JSON Lines record; `raw` in base64 so every byte survives."""
        return {
            "kind": self.kind,
            "transport": self.transport,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "status": self.status,
            "raw": base64.b64encode(self.raw).decode(),
            "body": self.body,
        }

    @classmethod
    def from_json(cls, record: dict[str, JSON]) -> Received:
        return cls(
            record["kind"],
            record["transport"],
            record["method"],
            record["path"],
            record["headers"],
            record["status"],
            base64.b64decode(record["raw"]),
            record["body"],
        )


@dataclass(slots=True)
class Recording:
    """Everything received, in arrival order; `sink` (if set) sees each record as it comes,
    so a process outside can read them while the fake still runs."""

    received: list[Received] = field(default_factory=list)
    sink: Callable[[Received], None] | None = None

    def add(self, item: Received) -> None:
        self.received.append(item)
        if self.sink is not None:
            self.sink(item)

    def creates(self, transport: Transport | None = None) -> list[Received]:
        """The `response.create` requests (WebSocket messages and POST bodies alike)."""
        return [r for r in self.received if is_create(r) and transport in (None, r.transport)]

    def upgrades(self) -> list[Received]:
        return [r for r in self.received if r.kind == "upgrade"]


def is_create(item: Received) -> bool:
    """A request for a response: a `response.create` message, or any JSON POST body."""
    if item.kind == "post":
        return isinstance(item.body, dict)
    return (
        item.kind == "message"
        and isinstance(item.body, dict)
        and (item.body.get("type") == "response.create")
    )


def generates(body: JSON) -> bool:
    """Whether a request asks for output; `generate: false` only warms up the connection."""
    return not (isinstance(body, dict) and body.get("generate") is False)


def read_recording(path: Path) -> Recording:
    """A recording written as JSON Lines by `--record FILE`."""
    lines = path.read_text().splitlines() if path.exists() else []
    return Recording([Received.from_json(json.loads(line)) for line in lines if line])


@dataclass(frozen=True, slots=True)
class Options:
    """How the fake behaves. `refuse_upgrade` answers every WebSocket upgrade with that
    status instead of 101; `compress` accepts permessage-deflate when a client offers it;
    `text` is the assistant's reply, sent in `chunks` deltas; `calls` (`function_call` or
    `custom_tool_call` output items) answer the first requests that generate, one each in
    order, instead of the text, so a client runs each tool and asks again with its output."""

    refuse_upgrade: int | None = None
    compress: bool = True
    text: str = TEXT
    chunks: int = 3
    input_tokens: int = 1200
    cached_tokens: int = 1024
    output_tokens: int = 7
    calls: tuple[JSON, ...] = ()


RECORDING: Final = web.AppKey("recording", Recording)
OPTIONS: Final = web.AppKey("options", Options)


def make_fake_responses(
    options: Options | None = None, recording: Recording | None = None
) -> web.Application:
    """The fake upstream; the test reads `app[RECORDING]` (or passes its own `recording`)."""
    app = web.Application()
    app[OPTIONS] = options or Options()
    app[RECORDING] = recording if recording is not None else Recording()
    app.router.add_get("/v1/responses", _websocket)
    app.router.add_post("/v1/responses", _post)
    app.router.add_get("/v1/models", _models)
    app.router.add_route("*", "/{tail:.*}", _other)
    return app


def events(
    body: JSON, options: Options, serial: int, call: JSON = None
) -> Iterator[dict[str, JSON]]:
    """The events answering one request, in order, without `sequence_number` (the
    transport numbers them from 0 for each response).

    A warm-up (`generate: false`) gets a response with no output; a request given a `call`
    (an output item, see `call_for`) gets that item; any other request gets one assistant
    message streamed as text deltas."""
    model = body.get("model", MODELS[0]) if isinstance(body, dict) else MODELS[0]
    response_id = f"resp_fake{serial:04d}"
    shell: dict[str, JSON] = {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000 + serial,
        "model": model,
        "status": "in_progress",
        "output": [],
        "usage": None,
    }
    yield {"type": "response.created", "response": shell}
    output: list[JSON] = []
    if generates(body) and call is not None:
        call = {**call, "id": f"fc_fake{serial:04d}", "call_id": f"call_fake{serial:04d}"}
        added = {**call, "status": "in_progress"}
        yield {"type": "response.output_item.added", "output_index": 0, "item": added}
        done = {**call, "status": "completed"}
        yield {"type": "response.output_item.done", "output_index": 0, "item": done}
        output.append(done)
    elif generates(body):
        item_id = f"msg_fake{serial:04d}"
        message = {"id": item_id, "type": "message", "role": "assistant"}
        yield {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "status": "in_progress", "content": []},
        }
        empty = {"type": "output_text", "text": "", "annotations": []}
        position = {"item_id": item_id, "output_index": 0, "content_index": 0}
        yield {"type": "response.content_part.added", **position, "part": empty}
        for delta in _split(options.text, options.chunks):
            yield {"type": "response.output_text.delta", **position, "delta": delta}
        part = {**empty, "text": options.text}
        yield {"type": "response.output_text.done", **position, "text": options.text}
        yield {"type": "response.content_part.done", **position, "part": part}
        done = {**message, "status": "completed", "content": [part]}
        yield {"type": "response.output_item.done", "output_index": 0, "item": done}
        output.append(done)
    output_tokens = options.output_tokens if output else 0
    usage = {
        "input_tokens": options.input_tokens,
        "input_tokens_details": {"cached_tokens": options.cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": options.input_tokens + output_tokens,
    }
    completed = {**shell, "status": "completed", "output": output, "usage": usage}
    yield {"type": "response.completed", "response": completed}


def call_for(options: Options, recording: Recording) -> JSON:
    """The call answering the request recorded last: the n-th request that generates gets
    `options.calls[n]`, if there is one."""
    asked = sum(1 for item in recording.creates() if generates(item.body))
    return options.calls[asked - 1] if 0 < asked <= len(options.calls) else None


def _split(text: str, chunks: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)]


_serials = itertools.count(1)  # response ids stay unique across apps in one process


def _received(
    request: web.Request, kind: Kind, transport: Transport, raw: bytes, status: int
) -> Received:
    headers = {name.lower(): value for name, value in request.headers.items()}
    return Received(
        kind, transport, request.method, request.path_qs, headers, status, raw, _json(raw)
    )


def _json(raw: bytes) -> JSON:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


async def _websocket(request: web.Request) -> web.StreamResponse:
    options, recording = request.app[OPTIONS], request.app[RECORDING]
    ws = web.WebSocketResponse(compress=options.compress, max_msg_size=64 * 1024 * 1024)
    refusal: web.Response | None = None
    if not ws.can_prepare(request).ok:
        refusal = web.json_response(
            _error("GET /v1/responses needs a WebSocket upgrade"), status=405
        )
    elif options.refuse_upgrade is not None:
        message = f"the fake refuses WebSocket upgrades ({options.refuse_upgrade})"
        refusal = web.json_response(_error(message), status=options.refuse_upgrade)
    upgrade = _received(request, "upgrade", "websocket", b"", refusal.status if refusal else 101)
    recording.add(upgrade)
    if refusal is not None:
        return refusal
    await ws.prepare(request)
    with contextlib.suppress(ConnectionResetError):  # a client may leave mid-response
        await _converse(ws, upgrade, options, recording)
    return ws


async def _converse(
    ws: web.WebSocketResponse, upgrade: Received, options: Options, recording: Recording
) -> None:
    async for message in ws:
        if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            break
        raw = message.data.encode() if message.type == WSMsgType.TEXT else message.data
        item = dataclasses.replace(upgrade, kind="message", status=0, raw=raw, body=_json(raw))
        recording.add(item)
        if not is_create(item):
            error = {"type": "error", "status": 400, **_error("the fake answers response.create")}
            await ws.send_json(error)
            continue
        answer = events(item.body, options, next(_serials), call_for(options, recording))
        for number, event in enumerate(answer):
            await ws.send_str(json.dumps({**event, "sequence_number": number}))


async def _post(request: web.Request) -> web.StreamResponse:
    options, recording = request.app[OPTIONS], request.app[RECORDING]
    raw = await request.read()
    status = 200 if isinstance(_json(raw), dict) else 400
    item = _received(request, "post", "http", raw, status)
    recording.add(item)
    if status != 200:
        return web.json_response(_error("the body must be a JSON object"), status=status)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    with contextlib.suppress(ConnectionResetError):  # a client may leave mid-stream
        answer = events(item.body, options, next(_serials), call_for(options, recording))
        for number, event in enumerate(answer):
            data = json.dumps({**event, "sequence_number": number})
            await response.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
        await response.write_eof()
    return response


async def _models(request: web.Request) -> web.Response:
    request.app[RECORDING].add(_received(request, "other", "http", await request.read(), 200))
    data = [{"id": name, "object": "model", "owned_by": "fake"} for name in MODELS]
    return web.json_response({"object": "list", "data": data})


async def _other(request: web.Request) -> web.Response:
    request.app[RECORDING].add(_received(request, "other", "http", await request.read(), 404))
    return web.json_response(_error(f"the fake has no {request.path}"), status=404)


def _error(message: str) -> dict[str, JSON]:
    return {"error": {"type": "invalid_request_error", "message": message}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fake_responses")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="0 picks a free one")
    parser.add_argument("--refuse-upgrade", type=int, metavar="STATUS")
    parser.add_argument("--no-compress", action="store_true", help="refuse permessage-deflate")
    parser.add_argument("--record", type=Path, metavar="FILE", help="append JSON Lines here")
    parser.add_argument("--ready", type=Path, metavar="FILE", help="gets the port once listening")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        recording = Recording()
        if args.record is not None:
            out = stack.enter_context(args.record.open("a", buffering=1))
            recording.sink = lambda item: out.write(json.dumps(item.to_json()) + "\n")
        app = make_fake_responses(
            Options(refuse_upgrade=args.refuse_upgrade, compress=not args.no_compress), recording
        )
        return asyncio.run(_serve(app, args.host, args.port, args.ready))


async def _serve(app: web.Application, host: str, port: int, ready: Path | None) -> int:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    if ready is not None:
        ready.write_text(f"{runner.addresses[0][1]}\n")
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
