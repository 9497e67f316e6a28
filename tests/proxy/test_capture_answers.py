"""capture through the real proxy: each line carries the tool calls its answer made, read from
JSON and SSE answers (chunks cut inside the call events) and from the Responses WebSocket, and
none for a request that is no model call (count_tokens); what reaches the client is the
upstream's answer byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from proxy_harness import ANTHROPIC, RESPONSES, Proxy, dumps, stats_of, total_is
from toolslim.proxy.app import FORWARDING

USAGE = {"input_tokens": 50, "output_tokens": 7}
ANTHROPIC_ANSWER = json.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
            {
                "type": "tool_use",
                "id": "toolu_2",
                "name": "mcp__aws-docs__read_documentation",
                "input": {},
            },
        ],
        "usage": USAGE,
    }
).encode()


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


CALL = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "search"}
NAMESPACED = {**CALL, "namespace": "mcp__aws_docs", "arguments": ""}
RESPONSES_STREAM = sse(
    {"type": "response.created", "response": {"id": "r1", "object": "response", "output": []}},
    {"type": "response.output_item.added", "output_index": 0, "item": NAMESPACED},
    {"type": "response.output_item.done", "output_index": 0, "item": NAMESPACED},
    {
        "type": "response.completed",
        "response": {
            "id": "r1",
            "object": "response",
            "output": [NAMESPACED],
            "usage": {"input_tokens": 50, "output_tokens": 7, "total_tokens": 57},
        },
    },
)


async def answer(request: web.Request) -> web.StreamResponse:
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return await relayed(request)
    await request.read()
    if request.path.endswith("/v1/messages"):
        return web.Response(body=ANTHROPIC_ANSWER, content_type="application/json")
    if request.path.endswith("/v1/responses"):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        # Cut inside the call events: the reader must put them together again.
        for start in range(0, len(RESPONSES_STREAM), 37):
            await response.write(RESPONSES_STREAM[start : start + 37])
        await response.write_eof()
        return response
    return web.json_response({"input_tokens": 50})


async def relayed(request: web.Request) -> web.WebSocketResponse:
    """A Responses WebSocket: each response.create is answered with the stream's events."""
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for message in ws:
        if message.type is WSMsgType.TEXT and "response.create" in message.data:
            for event in RESPONSES_STREAM.split(b"\n\n")[:-1]:
                await ws.send_str(event.split(b"data: ", 1)[1].decode())
    return ws


def capture_lines(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(folder.glob("toolslim-capture-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


async def test_each_capture_line_carries_the_tool_calls_its_answer_made(
    aiohttp_server: Any, proxy: Proxy, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    fake = web.Application()
    fake.router.add_route("*", "/{tail:.*}", answer)
    upstream = await aiohttp_server(fake)
    server = await proxy(f"http://127.0.0.1:{upstream.port}", capture_dir=str(tmp_path))
    streamed = dumps({**RESPONSES, "stream": True})
    answers = []
    for path, body in (
        ("/v1/messages", dumps(ANTHROPIC)),
        ("/v1/responses", streamed),
        ("/v1/messages/count_tokens", dumps(ANTHROPIC)),
    ):
        async with client.post(server.make_url(path), data=body) as response:
            assert response.status == 200
            answers.append(await response.read())
    assert answers[:2] == [ANTHROPIC_ANSWER, RESPONSES_STREAM]  # observed, never changed
    await stats_of(client, server, total_is(3))
    assert server.app is not None
    recorder = server.app[FORWARDING].capture
    assert recorder is not None
    recorder.close()
    lines = capture_lines(tmp_path)
    by_path = {line["path"]: line for line in lines}
    assert by_path["/v1/messages"]["calls"] == [
        {"name": "read_file", "server": "builtin"},
        {"name": "mcp__aws-docs__read_documentation", "server": "aws-docs"},
    ]
    assert by_path["/v1/responses"]["calls"] == [
        {"name": "search", "server": "aws_docs", "namespace": "mcp__aws_docs"}
    ]
    assert "calls" not in by_path["/v1/messages/count_tokens"]  # no model call: no calls read


async def test_a_response_create_on_the_websocket_is_captured_with_its_answer_s_calls(
    aiohttp_server: Any, proxy: Proxy, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    fake = web.Application()
    fake.router.add_route("*", "/{tail:.*}", answer)
    upstream = await aiohttp_server(fake)
    server = await proxy(f"http://127.0.0.1:{upstream.port}", capture_dir=str(tmp_path))
    message = dumps({"type": "response.create", **RESPONSES}).decode()
    async with client.ws_connect(server.make_url("/v1/responses")) as ws:
        await ws.send_str(message)
        while "response.completed" not in await ws.receive_str():
            pass
    await stats_of(client, server, total_is(1))
    assert server.app is not None
    recorder = server.app[FORWARDING].capture
    assert recorder is not None
    recorder.close()
    [line] = capture_lines(tmp_path)
    assert (line["method"], line["path"]) == ("WS", "/v1/responses")
    assert line["calls"] == [{"name": "search", "server": "aws_docs", "namespace": "mcp__aws_docs"}]
