"""The only place the rooms are wired together: `make_app(settings)` builds the proxy,
`serve(settings)` runs it until SIGTERM, in this process or on `workers` processes.

Wiring only: the request path is `forward`, the admin endpoints `admin`, counting `exchange`,
timeouts `watchdog`, client connections `limits` (the door), heavy transforms `offload`, the
stop `shutdown`, the workers' shared totals `fleet`, their processes `workers`. Resources (the
upstream session, the token and worker threads, the capture writer) open and close with the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from aiohttp import (
    ClientResponse,
    ClientSession,
    ClientTimeout,
    DummyCookieJar,
    TCPConnector,
    web,
)
from aiohttp.typedefs import Handler

from toolslim import admin, capture, fleet, logs, metrics, routing, shutdown
from toolslim.admin import ADMIN, Admin
from toolslim.config import Settings
from toolslim.exchange import Ledger
from toolslim.forward import Forwarder, refusal
from toolslim.limits import DOOR, ClientLimits, Door
from toolslim.offload import Offload
from toolslim.pipeline import Pipeline
from toolslim.stats import Stats
from toolslim.watchdog import Patrol
from toolslim.websocket import Relay, is_upgrade, refuse_unless_upgraded

log = logging.getLogger(__name__)

# The longest a wait on the upstream outlasts its limit before it is cut: a quarter of the
# shorter limit, and never more than this (seconds).
_PATROL_PERIOD: Final = 1.0
_CAPTURE_FILES: Final = 8  # capture_max_bytes bounds the directory: 8 files, each 1/8 of it
_DRAIN_COUNTS: Final = 10.0  # seconds the last token counts get at cleanup


@dataclass(slots=True)
class Forwarding:
    """The app's state, made with the app: what the request path is built from once the app
    runs, and what tests and the admin endpoints read."""

    settings: Settings
    pipeline: Pipeline
    stats: Stats
    capture: capture.Recorder | None  # None records nothing
    log_lines: logs.BatchedLines | None  # serving: where each request's line goes directly
    pending: set[asyncio.Future[dict[str, tuple[int, int]]]] = field(default_factory=set)


FORWARDING: Final = web.AppKey("forwarding", Forwarding)


class _Entrance:
    """Where the catch-all route finds the Forwarder and the Relay the running app made (they
    need the upstream sessions, which exist only while the app runs)."""

    __slots__ = ("forwarder", "relay")
    forwarder: Forwarder
    relay: Relay


async def _enter(entrance: _Entrance, request: web.Request) -> web.StreamResponse:
    """Every request that is not an admin one: a WebSocket upgrade, or HTTP; forwarded
    faithfully or not at all (routing.refusal)."""
    if (reason := routing.refusal(request.raw_path, request.headers.items())) is not None:
        return refusal(400, reason)
    if is_upgrade(request):
        return await entrance.relay.handle(request)
    return await entrance.forwarder.handle(request)


def make_app(
    settings: Settings,
    log_lines: logs.BatchedLines | None = None,
    board: fleet.Board | None = None,
) -> web.Application:
    """The proxy application: admin routes, the dashboard, and everything else forwarded.

    `log_lines`, the handler `logs.configure` set up, takes each request's line directly;
    without it the line goes through `logging`. With a `board`, the app is one of several
    workers: it publishes its counters there, and /stats and /metrics answer all of theirs.
    """
    pipeline = Pipeline(
        settings.pipeline, memo_size=settings.memo_size, options=settings.components
    )
    pending: set[asyncio.Future[dict[str, tuple[int, int]]]] = set()
    recorder = None
    if settings.capture_dir is not None:
        recorder = capture.Recorder(
            settings.capture_dir,
            max_bytes=max(1, settings.capture_max_bytes // _CAPTURE_FILES),
            keep_files=_CAPTURE_FILES,
        )
    stats = Stats(
        settings.pipeline,
        cache_read_multiplier=settings.cache_read_multiplier,
        cache_write_multiplier=settings.cache_write_multiplier,
        memo_gauges=pipeline.memo_gauges,
        tokens_pending=lambda: len(pending),
        connection_gauges=lambda: door.gauges(),
        capture_counts=None if recorder is None else functools.partial(_capture_counts, recorder),
    )
    # Connections come in through the door when `serve` listens (a test server bypasses it,
    # and the door's middleware then does nothing).
    door = Door(ClientLimits.of(settings), stats)
    # The handlers rely on both: request bodies arrive as sent (a gzip body is forwarded
    # byte-identical unless changed), and a client that goes away cancels its handler at once.
    app = web.Application(
        handler_args={
            "auto_decompress": False,
            "handler_cancellation": True,
            **door.handler_args(),
        },
        middlewares=[door.middleware, _reverse_proxy_only],
    )
    if recorder is not None:
        app.on_cleanup.append(_close_capture)
    app[FORWARDING] = Forwarding(settings, pipeline, stats, recorder, log_lines, pending)
    app[DOOR] = door
    if board is None:
        app[ADMIN] = Admin(stats, metrics.make_registry(stats), settings.admin_token)
    else:
        member = fleet.Member(stats, board)
        registry = admin.host_registry(stats, member.host)
        app[ADMIN] = Admin(stats, registry, settings.admin_token, host=member.host)
        # First in, so last out: the final publish comes after the ledger's last counts.
        app.cleanup_ctx.append(lambda app: _publishing(member))
    entrance = _Entrance()
    app.cleanup_ctx.append(lambda app: _serving(app, entrance))
    app.on_shutdown.append(_not_ready)
    app.on_shutdown.append(lambda app: _drain_websockets(entrance))
    admin.add_routes(app)
    app.router.add_route("*", "/{tail:.*}", functools.partial(_enter, entrance))
    return app


async def _serving(app: web.Application, entrance: _Entrance) -> AsyncIterator[None]:
    """The upstream session, the patrol and the ledger, for as long as the app runs."""
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
    patrol = Patrol(loop, min(_PATROL_PERIOD, shortest / 4))
    ledger = Ledger(
        state.stats,
        loop,
        state.pending,
        state.log_lines,
        drift_sessions=settings.drift_max_sessions,
    )
    # The worker thread's own pipeline: the memo is not thread-safe (see offload).
    offload = Offload(
        Pipeline(settings.pipeline, memo_size=settings.memo_size, options=settings.components)
    )
    door = app[DOOR]
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
        entrance.forwarder = Forwarder(
            settings,
            state.pipeline,
            state.stats,
            session,
            patrol,
            ledger,
            state.capture,
            limits=door.limits,
            budget=door.budget,
            offload=offload,
            max_catalogue=settings.max_catalogue_bytes,
        )
        entrance.relay = Relay(
            settings, state.pipeline, state.stats, websockets, ledger, state.capture
        )
        yield
        await entrance.relay.wait_closed()
    patrol.stop()
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


def _capture_counts(recorder: capture.Recorder) -> tuple[int, int, int]:
    return recorder.written, recorder.dropped, recorder.errors


async def _close_capture(app: web.Application) -> None:
    if (recorder := app[FORWARDING].capture) is not None:
        await asyncio.get_running_loop().run_in_executor(None, recorder.close)


async def _not_ready(app: web.Application) -> None:
    app[ADMIN].ready = False


async def _drain_websockets(entrance: _Entrance) -> None:
    """Open WebSockets close with 1001 once their response in flight has finished."""
    entrance.relay.drain()


@web.middleware
async def _reverse_proxy_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse forward-proxy requests before routing sees them: never an open proxy."""
    if request.method == "CONNECT":  # authority-form: matches no route, would be a 404
        return refusal(405, "toolslim is a reverse proxy: CONNECT is not supported")
    if not request.raw_path.startswith("/"):  # absolute-form: GET http://host/ HTTP/1.1
        return refusal(400, "toolslim is a reverse proxy: send origin-form paths (/v1/...)")
    return await handler(request)


