"""The WebSocket relay: an upgrade on a proxied path becomes a WebSocket to the routed upstream,
and every message is relayed both ways, in order, as it arrives.

The upstream's WebSocket is opened first; the client's upgrade is accepted only once the
upstream accepted. A `response.create` message (the Responses API over a WebSocket, Codex's
default transport) goes through the pipeline exactly as an HTTP body does, and is counted as
one proxied request, its usage read from the upstream's terminal event for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson
from aiohttp import (
    ClientError,
    ClientResponse,
    ClientSession,
    ClientWebSocketResponse,
    ClientWSTimeout,
    WSMsgType,
    WSServerHandshakeError,
    web,
)
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from toolslim.config.settings import Settings
from toolslim.core.envelope import joined
from toolslim.observe import advice
from toolslim.observe.exchange import Exchange, Ledger
from toolslim.observe.ledger.chain import Chain, response_id
from toolslim.observe.stats import ClosedBy, Stats
from toolslim.proxy.forward import error_response
from toolslim.proxy.transform import Transform
from toolslim.proxy.watchdog import Stalled, Watchdogs
from toolslim.wire.errors import HeadersTimeout, translate, upgrade_required_body
from toolslim.wire.routing import HOP_BY_HOP, REQUEST_REBUILT, Route, drop_hop_by_hop, route_request
from toolslim.wire.usage import UsageReader

log = logging.getLogger("toolslim.proxy.websocket")

Side = Literal["client", "upstream"]

# Negotiated per leg: each side of the relay has its own key, accept and extensions.
_HANDSHAKE: Final = frozenset(
    {
        "sec-websocket-accept",
        "sec-websocket-extensions",
        "sec-websocket-key",
        "sec-websocket-protocol",
        "sec-websocket-version",
    }
)
_DROPPED: Final = REQUEST_REBUILT | _HANDSHAKE
# An upstream refusal the client should see as it is: credentials, limits, outages. Any
# other answer means the upstream does not speak WebSocket there, and the client is told to
# use HTTP (426), which Codex does at once.
_RELAYED_REFUSALS: Final = frozenset({401, 403, 429})
_REFUSAL_BODY: Final = 64 * 1024  # bytes of a refusal's body kept to relay
_CLOSE_WAIT: Final = 10.0  # seconds a close handshake may take on either leg
# The events that end a response (Responses API streaming events; `error` ends it too).
_TERMINAL: Final = frozenset(
    {b"response.completed", b"response.done", b"response.failed", b"response.incomplete", b"error"}
)
# OpenAI writes an event's `type` first; any other order is read by parsing the message.
_FIRST_TYPE: Final = re.compile(rb'\s*\{\s*"type"\s*:\s*"([^"\\]*)"')


class Refused(Exception):
    """The upstream answered the upgrade with something other than 101."""

    def __init__(self, status: int, headers: CIMultiDictProxy[str], body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.headers = headers
        self.body = body


async def refuse_unless_upgraded(response: ClientResponse) -> None:
    """The WebSocket session's status check: keeps a refusal's status, headers and body
    (the client library would drop the body) before the handshake is abandoned."""
    if response.status != 101:
        body = await response.content.read(_REFUSAL_BODY)
        raise Refused(response.status, response.headers, body)


def is_upgrade(request: web.Request) -> bool:
    upgrade = request.headers.get("Upgrade")
    return upgrade is not None and upgrade.lower() == "websocket"


def upgrade_required(route: Route, message: str) -> web.Response:
    """426 with an OpenAI-shape error: a WebSocket client falls back to HTTP at once."""
    body = upgrade_required_body(message)
    return web.Response(status=426, body=body, content_type="application/json")


def websocket_url(route: Route) -> URL:
    """The upstream URL with the ws/wss scheme of its http/https one, same path and query."""
    url = URL(route.upstream.url + route.target, encoded=True)
    return url.with_scheme("wss" if url.scheme == "https" else "ws")


def upstream_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The end-to-end headers, exactly as for HTTP, less the per-leg handshake ones."""
    return drop_hop_by_hop(CIMultiDict(headers), _DROPPED)


def offered_protocols(headers: CIMultiDictProxy[str]) -> tuple[str, ...]:
    values = headers.getall("Sec-WebSocket-Protocol", ())
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


