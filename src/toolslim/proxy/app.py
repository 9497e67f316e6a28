"""The only place the rooms are wired together: `make_app(settings)` builds the proxy
(`serving` runs it as a process).

Wiring only: the request path is `flow` (one per request, built from `forward`'s Forwarder),
the transform step both transports call `transform`, the admin endpoints `admin`, counting
`exchange`, timeouts `watchdog`, client connections `limits`, buffered bytes `budget`, heavy
transforms `offload`, the stop `shutdown`, the workers' shared totals `fleet`, their processes
`workers`. Resources (the upstream session, the token and worker threads, the capture writer)
open and close with the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import (
    ClientResponse,
    ClientSession,
    ClientTimeout,
    DummyCookieJar,
    TCPConnector,
    web,
)
from aiohttp.typedefs import Handler, Middleware

from toolslim.config.settings import Settings
from toolslim.core.pipeline import Pipeline
from toolslim.observe import capture, drift, fleet, logs, metrics, sessions
from toolslim.observe.exchange import Ledger
from toolslim.observe.ledger import book
from toolslim.observe.ledger.book import Export, ToolLedger
from toolslim.observe.ledger.prices import Prices
from toolslim.observe.ledger.state import StateFile, keeping
from toolslim.observe.stats import Stats
from toolslim.proxy import admin
from toolslim.proxy import budget as buffers
from toolslim.proxy.admin import ADMIN, Admin
from toolslim.proxy.flow import Flow
from toolslim.proxy.forward import Forwarder, refusal
from toolslim.proxy.limits import CONNECTION_LIMITS, ClientLimits, ConnectionLimits
from toolslim.proxy.offload import Offload
from toolslim.proxy.transform import Transform
from toolslim.proxy.watchdog import Watchdogs
from toolslim.proxy.websocket import Relay, is_upgrade, refuse_unless_upgraded
from toolslim.wire import routing

log = logging.getLogger("toolslim.proxy.app")

# The longest a wait outlasts its limit before it is cut: a quarter of the shortest limit,
# and never more than this (seconds).
_WATCHDOG_PERIOD: Final = 1.0
_CAPTURE_FILES: Final = 8  # capture_max_bytes bounds the directory: 8 files, each 1/8 of it
_DRAIN_COUNTS: Final = 10.0  # seconds the last token counts get at cleanup


@dataclass(slots=True)
class ProxyState:
    """The app's state, made with the app: what the request path is built from once the app
    runs, and what tests and the admin endpoints read."""

    settings: Settings
    pipeline: Pipeline
    stats: Stats
    capture: capture.Recorder | None  # None records nothing
    log_lines: logs.BatchedLines | None  # serving: where each request's line goes directly
    drift_store: drift.Sessions | None  # a worker's: the host's sessions; None: this process's
    pending: set[asyncio.Future[Any]] = field(default_factory=set)


FORWARDING: Final = web.AppKey("forwarding", ProxyState)


class Handlers:
    """The request path's two handlers, made once the app runs (they need the upstream
    sessions, which exist only while it runs): the catch-all route finds them here."""

    __slots__ = ("forwarder", "relay")
    forwarder: Forwarder
    relay: Relay


HANDLERS: Final = web.AppKey("handlers", Handlers)


async def _enter(handlers: Handlers, request: web.Request) -> web.StreamResponse:
    """Every request that is not an admin one: a WebSocket upgrade, or HTTP; forwarded
    faithfully or not at all (routing.refusal)."""
    if (reason := routing.refusal(request.raw_path, request.headers.items())) is not None:
        return refusal(400, reason)
    if is_upgrade(request):
        return await handlers.relay.handle(request)
    return await Flow(handlers.forwarder, request).run()


def grace_over(app: web.Application) -> None:
    """The shutdown grace is over: the HTTP requests still in flight are cut next, and are
    counted (`connections.closed.shutdown`) and logged as cut by the shutdown, not as their
    clients' leaving. The process's shutdown calls this just before `runner.cleanup()`."""
    handlers = app[HANDLERS]
    if hasattr(handlers, "forwarder"):  # the app runs
        handlers.forwarder.grace_over = True


def _pipeline(settings: Settings) -> Pipeline:
    """A pipeline as the settings declare it: one for the event loop, one for the worker
    thread (the memo is not thread-safe, see offload); both give the same bytes."""
    return Pipeline(
        settings.pipeline,
        memo_size=settings.memo_size,
        memo_bytes=settings.memo_bytes,
        options=settings.components,
    )


def make_app(
    settings: Settings,
    log_lines: logs.BatchedLines | None = None,
    board: fleet.Board | None = None,
    *,
    state: StateFile | None = None,
    base: Export | None = None,
) -> web.Application:
    """The proxy application: admin routes, the dashboard, and everything else forwarded.

    `log_lines`, the handler `logs.configure` set up, takes each request's line directly;
    without it the line goes through `logging`. With a `board`, the app is one of several
    workers: it publishes its counters there, and /stats and /metrics answer all of theirs.
    With a `state` file the tool ledger's counts are written to it as they come; `base` is
    what it held at start (for one process; several workers find it on the board).
    """
    pipeline = _pipeline(settings)
    pending: set[asyncio.Future[Any]] = set()
    recorder = None
    if settings.capture_dir is not None:
        recorder = capture.Recorder(
            settings.capture_dir,
            max_bytes=max(1, settings.capture_max_bytes // _CAPTURE_FILES),
            keep_files=_CAPTURE_FILES,
        )
    tools = ToolLedger(
        read_multiplier=settings.cache_read_multiplier,
        write_multiplier=settings.cache_write_multiplier,
        prices=Prices(settings.prices),
        base=base,
        max_bytes=settings.memo_bytes // book.MEMO_SHARE,
    )
    stats = Stats(
        settings.pipeline,
        tools=tools,
        unused_after=(settings.ledger_min_requests, settings.ledger_min_sessions),
        tool_metrics=settings.ledger_tool_metrics,
        cache_read_multiplier=settings.cache_read_multiplier,
        cache_write_multiplier=settings.cache_write_multiplier,
        memo_gauges=pipeline.memo_gauges,
        memo_byte_gauges=pipeline.memo_byte_gauges,
        tokens_pending=lambda: len(pending),
        capture_counts=None if recorder is None else functools.partial(_capture_counts, recorder),
    )
    # With a board, the app is one of several workers: the buffer budget and the drift
    # sessions are the host's, shared with the others in the board's directory.
    host_budget = drift_store = None
    if board is not None:
        host_budget = buffers.HostBudget(board.folder / buffers.FILE, settings.max_buffered_bytes)
        drift_store = sessions.opened(board.folder / sessions.FILE, settings.drift_max_sessions)
    # Connections come in through the limits when `serve` listens (a test server bypasses
    # them, and the middleware's marking then does nothing).
    connections = ConnectionLimits(ClientLimits.of(settings), stats, host_budget)
    stats.connection_gauges = connections.gauges
    # The handlers rely on both: request bodies arrive as sent (a gzip body is forwarded
    # byte-identical unless changed), and a client that goes away cancels its handler at once.
    app = web.Application(
        handler_args={
            "auto_decompress": False,
            "handler_cancellation": True,
            **connections.handler_args(),
        },
        # One middleware: each costs every request a layer of coroutines.
        middlewares=[_front(connections)],
    )
    if recorder is not None:
        app.on_cleanup.append(_close_capture)
    app[FORWARDING] = ProxyState(
        settings, pipeline, stats, recorder, log_lines, drift_store, pending
    )
    app[CONNECTION_LIMITS] = connections
    if host_budget is not None:
        app.on_cleanup.append(lambda app: _close_shared(host_budget, drift_store))
    if board is None:
        app[ADMIN] = Admin(stats, metrics.make_registry(stats), settings.admin_token)
    else:
        member = fleet.Member(stats, board)
        registry = admin.host_registry(stats, member.host)
        app[ADMIN] = Admin(stats, registry, settings.admin_token, host=member.host)
        # First in, so last out: the final publish comes after the ledger's last counts.
        app.cleanup_ctx.append(lambda app: _publishing(member))
    if state is not None:  # in before the ledger: out after its last counts
        app.cleanup_ctx.append(lambda app: keeping(tools, state))
    handlers = app[HANDLERS] = Handlers()
    app.cleanup_ctx.append(_serving)
    app.on_shutdown.append(_not_ready)
    app.on_shutdown.append(_drain_websockets)
    admin.add_routes(app)
    app.router.add_route("*", "/{tail:.*}", functools.partial(_enter, handlers))
    return app


async def _serving(app: web.Application) -> AsyncIterator[None]:
    """The upstream sessions, the watchdogs, the ledger and the worker thread, for as long as
    the app runs."""
    state = app[FORWARDING]
    settings = state.settings
    connector = TCPConnector(limit=0, limit_per_host=settings.pool_size, ttl_dns_cache=300)
    # sock_connect only: waiting for a pooled connection counts against response_headers,
    # and the idle gap between chunks is enforced per read by the watchdog (a sock_read
    # here would also cut the wait for response headers short).
    timeout = ClientTimeout(total=None, sock_connect=settings.timeouts.connect)
    loop = asyncio.get_running_loop()
    limits = settings.timeouts
    shortest = min(limits.response_headers, limits.idle_chunk, limits.client_body_idle)
    watchdogs = Watchdogs(loop, min(_WATCHDOG_PERIOD, shortest / 4))
    ledger = Ledger(
        state.stats,
        loop,
        state.pending,
        state.log_lines,
        drift_sessions=settings.drift_max_sessions,
        drift_kept_bytes=settings.memo_bytes // drift.KEPT_SHARE,
        drift_store=state.drift_store,
    )
    # The worker thread's own pipeline: the memo is not thread-safe (see offload). The loop's
    # learns the catalogues it meets, so that a large body's memo hit needs no worker.
    offload = Offload(_pipeline(settings))
    offload.pipeline.tell()
    transform = Transform(
        state.pipeline,
        ledger,
        state.capture,
        settings.max_body_bytes,
        settings.max_catalogue_bytes,
        offload,
    )
    connections = app[CONNECTION_LIMITS]
    handlers = app[HANDLERS]
    async with (
        _session(connector, timeout) as session,
        # WebSockets get a session of their own: its status check keeps an upstream's
        # refusal whole for the client (see websocket.refuse_unless_upgraded).
        _session(
            TCPConnector(limit=0, ttl_dns_cache=300),
            timeout,
            raise_for_status=refuse_unless_upgraded,
        ) as websockets,
    ):
        handlers.forwarder = Forwarder(
            settings,
            state.pipeline,
            state.stats,
            session,
            watchdogs,
            ledger,
            transform,
            limits=connections.limits,
            budget=connections.budget,
            offload=offload,
        )
        handlers.relay = Relay(settings, state.stats, websockets, ledger, transform, watchdogs)
        yield
        await handlers.relay.wait_closed()
    watchdogs.stop()
    offload.close()
    await ledger.drain(_DRAIN_COUNTS)


async def _publishing(member: fleet.Member) -> AsyncIterator[None]:
    """The worker's counters on the board every PUBLISH_SECONDS while they change, and once
    more when it stops."""

    async def every() -> None:
        while True:
            await asyncio.sleep(fleet.PUBLISH_SECONDS)
            try:
                member.publish()
            except OSError as exc:  # a full or vanished directory must not stop the worker
                log.warning("cannot publish this worker's counters: %s", exc)

    task = asyncio.create_task(every())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    with contextlib.suppress(OSError):
        member.publish()


def _session(
    connector: TCPConnector,
    timeout: ClientTimeout,
    raise_for_status: bool | Callable[[ClientResponse], Awaitable[None]] = False,
) -> ClientSession:
    """An upstream session: bytes as they are, no cookies, no headers of its own."""
    return ClientSession(
        connector=connector,
        timeout=timeout,
        auto_decompress=False,
        cookie_jar=DummyCookieJar(),  # one session serves every client: never keep cookies
        skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"),
        trust_env=False,
        raise_for_status=raise_for_status,
    )


async def _close_shared(budget: buffers.HostBudget, store: sessions.SharedSessions | None) -> None:
    budget.close()
    if store is not None:
        store.close()


def _capture_counts(recorder: capture.Recorder) -> tuple[int, int, int]:
    return recorder.written, recorder.dropped, recorder.errors


async def _close_capture(app: web.Application) -> None:
    if (recorder := app[FORWARDING].capture) is not None:
        await asyncio.get_running_loop().run_in_executor(None, recorder.close)


async def _not_ready(app: web.Application) -> None:
    app[ADMIN].ready = False


async def _drain_websockets(app: web.Application) -> None:
    """Open WebSockets close with 1001 once their response in flight has finished."""
    app[HANDLERS].relay.drain()


def _front(connections: ConnectionLimits) -> Middleware:
    """The app's middleware: the connection is marked busy while its request is handled
    (limits.ConnectionLimits), and forward-proxy requests are refused before routing sees
    them: never an open proxy."""

    @web.middleware
    async def front(request: web.Request, handler: Handler) -> web.StreamResponse:
        connection = connections.handling(request)
        try:
            if request.method == "CONNECT":  # authority-form: matches no route, would be a 404
                return refusal(405, "toolslim is a reverse proxy: CONNECT is not supported")
            if not request.raw_path.startswith("/"):  # absolute-form: GET http://host/ HTTP/1.1
                return refusal(400, "toolslim is a reverse proxy: send origin-form paths (/v1/...)")
            return await handler(request)
        finally:
            if connection is not None:
                connections.handled(connection)

    return front