def serve(settings: Settings) -> int:
    """Run the proxy until SIGTERM/SIGINT, then drain in-flight requests; the exit status.

    With `workers` above 1, gunicorn's arbiter runs that many worker processes on the one
    listening socket (see docs/workers.md); otherwise this process serves alone.
    """
    log_lines = logs.configure(settings.log_level)
    uvloop = settings.event_loop == "uvloop"
    if settings.workers > 1:
        # Imported only here: gunicorn is needed by nothing else.
        from toolslim import workers

        return workers.serve(
            settings,
            functools.partial(_worker, settings, log_lines),
            log_lines,
            uvloop=uvloop,
            ready=lambda addresses: _announce(settings, addresses, log_lines),
        )
    loop_factory = None
    if uvloop:
        import uvloop as module

        loop_factory = module.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(_serve(settings, log_lines))


def _runner(app: web.Application, shutdown_timeout: float) -> web.AppRunner:
    return web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,  # one line per request comes from the Ledger instead
        shutdown_timeout=shutdown_timeout,
    )


async def _worker(settings: Settings, log_lines: logs.BatchedLines, folder: Path) -> web.AppRunner:
    """One worker's runner (gunicorn's worker sets it up and serves the shared socket)."""
    app = make_app(settings, log_lines, fleet.Board(folder))
    app.cleanup_ctx.insert(0, lambda app: _flushing(log_lines))  # out last: the drain's lines
    app.on_startup.append(lambda app: _tuned_gc())
    return _runner(app, settings.shutdown_grace)  # gunicorn's worker waits the grace itself


