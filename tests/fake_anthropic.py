"""A fake Anthropic Messages upstream for client tests: `POST /v1/messages` answers in SSE (or
one JSON message when the request does not stream), `HEAD /` (Claude Code's connectivity check)
and `count_tokens` answer too, and everything received is recorded as fake_responses does.

`Options.call` (a tool name and its input) answers each request that offers that tool and
holds no tool result yet with one `tool_use` block; every other request gets a short text.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from tests.fake_responses import Received, Recording

JSON = Any
TEXT: Final = "Done, said the fake upstream."


@dataclass(frozen=True, slots=True)
class Options:
    call: tuple[str, dict[str, JSON]] | None = None
    input_tokens: int = 900
    cache_read_input_tokens: int = 2000
    output_tokens: int = 9


RECORDING: Final = web.AppKey("recording", Recording)
OPTIONS: Final = web.AppKey("options", Options)
_serials = itertools.count(1)


def make_fake_anthropic(
    options: Options | None = None, recording: Recording | None = None
) -> web.Application:
    """The fake upstream; what it got is `app[RECORDING]` (or the `recording` passed)."""
    app = web.Application()
    app[OPTIONS] = options or Options()
    app[RECORDING] = recording if recording is not None else Recording()
    app.router.add_post("/v1/messages", _messages)
    app.router.add_post("/v1/messages/count_tokens", _count_tokens)
    app.router.add_route("*", "/{tail:.*}", _other)
    return app


def calls_tool(body: JSON, options: Options) -> bool:
    """Whether a request is answered with `options.call`: it offers that tool, and its last
    message holds no tool result (the call was not made yet)."""
    if options.call is None or not isinstance(body, dict):
        return False
    names = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    answered = isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )
    return options.call[0] in names and not answered


def events(body: JSON, options: Options, serial: int) -> Iterator[tuple[str, dict[str, JSON]]]:
    """The (event, data) pairs of one streamed answer."""
    model = body.get("model", "claude-fake") if isinstance(body, dict) else "claude-fake"
    usage = {
        "input_tokens": options.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": options.cache_read_input_tokens,
        "output_tokens": 1,
    }
    message = {
        "id": f"msg_fake{serial:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield "message_start", {"type": "message_start", "message": message}
    if calls_tool(body, options):
        assert options.call is not None
        name, arguments = options.call
        block = {"type": "tool_use", "id": f"toolu_fake{serial:04d}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": TEXT}
        stop = "end_turn"
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    end = {"stop_reason": stop, "stop_sequence": None}
    out = {"output_tokens": options.output_tokens}
    yield "message_delta", {"type": "message_delta", "delta": end, "usage": out}
    yield "message_stop", {"type": "message_stop"}


def whole(body: JSON, options: Options, serial: int) -> dict[str, JSON]:
    """The same answer as one JSON message, for a request that does not stream."""
    message: dict[str, JSON] = {}
    for _, data in events(body, options, serial):
        if data["type"] == "message_start":
            message = dict(data["message"])
        elif data["type"] == "content_block_start":
            message["content"] = [dict(data["content_block"])]
        elif data["type"] == "content_block_delta":
            block, delta = message["content"][0], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                block["input"] = json.loads(delta["partial_json"])
        elif data["type"] == "message_delta":
            message.update(data["delta"])
            message["usage"] = {**message["usage"], **data["usage"]}
    return message


def _received(request: web.Request, raw: bytes, status: int) -> Received:
    headers = {name.lower(): value for name, value in request.headers.items()}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    kind = "post" if request.method == "POST" and request.path == "/v1/messages" else "other"
    return Received(kind, "http", request.method, request.path_qs, headers, status, raw, body)


async def _messages(request: web.Request) -> web.StreamResponse:
    options = request.app[OPTIONS]
    item = _received(request, await request.read(), 200)
    request.app[RECORDING].add(item)
    body, serial = item.body, next(_serials)
    if not isinstance(body, dict) or not body.get("stream"):
        return web.json_response(whole(body, options, serial))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for name, data in events(body, options, serial):
        await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    await response.write_eof()
    return response


async def _count_tokens(request: web.Request) -> web.Response:
    request.app[RECORDING].add(_received(request, await request.read(), 200))
    return web.json_response({"input_tokens": request.app[OPTIONS].input_tokens})


async def _other(request: web.Request) -> web.Response:
    status = 200 if request.method == "HEAD" and request.path == "/" else 404
    request.app[RECORDING].add(_received(request, await request.read(), status))
    if status == 200:
        return web.Response()
    error = {"type": "not_found_error", "message": f"the fake has no {request.path}"}
    return web.json_response({"type": "error", "error": error}, status=status)
