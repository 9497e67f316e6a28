"""The tool ledger through real sockets: a fake upstream answers with chosen tool calls, for each
API and transport (JSON, SSE, the Responses WebSocket, Gemini's JSON array), its bytes cut
into small chunks that split the call events; /stats `tools` counts each call once, by tool
and server, names the unknown ones, and prices what the tools offered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import aiohttp
import genai_prices
import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from proxy_harness import settings_for, stats_of
from toolslim.core.tokens import count_tokens
from toolslim.proxy.app import make_app

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
USAGE_READ = {"input_tokens": 40, "cache_read_input_tokens": 3000, "output_tokens": 9}


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + compact(event) + b"\n\n" for event in events)


class Answers:
    """An upstream that answers every request with `body` (of `content_type`), written
    `chunk` bytes at a time, and records what it got."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.content_type = "application/json"
        self.chunk = 3
        self.ws_events: list[bytes] = []
        self.received: list[bytes] = []
        self.server: TestServer | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self.websocket(request)
        self.received.append(await request.read())
        response = web.StreamResponse(headers={"Content-Type": self.content_type})
        await response.prepare(request)
        for at in range(0, len(self.body), self.chunk):
            await response.write(self.body[at : at + self.chunk])
        await response.write_eof()
        return response

    async def websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT and b"response.create" in message.data.encode():
                self.received.append(message.data.encode())
                for event in self.ws_events:
                    await ws.send_str(event.decode())
        return ws


@pytest.fixture
async def answers(aiohttp_server: Any) -> Answers:
    fake = Answers()
    fake.server = await aiohttp_server(fake.app())
    return fake


@pytest.fixture
async def ledger_proxy(aiohttp_server: Any, answers: Answers) -> Callable[..., Any]:
    async def start(**changes: Any) -> TestServer:
        assert answers.server is not None
        base = f"http://127.0.0.1:{answers.server.port}"
        server: TestServer = await aiohttp_server(make_app(settings_for(base, **changes)))
        return server

    return start


def counted(count: int) -> Callable[[dict[str, Any]], bool]:
    def done(snapshot: dict[str, Any]) -> bool:
        tools = snapshot["tools"]
        offered = sum(item["requests"] for item in tools["costliest"][:1])
        return snapshot["requests"]["total"] >= count and offered >= 1

    return done


def by_tool(tools: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["tool"]: item for item in tools["costliest"]}


# --- the catalogues and answers of each API --------------------------------------------------

ANTHROPIC_TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": SCHEMA},
    {"name": "mcp__git__status", "description": "Git status.", "input_schema": SCHEMA},
    {"name": "mcp__git__log", "description": "Git log.", "input_schema": SCHEMA},
]
ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "tools": ANTHROPIC_TOOLS,
    "messages": [{"role": "user", "content": "status?"}],
}


def anthropic_block(index: int, name: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{index}", "name": name, "input": {}}


ANTHROPIC_SSE = sse(
    {"type": "message_start", "message": {"usage": {"input_tokens": 40}}},
    {"type": "content_block_start", "index": 0, "content_block": anthropic_block(0, "Read")},
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"path":"tool_use\\""}'},
    },
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": anthropic_block(1, "mcp__git__status"),
    },
    {"type": "content_block_start", "index": 2, "content_block": anthropic_block(2, "Nope")},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": USAGE_READ},
)
ANTHROPIC_JSON = compact(
    {
        "type": "message",
        "content": [
            {"type": "text", "text": "calling"},
            anthropic_block(1, "Read"),
            anthropic_block(2, "mcp__git__status"),
            anthropic_block(3, "Nope"),
        ],
        "usage": USAGE_READ,
    }
)

CHAT_BODY = {
    "model": "gpt-5",
    "stream": True,
    "messages": [{"role": "user", "content": "status?"}],
    "tools": [
        {"type": "function", "function": {"name": tool["name"], "parameters": SCHEMA}}
        for tool in ANTHROPIC_TOOLS
    ],
}
CHAT_USAGE = {"prompt_tokens": 3040, "completion_tokens": 9}
CHAT_USAGE["prompt_tokens_details"] = {"cached_tokens": 3000}  # type: ignore[assignment]


def chat_chunk(index: int, **function: str) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": function}
    if "name" in function:
        call |= {"id": f"call_{index}", "type": "function"}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}], "usage": None}