def offers_deflate(headers: CIMultiDictProxy[str]) -> bool:
    values = headers.getall("Sec-WebSocket-Extensions", ())
    offers = (e.split(";")[0].strip().lower() for v in values for e in v.split(","))
    return "permessage-deflate" in offers


def close_code(code: object) -> int:
    """A code that may be sent in a close frame for one received (RFC 6455 section 7.4)."""
    if not isinstance(code, int) or code in (0, 1005):  # no code was given
        return 1000
    if (1000 <= code <= 1014 and code not in (1004, 1006)) or 3000 <= code <= 4999:
        return code
    return 1011


@dataclass(slots=True)
class _Response:
    """One `response.create` in flight: its record, the reader of its usage, its id."""

    exchange: Exchange
    reader: UsageReader
    ident: bytes | None = None


@dataclass(slots=True, eq=False)
class RelayedWebSocket:
    """One relayed WebSocket: the two legs, the responses in flight, the last activity."""

    relay: Relay
    route: Route
    request: web.Request
    client: web.WebSocketResponse
    upstream: ClientWebSocketResponse[Literal[False]]
    inflight: deque[_Response] = field(default_factory=deque)
    chain: Chain = field(default_factory=Chain)  # for the tool ledger
    last: float = 0.0
    draining: bool = False
    closed_by: ClosedBy | None = None

    async def run(self) -> ClosedBy:
        loop = asyncio.get_running_loop()
        self.last = loop.time()
        up = asyncio.ensure_future(self._pump("client"))
        down = asyncio.ensure_future(self._pump("upstream"))
        idle = asyncio.ensure_future(self._idle(loop))
        tasks = (up, down, idle)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            # The other direction sees the close at once; bounded all the same.
            await asyncio.wait((up, down), timeout=_CLOSE_WAIT * 2)
        except asyncio.CancelledError:  # the shutdown grace ran out, or the client went away
            self._closing("shutdown" if self.draining else "client")
            await asyncio.shield(self._close_both(1001, b"toolslim is shutting down"))
            raise
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            self._end_inflight()
        return self.closed_by or "error"

    async def _pump(self, side: Side) -> None:
        """One direction: each message from `side` to the other leg, in order, one at a time
        (so never more than one message is held per direction)."""
        upstream_side = side == "upstream"
        source, sink = (
            (self.upstream, self.client) if upstream_side else (self.client, self.upstream)
        )
        while True:
            msg = await source.receive()
            self.last = asyncio.get_running_loop().time()
            kind = msg.type
            if kind is WSMsgType.TEXT:
                data = msg.data if upstream_side else await self._rewrite(msg.data)
                await sink.send_frame(data, WSMsgType.TEXT)
                if upstream_side and self._observe(data):
                    return
            elif kind is WSMsgType.BINARY:
                await sink.send_frame(msg.data, WSMsgType.BINARY)
            elif kind is WSMsgType.PING:
                await sink.ping(msg.data)
            elif kind is WSMsgType.PONG:
                await sink.pong(msg.data)
            elif kind is WSMsgType.CLOSE:  # passed on with its code; then this leg's reply
                self._closing(side)
                code, reason = close_code(msg.data), _reason(msg.extra)
                await sink.close(code=code, message=reason)
                await source.close(code=code, message=reason)
                return
            else:  # CLOSING (the other direction is closing this leg), CLOSED or ERROR
                if kind is WSMsgType.CLOSED and not upstream_side:  # gone without a close
                    self._closing("client")
                    await self._close_both(1001, b"")
                elif kind is not WSMsgType.CLOSING:
                    self._closing("error")
                    await self._close_both(1011, b"")
                return

    async def _idle(self, loop: asyncio.AbstractEventLoop) -> None:
        limit = self.relay.settings.timeouts.idle_websocket
        while (left := self.last + limit - loop.time()) > 0:
            await asyncio.sleep(left)
        self._closing("idle")
        await self._close_both(1001, b"idle")

    def drain(self) -> None:
        """Close with 1001 once no response is in flight (at once if none is)."""
        self.draining = True
        if not self.inflight:
            self._closing("shutdown")
            self.relay.spawn(self._close_both(1001, b"toolslim is shutting down"))

    def _closing(self, by: ClosedBy) -> None:
        if self.closed_by is None:
            self.closed_by = by

    async def _close_both(self, code: int, reason: bytes) -> None:
        for leg in (self.upstream, self.client):
            if not leg.closed:
                with contextlib.suppress(Exception):
                    await leg.close(code=code, message=reason)

    async def _rewrite(self, data: bytes) -> bytes:
        """A client's text message: a `response.create` goes through the pipeline as an HTTP
        body does (on the worker thread when heavy) and is counted as a request; any other
        message goes on as it is."""
        if event_type(data) != b"response.create":
            return data
        received = time.perf_counter()
        path = self.route.target.partition("?")[0]
        exchange = Exchange(
            self.route, "WS", path, received, "websocket", self.request.headers, data
        )
        # A message has no headers of its own: no Content-Encoding, no signature.
        rewritten = await self.relay.transform(exchange, data)
        pieces = rewritten.pieces
        if not rewritten.report.catalogues:
            exchange.continued = self.chain.continued(data)
        out = data if pieces == (data,) else joined(pieces)
        exchange.sent = True
        exchange.overhead = time.perf_counter() - received
        self.inflight.append(_Response(exchange, UsageReader("openai-responses")))
        return out

    def _observe(self, data: bytes) -> bool:
        """Feed an upstream event to the oldest response in flight; a terminal one ends it.
        True once draining closes the connection after the last response in flight."""
        if self.inflight:
            started = time.perf_counter()
            response = self.inflight[0]
            response.reader.feed(data)
            exchange = response.exchange
            kind = event_type(data)
            if kind == b"response.created":
                response.ident = response_id(data)
            elif kind in _TERMINAL:
                self.inflight.popleft()
                exchange.status = 200 if kind != b"error" else _error_status(data)
                if kind != b"error" and exchange.report is not None:
                    in_prompt = exchange.report.catalogues or exchange.continued
                    self.chain.remember(response.ident, in_prompt)
                exchange.observer = response.reader
                exchange.overhead += time.perf_counter() - started
                self.relay.ledger.finish(exchange)
            else:
                exchange.overhead += time.perf_counter() - started
        if self.draining and not self.inflight:
            self._closing("shutdown")
            self.relay.spawn(self._close_both(1001, b"toolslim is shutting down"))
            return True
        return False

    def _end_inflight(self) -> None:
        """Responses the connection ended before: the client's leaving, or the upstream's."""
        while self.inflight:
            exchange = self.inflight.popleft().exchange
            if self.closed_by == "client":
                exchange.disconnected = True
            elif self.closed_by == "shutdown":  # the grace ended with it in flight
                exchange.cut_by_shutdown = True
            else:
                exchange.failure = "reset"
                exchange.status = 502
            self.relay.ledger.finish(exchange)


