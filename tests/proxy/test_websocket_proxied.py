"""websocket: an upgrade on a proxied path is relayed as a WebSocket to the routed upstream, every
message both ways in order, and each `response.create` compacted and counted as a request.

Real sockets throughout: an aiohttp WebSocket upstream on 127.0.0.1 that speaks enough of the
Responses WebSocket protocol, the proxy from `make_app`, a real aiohttp WebSocket client.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from proxy_harness import (
    COMPACT_SCHEMA,
    SCHEMA,
    TIMEOUT,
    closed_port,
    serve_process,
    settings_for,
    stats_of,
    stop_process,
    total_is,
    wait_healthy,
)
from toolslim.core.pipeline import Pipeline
from toolslim.proxy.app import make_app

USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens": 9,
    "total_tokens": 129,
}


def create(tools: list[Any] | None, **extra: Any) -> bytes:
    """A `response.create` message as Codex writes one (type first, compact JSON)."""
    body: dict[str, Any] = {"type": "response.create", "model": "gpt-fake", **extra}
    body["input"] = [{"type": "message", "role": "user", "content": "list the files ✓"}]
    if tools is not None:
        body["tools"] = tools
    body["prompt_cache_key"] = "thread-1"
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


ANNOTATED = [{"type": "function", "name": "read_file", "parameters": SCHEMA, "strict": False}]
COMPACTED = [
    {"type": "function", "name": "read_file", "parameters": COMPACT_SCHEMA, "strict": False}
]


@dataclass
class Upstream:
    """Records every message exactly; answers each `response.create` with the events of a
    response (usage in `response.completed`), and obeys a few text commands:
    `close:CODE:REASON` closes with that code, `echo` / binary / ping are echoed."""

    messages: list[tuple[WSMsgType, bytes]] = field(default_factory=list)
    upgrades: list[web.Request] = field(default_factory=list)
    refuse: int = 0  # answer upgrades with this status instead
    closes: list[tuple[int | None, str]] = field(default_factory=list)
    server: TestServer | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}"

    def texts(self) -> list[bytes]:
        return [data for kind, data in self.messages if kind is WSMsgType.TEXT]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.upgrades.append(request)
        if self.refuse:
            return web.json_response(
                {"error": {"message": "no", "code": self.refuse}},
                status=self.refuse,
                headers={"retry-after": "3", "x-request-id": "req_9"},
            )
        ws = web.WebSocketResponse(
            protocols=("responses.v1",), autoping=False, autoclose=False, decode_text=False
        )
        await ws.prepare(request)
        serial = 0
        while True:
            msg = await ws.receive()
            if msg.type in (WSMsgType.CLOSED, WSMsgType.CLOSING, WSMsgType.ERROR):
                break
            if msg.type is WSMsgType.TEXT:
                self.messages.append((msg.type, msg.data))
                text = msg.data.decode()
                if text.startswith("close:"):
                    _, code, reason = text.split(":", 2)
                    await ws.close(code=int(code), message=reason.encode())
                    break
                if text == "echo":
                    await ws.send_str("echo")
                    continue
                try:
                    body = json.loads(text)
                except ValueError:
                    continue
                if isinstance(body, dict) and body.get("type") == "response.create":
                    serial += 1
                    await self.respond(ws, serial, body)
            elif msg.type is WSMsgType.BINARY:
                self.messages.append((msg.type, msg.data))
                await ws.send_bytes(msg.data)
            elif msg.type is WSMsgType.PING:
                self.messages.append((msg.type, msg.data))
                await ws.pong(msg.data)
            elif msg.type is WSMsgType.CLOSE:
                self.closes.append((msg.data, msg.extra))
                await ws.close(code=msg.data)
                break
        return ws

    async def respond(self, ws: web.WebSocketResponse, serial: int, body: dict[str, Any]) -> None:
        rid = f"resp_{serial}"
        await ws.send_str(json.dumps({"type": "response.created", "response": {"id": rid}}))
        if body.get("generate") is not False:
            for word in ("Hello", " there"):
                event = {"type": "response.output_text.delta", "delta": word}
                await ws.send_str(json.dumps(event))
        done = {"type": "response.completed", "response": {"id": rid, "usage": USAGE}}
        await ws.send_str(json.dumps(done))


@pytest.fixture
async def ws_upstream(aiohttp_server: Any) -> Upstream:
    fake = Upstream()
    fake.server = await aiohttp_server(fake.app())
    return fake


async def start_proxy(aiohttp_server: Any, base: str, **changes: Any) -> TestServer:
    server: TestServer = await aiohttp_server(make_app(settings_for(base, **changes)))
    return server


@pytest.fixture
async def client() -> Any:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        yield session


async def receive_until_completed(ws: aiohttp.ClientWebSocketResponse) -> list[dict[str, Any]]:
    events = []
    while True:
        msg = await ws.receive(timeout=5)
        assert msg.type is WSMsgType.TEXT, msg
        events.append(json.loads(msg.data))
        if events[-1]["type"] == "response.completed":
            return events


async def test_an_annotated_catalogue_in_response_create_arrives_compacted_other_bytes_identical(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    sent = create(ANNOTATED)
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        await ws.send_str(sent.decode())
        events = await receive_until_completed(ws)
    assert events[-1]["response"]["usage"] == USAGE
    [received] = ws_upstream.texts()
    # Exactly what the pipeline makes of the same bytes sent over HTTP to /v1/responses.
    assert received == Pipeline(["toolschema"]).run(sent, "openai-responses").body
    assert json.loads(received)["tools"] == COMPACTED
    head, _, tail = sent.partition(b'"tools":')
    old_tools = json.dumps(ANNOTATED, separators=(",", ":"), ensure_ascii=False).encode()
    rest = tail[len(old_tools) :]
    assert received.startswith(head + b'"tools":') and received.endswith(rest)
    assert len(received) < len(sent)


@pytest.mark.parametrize(
    "sent",
    [
        create(COMPACTED),  # nothing to strip
        create(None, generate=False),  # Codex's prewarm: no tools
        b'{"type":"response.create","tools":[1,2',  # not JSON
        b"plain text, not JSON at all",
        b'{"type":"session.update","tools":[{"title":"x"}]}',  # not a response.create
    ],
    ids=["nothing to strip", "prewarm", "broken JSON", "not JSON", "other type"],
)
async def test_text_messages_the_pipeline_does_not_change_arrive_byte_identical(
    sent: bytes, ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        await ws.send_str(sent.decode())
        await ws.send_str("echo")
        assert (await ws.receive(timeout=5)).type is WSMsgType.TEXT
    deadline = time.monotonic() + 5
    while len(ws_upstream.texts()) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert ws_upstream.texts()[0] == sent


async def test_binary_ping_and_pong_are_relayed_both_ways_in_order(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    blobs = [bytes(range(256)) * 40, b"\x00\xff", b""]
    async with client.ws_connect(proxy.make_url("/v1/responses"), autoping=False) as ws:
        for blob in blobs:
            await ws.send_bytes(blob)
        await ws.ping(b"are you there")
        echoed = [await ws.receive(timeout=5) for _ in blobs]
        pong = await ws.receive(timeout=5)
    assert [m.data for m in echoed] == blobs
    assert all(m.type is WSMsgType.BINARY for m in echoed)
    assert (pong.type, pong.data) == (WSMsgType.PONG, b"are you there")
    kinds = [kind for kind, _ in ws_upstream.messages]
    assert kinds == [WSMsgType.BINARY] * 3 + [WSMsgType.PING]


@pytest.mark.parametrize("client_compress", [15, 0], ids=["client deflate", "client plain"])
async def test_permessage_deflate_is_negotiated_on_each_leg(
    client_compress: int,
    ws_upstream: Upstream,
    aiohttp_server: Any,
    client: aiohttp.ClientSession,
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    url = proxy.make_url("/v1/responses")
    async with client.ws_connect(url, compress=client_compress) as ws:
        assert ws.compress == client_compress
        await ws.send_str(create(ANNOTATED).decode())
        await receive_until_completed(ws)
    [upgrade] = ws_upstream.upgrades
    offered = upgrade.headers.get("Sec-WebSocket-Extensions", "")
    assert ("permessage-deflate" in offered) == bool(client_compress)
    assert len(ws_upstream.texts()) == 1


async def test_headers_reach_the_upstream_and_the_handshake_is_negotiated_per_leg(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    headers = {
        "authorization": "Bearer sk-test-0123",
        "openai-beta": "responses_websockets=2026-02-06",
        "session-id": "s-1",
        "x-codex-turn-metadata": "{}",
        "user-agent": "codex_exec/0.171.0",
    }
    url = proxy.make_url("/v1/responses?x=1")
    sent: list[str] = []  # the key this client sent, read through aiohttp's public tracing

    async def on_request_start(session: Any, context: Any, params: Any) -> None:
        sent.append(params.headers["Sec-WebSocket-Key"])

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT, trace_configs=[trace]) as traced,
        traced.ws_connect(url, headers=headers, protocols=("responses.v1",)) as ws,
    ):
        assert ws.protocol == "responses.v1"
        [key] = sent
    [upgrade] = ws_upstream.upgrades
    assert upgrade.path_qs == "/o/v1/responses?x=1"
    for name, value in headers.items():
        assert upgrade.headers[name] == value
    assert upgrade.headers["Sec-WebSocket-Key"] != key
    assert upgrade.headers["Sec-WebSocket-Protocol"] == "responses.v1"


async def test_usage_is_counted_and_each_response_create_is_one_request_with_memo_hits(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    turns = 5
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        await ws.send_str(create(None, generate=False).decode())
        await receive_until_completed(ws)
        for turn in range(turns):
            await ws.send_str(create(ANNOTATED, turn=turn).decode())
            await receive_until_completed(ws)
        await ws.send_str("echo")  # not a request
        await ws.receive(timeout=5)
    total = turns + 1
    snapshot = await stats_of(
        client,
        proxy,
        lambda s: total_is(total)(s) and s["websockets"]["active"] == 0,
    )
    requests = snapshot["requests"]
    assert requests["total"] == total
    assert requests["by_transport"] == {"http": 0, "websocket": total}
    assert requests["by_api"] == {"openai-responses": total}
    component = snapshot["components"]["toolschema"]
    assert (component["applied"], component["skipped"]) == (turns, 1)
    assert component["skip_reasons"] == {"no_tools": 1}
    assert snapshot["memo"]["hits"] == turns - 1 and snapshot["memo"]["misses"] == 1
    tokens = snapshot["usage"]["tokens"]
    assert tokens["input"] == total * 20 and tokens["cache_read"] == total * 100
    assert tokens["output"] == total * 9
    assert snapshot["websockets"]["total"] == 1
    assert snapshot["websockets"]["closed_by"]["client"] == 1
    async with client.get(proxy.make_url("/metrics")) as response:
        metrics = await response.text()
    assert 'toolslim_requests_by_transport_total{transport="websocket"} 6.0' in metrics
    assert 'toolslim_websockets_closed_total{closed_by="client"} 1.0' in metrics


async def test_close_codes_and_reasons_travel_both_ways(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    url = proxy.make_url("/v1/responses")
    async with client.ws_connect(url) as ws:
        await ws.send_str("close:4001:upstream says bye")
        msg = await ws.receive(timeout=5)
        assert (msg.type, msg.data, msg.extra) == (WSMsgType.CLOSE, 4001, "upstream says bye")
    async with client.ws_connect(url) as ws:
        await ws.close(code=4002, message=b"client says bye")
        assert ws.close_code == 4002
    deadline = time.monotonic() + 5
    while not ws_upstream.closes and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert ws_upstream.closes == [(4002, "client says bye")]
    snapshot = await stats_of(client, proxy, lambda s: s["websockets"]["active"] == 0)
    assert snapshot["websockets"]["closed_by"]["upstream"] == 1
    assert snapshot["websockets"]["closed_by"]["client"] == 1
    assert snapshot["requests"]["total"] == 0  # an upgrade is a connection, not a request


@pytest.mark.parametrize("status", [401, 403, 429, 500, 503])
async def test_an_upstream_refusal_that_means_something_is_relayed_as_it_is(
    status: int, ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    ws_upstream.refuse = status
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}
    headers["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
    async with client.get(proxy.make_url("/v1/responses"), headers=headers) as response:
        assert response.status == status
        assert response.headers["retry-after"] == "3"
        assert response.headers["x-request-id"] == "req_9"
        assert await response.json() == {"error": {"message": "no", "code": status}}


@pytest.mark.parametrize("status", [200, 400, 404, 405, 426])
async def test_an_upstream_that_does_not_speak_websocket_gives_426_so_clients_use_http(
    status: int, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    async def plain(request: web.Request) -> web.Response:
        return web.json_response({"plain": True}, status=status)

    app = web.Application()
    app.router.add_get("/{tail:.*}", plain)
    upstream = await aiohttp_server(app)
    proxy = await start_proxy(aiohttp_server, f"http://127.0.0.1:{upstream.port}")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect(proxy.make_url("/v1/responses"))
    assert refused.value.status == 426
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}
    headers["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
    async with client.get(proxy.make_url("/v1/responses"), headers=headers) as response:
        body = await response.json()
    assert body["error"]["code"] == "upgrade_required"
    assert f"answered {status}" in body["error"]["message"]


async def test_an_upstream_that_is_down_is_a_502_in_openais_error_shape(
    aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, f"http://127.0.0.1:{closed_port()}")
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}
    headers["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
    async with client.get(proxy.make_url("/v1/responses"), headers=headers) as response:
        assert response.status == 502
        body = await response.json()
    assert body["error"]["type"] == "upstream_error"
    assert "could not connect to the openai upstream" in body["error"]["message"]
    snapshot = await stats_of(client, proxy)
    assert snapshot["requests"]["upstream_errors"]["connect"] == 1
    assert snapshot["requests"]["total"] == 0


async def test_websocket_false_answers_every_upgrade_with_426(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url, websocket=False)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect(proxy.make_url("/v1/responses"))
    assert refused.value.status == 426
    assert ws_upstream.upgrades == []
    snapshot = await stats_of(client, proxy)
    assert snapshot["websockets"]["refused"] == 1


async def test_a_websocket_idle_both_ways_is_closed_with_1001(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    from toolslim.config.settings import Timeouts

    timeouts = Timeouts(idle_websocket=0.3)
    proxy = await start_proxy(aiohttp_server, ws_upstream.url, timeouts=timeouts)
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        await ws.send_str("echo")
        await ws.receive(timeout=5)
        msg = await ws.receive(timeout=5)
    assert (msg.type, msg.data) == (WSMsgType.CLOSE, 1001)
    snapshot = await stats_of(client, proxy, lambda s: s["websockets"]["active"] == 0)
    assert snapshot["websockets"]["closed_by"]["idle"] == 1


async def test_a_hundred_concurrent_websockets_each_get_their_own_answers_intact(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    url = proxy.make_url("/v1/responses")

    async def one(index: int) -> list[bytes]:
        async with client.ws_connect(url) as ws:
            await ws.send_bytes(index.to_bytes(4, "big") * 1000)
            echo = await ws.receive(timeout=10)
            await ws.send_str(create(ANNOTATED, index=index).decode())
            events = await receive_until_completed(ws)
            assert events[-1]["response"]["usage"] == USAGE
            return [echo.data]

    results = await asyncio.gather(*(one(i) for i in range(100)))
    assert [r[0] for r in results] == [i.to_bytes(4, "big") * 1000 for i in range(100)]
    snapshot = await stats_of(
        client,
        proxy,
        lambda s: total_is(100)(s) and s["websockets"]["active"] == 0,
    )
    assert snapshot["requests"]["by_transport"]["websocket"] == 100
    assert snapshot["websockets"]["total"] == 100


async def test_sigterm_lets_the_response_in_flight_finish_then_closes_the_websocket_with_1001(
    tmp_path: Path, client: aiohttp.ClientSession, aiohttp_server: Any
) -> None:
    gate = asyncio.Event()

    async def slow(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type is WSMsgType.TEXT:
                await ws.send_str(json.dumps({"type": "response.created"}))
                await gate.wait()
                done = {"type": "response.completed", "response": {"usage": USAGE}}
                await ws.send_str(json.dumps(done))
        return ws

    app = web.Application()
    app.router.add_get("/{tail:.*}", slow)
    upstream = await aiohttp_server(app)
    process, base = serve_process(
        tmp_path, f"upstreams: {{openai: 'http://127.0.0.1:{upstream.port}'}}\nshutdown_grace: 10\n"
    )
    try:
        await wait_healthy(client, base, process)
        async with client.ws_connect(f"{base}/v1/responses") as ws:
            await ws.send_str(create(ANNOTATED).decode())
            assert json.loads((await ws.receive(timeout=5)).data)["type"] == "response.created"
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            gate.set()
            done = await ws.receive(timeout=5)
            assert json.loads(done.data)["type"] == "response.completed"
            closing = await ws.receive(timeout=5)
        assert (closing.type, closing.data) == (WSMsgType.CLOSE, 1001)
        returncode = await asyncio.wait_for(asyncio.to_thread(process.wait), 15)
        assert returncode == 0
    finally:
        err = stop_process(process)
    assert "WS /v1/responses upstream=openai api=openai-responses status=200" in err


async def test_an_error_event_ends_its_response_and_counts_with_the_status_it_names(
    aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    async def failing(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            if msg.type is WSMsgType.TEXT:
                error = {"type": "error", "status": 429, "error": {"message": "slow down"}}
                await ws.send_str(json.dumps(error))
        return ws

    app = web.Application()
    app.router.add_get("/{tail:.*}", failing)
    upstream = await aiohttp_server(app)
    proxy = await start_proxy(aiohttp_server, f"http://127.0.0.1:{upstream.port}")
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        type_last = {"model": "m", "input": [], "type": "response.create"}  # still a request
        await ws.send_str(json.dumps(type_last))
        assert json.loads((await ws.receive(timeout=5)).data)["type"] == "error"
    snapshot = await stats_of(client, proxy, lambda s: s["websockets"]["active"] == 0)
    assert snapshot["requests"]["total"] == 1
    assert snapshot["requests"]["by_status"]["4xx"] == 1
    assert snapshot["usage"]["usage_unavailable"] == 1


async def test_a_response_create_over_max_catalogue_bytes_goes_on_untouched_as_too_large(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url, max_catalogue_bytes=1000)
    sent = create(ANNOTATED, note="x" * 2000)
    async with client.ws_connect(proxy.make_url("/v1/responses")) as ws:
        await ws.send_str(sent.decode())
        await receive_until_completed(ws)
    assert ws_upstream.texts() == [sent]
    snapshot = await stats_of(client, proxy, total_is(1))
    assert snapshot["components"]["toolschema"]["skip_reasons"] == {"too_large": 1}


async def test_a_large_response_create_is_compacted_as_a_small_one_is(
    ws_upstream: Upstream, aiohttp_server: Any, client: aiohttp.ClientSession
) -> None:
    proxy = await start_proxy(aiohttp_server, ws_upstream.url)
    sent = create(ANNOTATED, note="x" * (2 * 1024 * 1024))  # heavy: the worker thread's
    async with client.ws_connect(proxy.make_url("/v1/responses"), max_msg_size=0) as ws:
        await ws.send_str(sent.decode())
        await receive_until_completed(ws)
    assert ws_upstream.texts() == [Pipeline(["toolschema"]).run(sent, "openai-responses").body]