CHAT_SSE = (
    sse(
        chat_chunk(0, name="Read", arguments=""),
        chat_chunk(0, arguments='{"path":'),
        chat_chunk(0, arguments='"a"}'),
        chat_chunk(1, name="mcp__git__status", arguments=""),
        chat_chunk(1, arguments="{}"),
        chat_chunk(2, name="Nope", arguments="{}"),
        {"choices": [], "usage": CHAT_USAGE},
    )
    + b"data: [DONE]\n\n"
)
CHAT_JSON = compact(
    {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": n, "arguments": ""}}
                        for n in ("Read", "mcp__git__status", "Nope")
                    ]
                },
            }
        ],
        "usage": CHAT_USAGE,
    }
)

RESPONSES_BODY = {
    "model": "gpt-5",
    "stream": True,
    "input": [{"role": "user", "content": "status?"}],
    "tools": [
        {"type": "function", "name": "Read", "parameters": SCHEMA},
        {
            "type": "namespace",
            "name": "mcp__git",
            "description": "git",
            "tools": [
                {"type": "function", "name": "status", "parameters": SCHEMA},
                {"type": "function", "name": "log", "parameters": SCHEMA},
            ],
        },
    ],
}
RESPONSES_USAGE = {
    "input_tokens": 3040,
    "input_tokens_details": {"cached_tokens": 3000},
    "output_tokens": 9,
}
RESPONSES_OUTPUT = [
    {"type": "function_call", "id": "fc_1", "name": "Read", "arguments": "{}"},
    {"type": "function_call", "id": "fc_2", "namespace": "mcp__git", "name": "status"},
    {"type": "function_call", "id": "fc_3", "name": "Nope", "arguments": "{}"},
]


def responses_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"output": []}}]
    for index, item in enumerate(RESPONSES_OUTPUT):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append(
            {"type": "response.function_call_arguments.delta", "output_index": index, "delta": "{"}
        )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    completed = {"object": "response", "output": RESPONSES_OUTPUT, "usage": RESPONSES_USAGE}
    events.append({"type": "response.completed", "response": completed})
    return events


RESPONSES_SSE = sse(*responses_events())
RESPONSES_JSON = compact(
    {"object": "response", "output": RESPONSES_OUTPUT, "usage": RESPONSES_USAGE}
)

GEMINI_BODY = {
    "contents": [{"role": "user", "parts": [{"text": "status?"}]}],
    "tools": [
        {
            "functionDeclarations": [
                {"name": tool["name"], "parametersJsonSchema": SCHEMA} for tool in ANTHROPIC_TOOLS
            ]
        }
    ],
}
GEMINI_USAGE = {"promptTokenCount": 3040, "cachedContentTokenCount": 3000}


def gemini_chunk(*names: str, usage: bool = False) -> dict[str, Any]:
    parts = [{"functionCall": {"name": name, "args": {}}} for name in names]
    chunk: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    if usage:
        chunk["usageMetadata"] = GEMINI_USAGE
    return chunk


GEMINI_CHUNKS = [gemini_chunk("Read"), gemini_chunk("mcp__git__status", "Nope", usage=True)]

# api -> (client path, body, [(transport, content type, answer)])
CASES: dict[str, tuple[str, dict[str, Any], list[tuple[str, str, bytes]]]] = {
    "anthropic": (
        "/v1/messages",
        ANTHROPIC_BODY,
        [
            ("sse", "text/event-stream", ANTHROPIC_SSE),
            ("json", "application/json", ANTHROPIC_JSON),
        ],
    ),
    "openai-chat": (
        "/v1/chat/completions",
        CHAT_BODY,
        [("sse", "text/event-stream", CHAT_SSE), ("json", "application/json", CHAT_JSON)],
    ),
    "openai-responses": (
        "/v1/responses",
        RESPONSES_BODY,
        [
            ("sse", "text/event-stream", RESPONSES_SSE),
            ("json", "application/json", RESPONSES_JSON),
        ],
    ),
    "gemini": (
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
        GEMINI_BODY,
        [
            ("sse", "text/event-stream", sse(*GEMINI_CHUNKS)),
            ("json-array", "application/json", compact(GEMINI_CHUNKS)),
        ],
    ),
}
PARAMS = [
    pytest.param(api, transport, kind, answer, chunk, id=f"{api}-{transport}-{chunk}B")
    for api, (_, _, answers) in CASES.items()
    for transport, kind, answer in answers
    for chunk in (3, 64 * 1024)
]
STATUS = {"openai-responses": "mcp__git/status"}  # a namespace member, as the catalogue names it
# api -> (model, genai-prices provider): what each request asks for, and who prices it.
PRICED = {
    "anthropic": ("claude-sonnet-4-5", "anthropic"),
    "openai-chat": ("gpt-5", "openai"),
    "openai-responses": ("gpt-5", "openai"),
    "gemini": ("gemini-2.5-pro", "google"),
}