def event_type(data: bytes) -> bytes | None:
    """The `type` of a JSON object message, or None for anything else."""
    if (first := _FIRST_TYPE.match(data)) is not None:
        return first.group(1)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    return kind.encode() if isinstance(kind, str) else None


def _error_status(data: bytes) -> int:
    """An `error` event's HTTP status (the Responses WebSocket sends one), else 400."""
    try:
        status = orjson.loads(data).get("status")
    except (orjson.JSONDecodeError, AttributeError):
        return 400
    return status if type(status) is int and 400 <= status <= 599 else 400


def _reason(extra: object) -> bytes:
    """A received close frame's reason (a message's `extra`), to send on."""
    return extra.encode() if isinstance(extra, str) else b""


@dataclass(eq=False)
class Relay:
    """Everything the WebSocket path needs, made once the app runs (see app._serving)."""

    settings: Settings
    stats: Stats
    session: ClientSession  # its own: the status check above applies to upgrades only
    ledger: Ledger
    transform: Transform  # the one HTTP bodies go through
    watchdogs: Watchdogs  # the one HTTP waits are held by
    connections: set[RelayedWebSocket] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Relay one upgrade: the upstream first, then the client; the proxy never answers 500."""
        route = route_request(request.raw_path, request.headers, self.settings)
        try:
            return await self._relay(request, route)
        except Exception:
            log.exception("toolslim failed on the WebSocket %s", route.target.partition("?")[0])
            return error_response(route, 502, "toolslim failed to relay this WebSocket")

    async def _relay(self, request: web.Request, route: Route) -> web.StreamResponse:
        settings = self.settings
        if not settings.websocket:
            self.stats.record_websocket_refused()
            if self.stats.websockets_refused == 1:  # the advisory's one WARNING, at the first
                fix = advice.FIX["websocket_disabled"]
                log.warning("advice websocket_disabled (%s): %s", route.api, fix)
            return upgrade_required(
                route, "WebSockets are turned off on this toolslim (websocket: false); use HTTP"
            )
        opened = await self._open_upstream(request, route)
        if isinstance(opened, web.StreamResponse):
            return opened
        upstream = opened
        protocols = (upstream.protocol,) if upstream.protocol else ()
        client = web.WebSocketResponse(
            protocols=protocols,
            compress=True,  # accepted when the client offers it: negotiated per leg
            autoclose=False,
            autoping=False,
            max_msg_size=settings.max_body_bytes,
            timeout=_CLOSE_WAIT,
            decode_text=False,
        )
        try:
            await client.prepare(request)
        except (ConnectionError, web.HTTPException):
            await upstream.close(code=1001)
            return client
        connection = RelayedWebSocket(self, route, request, client, upstream)
        self.connections.add(connection)
        self.stats.websocket_opened()
        closed_by: ClosedBy = "error"
        try:
            closed_by = await connection.run()
        finally:
            self.connections.discard(connection)
            self.stats.websocket_closed(connection.closed_by or closed_by)
        return client

    async def _open_upstream(
        self, request: web.Request, route: Route
    ) -> ClientWebSocketResponse[Literal[False]] | web.StreamResponse:
        """The upstream's WebSocket, or the answer the client gets instead."""
        headers = request.headers
        watchdog = self.watchdogs.watch()
        try:
            with watchdog.within(self.settings.timeouts.response_headers):
                return await self.session.ws_connect(
                    websocket_url(route),
                    proxy=route.upstream.proxy,
                    headers=upstream_headers(headers),
                    protocols=offered_protocols(headers),
                    compress=15 if offers_deflate(headers) else 0,
                    autoclose=False,
                    autoping=False,
                    max_msg_size=0,  # the upstream's messages are relayed whatever their size
                    timeout=ClientWSTimeout(ws_receive=None, ws_close=_CLOSE_WAIT),
                    decode_text=False,
                )
        except Stalled:
            return self._failed(route, HeadersTimeout())
        except Refused as refused:
            return self._refused(route, refused)
        except WSServerHandshakeError as exc:  # 101, but not a WebSocket handshake
            self.stats.record_upstream_error("reset")
            why = f"the {route.upstream.name} upstream's WebSocket handshake was invalid"
            return error_response(route, 502, f"{why} ({exc.message})")
        except (ClientError, OSError, TimeoutError) as exc:
            return self._failed(route, exc)
        finally:
            self.watchdogs.release(watchdog)

    def _failed(self, route: Route, exc: BaseException) -> web.Response:
        translated = translate(exc, route.upstream.name, self.settings.timeouts)
        self.stats.record_upstream_error(translated.kind)
        return error_response(route, translated.status, translated.message)

    def _refused(self, route: Route, refused: Refused) -> web.StreamResponse:
        status = refused.status
        if status in _RELAYED_REFUSALS or status >= 500:
            response = web.Response(status=status, body=refused.body)
            response.headers.extend(refused.headers)
            drop_hop_by_hop(response.headers, HOP_BY_HOP | {"content-length"})
            return response
        return upgrade_required(
            route,
            f"the {route.upstream.name} upstream does not accept a WebSocket here"
            f" (it answered {status}); use HTTP",
        )

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run a close the relay owns (awaited by `wait_closed`), not fire-and-forget."""
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def drain(self) -> None:
        """Shutdown began: each connection closes once its response in flight has finished."""
        for connection in list(self.connections):
            connection.drain()

    async def wait_closed(self) -> None:
        """The closes the relay started, done (at cleanup)."""
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=_CLOSE_WAIT)
