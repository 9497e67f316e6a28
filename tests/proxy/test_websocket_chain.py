"""The tool ledger on a Responses WebSocket whose follow-ups carry no catalogue (Codex sends a
tool's output with `previous_response_id` only): through the real proxy to the fake Responses
upstream (tests/fake_responses.py) answering with tool calls."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from aiohttp import WSMsgType

from fake_responses import Options, make_fake_responses
from proxy_harness import TIMEOUT, stats_of
from toolslim.config.settings import load_settings
from toolslim.proxy.app import make_app

SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
CALL = {"type": "function_call", "name": "shell", "arguments": "{}"}


async def answer(ws: aiohttp.ClientWebSocketResponse, body: dict[str, Any]) -> list[Any]:
    await ws.send_str(json.dumps({"type": "response.create", "model": "gpt-5", **body}))
    events = []
    while not events or events[-1]["type"] != "response.completed":
        msg = await ws.receive(timeout=5)
        assert msg.type is WSMsgType.TEXT, msg
        events.append(json.loads(msg.data))
    return events


def output_of(events: list[Any]) -> dict[str, Any]:
    """The follow-up a client sends after running the call `events` made."""
    completed = events[-1]["response"]
    (call,) = completed["output"]
    item = {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}
    return {"previous_response_id": completed["id"], "input": [item]}


def settled(requests: int) -> Any:
    return lambda s: s["requests"]["total"] >= requests and s["tools"]["costliest"]


@pytest.mark.parametrize("previous", ["continued", "unknown"])
async def test_a_follow_up_offers_and_calls_the_tools_of_the_response_it_continues(
    aiohttp_server: Any, previous: str
) -> None:
    fake = await aiohttp_server(make_fake_responses(Options(calls=(CALL, CALL))))
    upstreams = {"openai": f"http://127.0.0.1:{fake.port}"}
    proxy = await aiohttp_server(make_app(load_settings(None, {"upstreams": upstreams}, {})))
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as client,
        client.ws_connect(proxy.make_url("/v1/responses")) as ws,
    ):
        first = await answer(ws, {"input": [], "tools": [SHELL]})
        follow_up = output_of(first)
        if previous == "unknown":
            follow_up["previous_response_id"] = "resp_from_another_connection"
        second = await answer(ws, follow_up)
        await answer(ws, output_of(second))
        snapshot = await stats_of(client, proxy, settled(3))

    tools = snapshot["tools"]
    (row,) = tools["costliest"]
    if previous == "continued":  # each follow-up had the shell in its prompt and one called it
        assert (row["tool"], row["requests"], row["calls"]) == ("shell", 3, 2)
    else:  # nothing says what the prompt held: the follow-ups are not counted
        assert (row["tool"], row["requests"], row["calls"]) == ("shell", 1, 1)
    assert tools["unknown_calls"]["total"] == 0