@pytest.mark.parametrize(("api", "transport", "content_type", "answer", "chunk"), PARAMS)
async def test_each_call_is_counted_once_by_tool_and_server_and_unknown_names_apart(
    answers: Answers,
    ledger_proxy: Callable[..., Any],
    client: aiohttp.ClientSession,
    api: str,
    transport: str,
    content_type: str,
    answer: bytes,
    chunk: int,
) -> None:
    answers.body, answers.content_type, answers.chunk = answer, content_type, chunk
    proxy = await ledger_proxy()
    path, body, _ = CASES[api]
    async with client.post(proxy.make_url(path), data=compact(body)) as response:
        assert await response.read() == answer  # relayed byte for byte
    snapshot = await stats_of(client, proxy, counted(1))
    tools = snapshot["tools"]
    status = STATUS.get(api, "mcp__git__status")
    items = by_tool(tools)
    assert {name: item["calls"] for name, item in items.items()} == {
        "Read": 1,
        status: 1,
        status.replace("status", "log"): 0,
    }
    assert items[status]["server"] == "git"
    assert items["Read"]["server"] == "builtin"
    assert tools["unknown_calls"] == {"total": 1, "names": {"Nope": 1}}
    servers = {row["server"]: row for row in tools["servers"]}
    assert servers["git"]["calls"] == 1 and servers["git"]["tools"] == 2
    assert servers["builtin"]["calls"] == 1
    # The usage read a cache: the catalogue was billed at the read tier, at the model's price.
    size = 3040
    unit = unit_price(*PRICED[api], size, cache_read_tokens=size)
    for item in items.values():
        assert item["cost"]["usd"] == pytest.approx(float(unit * item["tokens"]), rel=1e-9)
        assert item["offered_tokens"] == {
            "read": item["tokens"],
            "write": 0,
            "uncached": 0,
            "unknown": 0,
        }
        assert item["tokens"] > 0 and item["requests"] == 1 and item["sessions"] == 1


async def test_calls_over_the_responses_websocket_are_counted_once(
    answers: Answers, ledger_proxy: Callable[..., Any], client: aiohttp.ClientSession
) -> None:
    answers.ws_events = [compact(event) for event in responses_events()]
    proxy = await ledger_proxy()
    message = compact({"type": "response.create", **RESPONSES_BODY})
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        await ws.send_str(message.decode())
        got = [await ws.receive_str() for _ in answers.ws_events]
    assert [s.encode() for s in got] == answers.ws_events
    tools = (await stats_of(client, proxy, counted(1)))["tools"]
    items = by_tool(tools)
    assert items["Read"]["calls"] == 1 and items["mcp__git/status"]["calls"] == 1
    assert items["mcp__git/status"]["server"] == "git"
    assert tools["unknown_calls"] == {"total": 1, "names": {"Nope": 1}}


def unit_price(model: str, provider: str, size: int, **tier: int) -> Decimal:
    usage = genai_prices.Usage(input_tokens=size, **tier)
    price: Decimal = genai_prices.calc_price(usage, model, provider_id=provider).input_price
    return price / size


