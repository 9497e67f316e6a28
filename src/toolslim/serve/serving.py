"""Runs the proxy as a process: `serve(settings)` listens through the connection limits until
SIGTERM, then stops in order (see `shutdown`), in this process or in each of `workers` gunicorn
workers alike; the log's flush and the collector's settings belong to the process, not to the
app.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from toolslim.config.settings import Settings
from toolslim.observe import fleet, logs
from toolslim.observe.ledger.state import StateError, StateFile, open_base
from toolslim.proxy.admin import ADMIN
from toolslim.proxy.app import make_app
from toolslim.proxy.limits import CONNECTION_LIMITS
from toolslim.serve import shutdown

log = logging.getLogger("toolslim.proxy.app")  # one name for the lifecycle lines of app and process


def serve(settings: Settings) -> int:
    """Run the proxy until SIGTERM/SIGINT, then drain in-flight requests; the exit status.

    With `workers` above 1, gunicorn's arbiter runs that many worker processes on the one
    listening socket (see docs/workers.md); otherwise this process serves alone.
    """
    log_lines = logs.configure(settings.log_level)
    uvloop = settings.event_loop == "uvloop"
    try:  # a bad state file stops the start with its reason: a restart would meet it again
        state, base = open_base(settings.state_file)
    except StateError as exc:
        log.error("%s", exc)
        log_lines.flush()
        return 2
    if settings.workers > 1:
        # Imported only here: gunicorn is needed by nothing else.
        from toolslim.serve import workers

        if state is not None:
            state.close()  # each worker writes through its own connection
        return workers.serve(
            settings,
            functools.partial(worker_serving, settings, log_lines),
            log_lines,
            uvloop=uvloop,
            ready=lambda addresses: _announce(settings, addresses, log_lines),
            base=None if base is None else fleet.base_state(settings, base),
        )
    loop_factory = None
    if uvloop:
        import uvloop as module

        loop_factory = module.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(_serve_alone(settings, log_lines, state, base))


def _runner(app: web.Application) -> web.AppRunner:
    return web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,  # one line per request comes from the Ledger instead
        # aiohttp is left only the cutting once the grace is over: the limits do the waiting.
        shutdown_timeout=shutdown.CUT_SECONDS,
    )


class Serving:
    """One serving process (alone, or one of the workers): its app and runner, listening
    through the app's connection limits, and its stop in order (`shutdown.drain`)."""

    def __init__(
        self,
        settings: Settings,
        log_lines: logs.BatchedLines,
        board: fleet.Board | None = None,
        *,
        state: StateFile | None = None,
        base: dict[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        self.app = make_app(settings, log_lines, board, state=state, base=base)
        self.app.cleanup_ctx.insert(0, lambda app: _flushing(log_lines))  # out last
        self.runner = _runner(self.app)
        self.connections = self.app[CONNECTION_LIMITS]

    async def start(self) -> None:
        """Set the app up (its resources open), then tune the collector for requests."""
        await self.runner.setup()
        tune_gc()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(logs.LoopErrors(log, logs.Throttle(log)))

    async def listen(self, sock: socket.socket | None = None) -> None:
        """Accept on the settings' host and port, or on a listening `sock` (a worker's
        share of gunicorn's), through the connection limits."""
        assert self.runner.server is not None
        settings = self.settings
        await self.connections.listen(
            self.runner.server, settings.host, settings.port, sock=sock, backlog=1024
        )

    async def stop(self) -> None:
        """The shutdown sequence (see `shutdown`), from the first signal on."""
        settings = self.settings
        log.info(
            "shutting down: /readyz answers 503; accepting for %g s more, then requests in "
            "flight get up to %g s",
            settings.shutdown_delay,
            settings.shutdown_grace,
        )
        await shutdown.drain(
            self.runner,
            self.connections,
            delay=settings.shutdown_delay,
            grace=settings.shutdown_grace,
            not_ready=functools.partial(_set_not_ready, self.app),
        )


def worker_serving(settings: Settings, log_lines: logs.BatchedLines, folder: Path) -> Serving:
    """What one worker serves (gunicorn's worker starts it, listens on its sockets and stops
    it as one process does)."""
    state = StateFile(settings.state_file) if settings.state_file else None
    return Serving(settings, log_lines, fleet.Board(folder), state=state)


async def _flushing(log_lines: logs.BatchedLines) -> AsyncIterator[None]:
    task = asyncio.create_task(flush_every_second(log_lines))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    log_lines.flush()


async def _serve_alone(
    settings: Settings,
    log_lines: logs.BatchedLines,
    state: StateFile | None,
    base: dict[str, Any] | None,
) -> int:
    serving = Serving(settings, log_lines, state=state, base=base)
    await serving.start()
    try:
        await serving.listen()
    except OSError as exc:
        log.error("cannot listen on %s:%s: %s", settings.host, settings.port, exc.strerror)
        serving.connections.close()
        await serving.runner.cleanup()
        return 1
    signals = shutdown.Signals(asyncio.get_running_loop(), log_lines.flush)
    addresses = serving.connections.addresses
    _announce(settings, [f"http://{a[0]}:{a[1]}" for a in addresses], log_lines)
    try:
        await signals.received.wait()
        log_lines.flush()
        await serving.stop()
    finally:
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


async def flush_every_second(log_lines: logs.BatchedLines) -> None:
    """A quiet server's last log lines go out within about a second."""
    while True:
        await asyncio.sleep(logs.FLUSH_SECONDS)
        log_lines.flush()


# Container allocations the young generation takes before a collection. The default, 700,
# is crossed every few dozen requests by the objects of the requests in flight alone, and
# each collection walks them all. A request's objects are freed by reference counting when
# it ends, so only reference cycles (garbage the collector exists for) add up to this.
_GC_YOUNG_THRESHOLD: Final = 10_000


def tune_gc() -> None:
    """Collect what start-up left, move every surviving object (modules, the tokenizer, the
    app) out of the collector's sight for good, and raise the young threshold, so that
    collections walk only what requests make."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG_THRESHOLD, middle, old)