async def _tuned_gc() -> None:
    _tune_gc()


async def _flushing(log_lines: logs.BatchedLines) -> AsyncIterator[None]:
    task = asyncio.create_task(_flush_every_second(log_lines))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    log_lines.flush()


async def _serve(settings: Settings, log_lines: logs.BatchedLines) -> int:
    app = make_app(settings, log_lines)
    # aiohttp is left only the cutting once the grace is over: the door does the waiting.
    runner = _runner(app, shutdown.CUT_SECONDS)
    await runner.setup()
    _tune_gc()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(logs.LoopErrors(log, logs.Throttle(log)))
    door = app[DOOR]
    assert runner.server is not None
    try:
        await door.listen(runner.server, settings.host, settings.port, backlog=1024)
    except OSError as exc:
        log.error("cannot listen on %s:%s: %s", settings.host, settings.port, exc.strerror)
        door.close()
        await runner.cleanup()
        return 1
    signals = shutdown.Signals(loop, log_lines.flush)
    _announce(settings, [f"http://{a[0]}:{a[1]}" for a in door.addresses], log_lines)
    flushing = asyncio.create_task(_flush_every_second(log_lines))
    try:
        await signals.received.wait()
        log.info(
            "shutting down: /readyz answers 503; accepting for %g s more, then requests in "
            "flight get up to %g s",
            settings.shutdown_delay,
            settings.shutdown_grace,
        )
        log_lines.flush()
        await shutdown.drain(
            runner,
            door,
            delay=settings.shutdown_delay,
            grace=settings.shutdown_grace,
            not_ready=functools.partial(_set_not_ready, app),
        )
    finally:
        flushing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flushing
        log_lines.flush()
    signals.close()
    return 0


def _set_not_ready(app: web.Application) -> None:
    app[ADMIN].ready = False


def _announce(settings: Settings, addresses: list[str], log_lines: logs.BatchedLines) -> None:
    workers = f"; workers: {settings.workers}" if settings.workers > 1 else ""
    log.info(
        "toolslim listening on %s; pipeline=[%s]; upstreams: %s%s",
        ", ".join(addresses),
        ",".join(settings.pipeline),
        ", ".join(f"{u.name}={u.url}" for u in settings.upstreams.values()),
        workers,
    )
    log_lines.flush()


async def _flush_every_second(log_lines: logs.BatchedLines) -> None:
    """A quiet server's last log lines go out within about a second."""
    while True:
        await asyncio.sleep(logs.FLUSH_SECONDS)
        log_lines.flush()


# Container allocations the young generation takes before a collection. The default, 700,
# is crossed every few dozen requests by the objects of the requests in flight alone, and
# each collection walks them all. A request's objects are freed by reference counting when
# it ends, so only reference cycles (garbage the collector exists for) add up to this.
_GC_YOUNG_THRESHOLD: Final = 10_000


def _tune_gc() -> None:
    """Collect what start-up left, move every surviving object (modules, the tokenizer, the
    app) out of the collector's sight for good, and raise the young threshold, so that
    collections walk only what requests make."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG_THRESHOLD, middle, old)