async def test_costs_are_the_tool_tokens_at_the_tier_and_the_price_genai_prices_gives(
    answers: Answers, ledger_proxy: Callable[..., Any], client: aiohttp.ClientSession
) -> None:
    answers.body, answers.content_type = ANTHROPIC_JSON, "application/json"
    proxy = await ledger_proxy()
    async with client.post(proxy.make_url("/v1/messages"), data=compact(ANTHROPIC_BODY)) as r:
        await r.read()
    snapshot = await stats_of(client, proxy, counted(1))
    forwarded = json.loads(answers.received[0])["tools"]
    size = 40 + 3000
    unit = unit_price("claude-sonnet-4-5", "anthropic", size, cache_read_tokens=size)
    for tool, item in zip(forwarded, snapshot["tools"]["costliest"], strict=False):
        item = by_tool(snapshot["tools"])[tool["name"]]
        assert item["tokens"] == count_tokens(compact(tool))
        assert item["cost"]["usd"] == pytest.approx(float(unit * item["tokens"]), rel=1e-9)
        assert item["cost"]["equivalents"] == pytest.approx(0.1 * item["tokens"])
    assert snapshot["tools"]["unpriced"] == {"requests": 0, "models": {}}
    assert snapshot["tools"]["input_tokens_per_request"] == size


@pytest.mark.parametrize(
    ("usage", "tier"),
    [
        ({"input_tokens": 10, "cache_creation_input_tokens": 3000}, "write"),
        ({"input_tokens": 3000}, "uncached"),
        (None, "unknown"),
    ],
)
async def test_the_tier_is_read_from_the_requests_own_usage(
    answers: Answers,
    ledger_proxy: Callable[..., Any],
    client: aiohttp.ClientSession,
    usage: dict[str, int] | None,
    tier: str,
) -> None:
    answer: dict[str, Any] = {"type": "message", "content": []}
    if usage is not None:
        answer["usage"] = usage
    answers.body = compact(answer)
    proxy = await ledger_proxy()
    body = {**ANTHROPIC_BODY, "model": "not-a-model-anyone-prices"}
    async with client.post(proxy.make_url("/v1/messages"), data=compact(body)) as r:
        await r.read()
    tools = (await stats_of(client, proxy, counted(1)))["tools"]
    for item in tools["costliest"]:
        assert [t for t, n in item["offered_tokens"].items() if n] == [tier]
        assert item["cost"]["usd"] == 0
    unpriced = 0 if usage is None else 1
    assert tools["unpriced"]["requests"] == unpriced


async def test_deferred_tools_are_counted_apart_from_the_prompt(
    answers: Answers, ledger_proxy: Callable[..., Any], client: aiohttp.ClientSession
) -> None:
    answers.body = ANTHROPIC_JSON
    proxy = await ledger_proxy()
    tools = [dict(ANTHROPIC_TOOLS[0]), *(dict(t, defer_loading=True) for t in ANTHROPIC_TOOLS[1:])]
    body = {**ANTHROPIC_BODY, "tools": tools}
    async with client.post(proxy.make_url("/v1/messages"), data=compact(body)) as r:
        await r.read()
    snapshot = await stats_of(client, proxy, counted(1))
    items = by_tool(snapshot["tools"])
    git = {row["server"]: row for row in snapshot["tools"]["servers"]}["git"]
    assert items["mcp__git__status"]["deferred"] and items["mcp__git__log"]["deferred"]
    assert sum(items["mcp__git__status"]["offered_tokens"].values()) == 0
    assert items["mcp__git__status"]["cost"] == {"equivalents": 0.0, "usd": 0.0}
    assert sum(git["offered_tokens"].values()) == 0
    deferred = items["mcp__git__status"]["tokens"] + items["mcp__git__log"]["tokens"]
    assert git["deferred_tokens"] == deferred > 0
    assert not items["Read"]["deferred"] and items["Read"]["offered_tokens"]["read"] > 0


async def test_a_token_count_offers_nothing(
    answers: Answers, ledger_proxy: Callable[..., Any], client: aiohttp.ClientSession
) -> None:
    answers.body = compact({"input_tokens": 900})
    proxy = await ledger_proxy()
    url = proxy.make_url("/v1/messages/count_tokens")
    async with client.post(url, data=compact(ANTHROPIC_BODY)) as r:
        await r.read()
    snapshot = await stats_of(client, proxy, lambda s: s["requests"]["total"] >= 1)
    assert snapshot["tools"]["costliest"] == [] and snapshot["tools"]["servers"] == []


SESSION_TOOLS = [
    {"name": "Read", "input_schema": SCHEMA},
    {"name": "mcp__git__status", "input_schema": SCHEMA},
    {"name": "mcp__git__log", "input_schema": SCHEMA},
    {"name": "mcp__docs__search", "input_schema": SCHEMA},
    {"name": "mcp__docs__fetch", "input_schema": SCHEMA},
]


async def test_sixty_requests_over_four_sessions_list_exactly_the_tools_never_called(
    answers: Answers, ledger_proxy: Callable[..., Any], client: aiohttp.ClientSession
) -> None:
    proxy = await ledger_proxy()
    body = compact({**ANTHROPIC_BODY, "tools": SESSION_TOOLS})
    for index in range(60):
        called = ["Read"] if index % 7 else ["Read", "mcp__git__status"]
        blocks = [anthropic_block(n, name) for n, name in enumerate(called)]
        answers.body = compact({"type": "message", "content": blocks, "usage": USAGE_READ})
        headers = {
            "User-Agent": "claude-cli/2.1.197 (external, cli)",
            "X-Claude-Code-Session-Id": f"session-{index % 4}",
        }
        async with client.post(proxy.make_url("/v1/messages"), data=body, headers=headers) as r:
            await r.read()
    snapshot = await stats_of(
        client,
        proxy,
        lambda s: (
            s["requests"]["total"] >= 60
            and sum(i["requests"] for i in s["tools"]["costliest"][:1]) >= 60
        ),
    )
    tools = snapshot["tools"]
    assert sorted(item["tool"] for item in tools["unused"]) == [
        "mcp__docs__fetch",
        "mcp__docs__search",
        "mcp__git__log",
    ]
    assert all(item["requests"] == 60 and item["sessions"] == 4 for item in tools["unused"])
    servers = {row["server"]: row for row in tools["servers"]}
    assert [name for name, row in servers.items() if row["unused"]] == ["docs"]
    assert servers["git"]["unused_tools"] == 1 and servers["docs"]["unused_tools"] == 2
    advice = snapshot["advice"]["unused_mcp_server"]
    assert [entry["server"] for entry in advice["servers"]] == ["docs"]
    assert advice["servers"][0]["client"] == "claude-cli"
    assert "claude mcp remove docs" in advice["servers"][0]["fix"]
    assert advice["requests"] == 60


def diagnosed(reason: str, missed: int) -> bytes:
    usage = {"input_tokens": 3000, "cache_creation_input_tokens": 2000}
    diagnostics = {"cache_miss_reason": {"type": reason, "cache_missed_input_tokens": missed}}
    start = {"type": "message_start", "message": {"usage": usage, "diagnostics": diagnostics}}
    return sse(start, {"type": "message_delta", "usage": {"output_tokens": 3}})


async def test_the_providers_cache_miss_reason_is_counted_and_named_on_the_drift_event(
    answers: Answers, ledger_proxy: Callable[..., Any], client: aiohttp.ClientSession
) -> None:
    answers.content_type = "text/event-stream"
    proxy = await ledger_proxy()
    headers = {"X-Claude-Code-Session-Id": "one"}
    for tools in (ANTHROPIC_TOOLS[:2], ANTHROPIC_TOOLS):  # the second adds a tool: a change
        answers.body = diagnosed("tools_changed", 2500)
        body = compact({**ANTHROPIC_BODY, "tools": tools})
        async with client.post(proxy.make_url("/v1/messages"), data=body, headers=headers) as r:
            assert await r.read() == answers.body
    snapshot = await stats_of(client, proxy, lambda s: s["drift"]["changes"]["added"] == 1)
    assert snapshot["tools"]["cache_miss_reasons"] == {
        "tools_changed": {"requests": 2, "missed_tokens": 5000}
    }
    [change] = snapshot["drift"]["recent"]
    assert change["kind"] == "added" and change["cache_miss_reason"] == "tools_changed"
    # Observed only: the request went upstream as the client sent it, no diagnostics added.
    assert all(b"diagnostics" not in received for received in answers.received)


async def test_an_answer_with_an_error_status_offers_nothing(
    aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    statuses = [529, 200]

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        body = {"type": "message", "content": [], "usage": USAGE_READ}
        return web.json_response(body, status=statuses.pop(0))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    upstream = await aiohttp_server(app)
    proxy = await aiohttp_server(make_app(settings_for(f"http://127.0.0.1:{upstream.port}")))
    for status in (529, 200):
        async with client.post(proxy.make_url("/v1/messages"), data=compact(ANTHROPIC_BODY)) as r:
            assert r.status == status
    snapshot = await stats_of(client, proxy, counted(2))
    assert {item["requests"] for item in snapshot["tools"]["costliest"]} == {1}
