"""Serving on several processes: gunicorn's arbiter runs aiohttp's worker class on one
listening socket, and replaces a worker that dies. The only importer of gunicorn.

Each worker serves its share of the socket as one process serves its own: through the same
connection limits, client timeouts and shutdown sequence (`Service`). The workers meet in a
directory made here: their counters (see `fleet.Board`), the host's buffer budget
(`budget.HostBudget`) and drift sessions (`sessions.SharedSessions`); the master folds the
counters of each worker that exits into it, frees its buffered bytes, and removes the
directory at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Final, Protocol

from aiohttp.worker import GunicornUVLoopWebWorker, GunicornWebWorker
from gunicorn import glogging
from gunicorn.app.base import BaseApplication
from gunicorn.config import KNOWN_SETTINGS

from toolslim.config.settings import Settings
from toolslim.observe import fleet, logs, sessions
from toolslim.proxy import budget


class Service(Protocol):
    """What a worker serves (`serving.Serving`): started, listening on each of its sockets,
    then stopped in order once it is told to stop."""

    async def start(self) -> None: ...
    async def listen(self, sock: socket.socket | None = None) -> None: ...
    async def stop(self) -> None: ...


Factory = Callable[[Path], Service]  # the workers' shared folder -> what a worker serves

# A worker still running this long after shutdown_delay + shutdown_grace is killed: its
# requests had the grace, and what follows them (the app's cleanup) needs less.
CLEANUP_SECONDS: Final = 15


class Worker(GunicornWebWorker):
    """aiohttp's worker, serving its sockets through the app's connection limits and stopping
    as one process does (aiohttp's own serves them bare and stops in its own way), from the
    moment SIGTERM arrives (aiohttp's own notices it at its next one-second tick)."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.handle_quit(sig, frame)  # the graceful stop, woken now

    async def _run(self) -> None:
        """aiohttp's loop (tell the arbiter it lives every second; stop when told or when the
        master is gone), around `Service` instead of aiohttp's own sites."""
        service: Service = await self.wsgi()
        await service.start()
        for listener in self.sockets:
            await service.listen(listener.sock)  # taken over: closed when it stops listening
        self.booted = True  # a failure before this is a boot error: the arbiter halts
        pid = os.getpid()
        while self.alive:
            self.notify()
            if pid == os.getpid() and self.ppid != os.getppid():
                self.alive = False
                self.log.info("Parent changed, shutting down: %s", self)
            else:
                await self._wait_next_notify()
        alive = asyncio.create_task(self._notifying())  # the arbiter must not think it hangs
        try:
            await service.stop()
        finally:
            alive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await alive

    async def _notifying(self) -> None:
        while True:
            self.notify()
            await asyncio.sleep(1.0)


class UVLoopWorker(Worker, GunicornUVLoopWebWorker):
    """The same, on uvloop."""


class _Log(glogging.Logger):  # type: ignore[misc]
    """gunicorn's own lines (listening, worker booted or exited) through toolslim's handler,
    in its format, instead of a second handler and format of gunicorn's."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in list(self.error_log.handlers):
            self.error_log.removeHandler(handler)
        self.error_log.propagate = True


class _Arbiter(BaseApplication):  # type: ignore[misc]
    """gunicorn configured from a dict, loading one async service factory (no argv, no files)."""

    def __init__(self, options: dict[str, Any], load: Callable[[], Any]):
        self._options = options
        self._load = load
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Callable[[], Any]:
        return self._load


def address(settings: Settings) -> str:
    """gunicorn's spelling of the listening address (an IPv6 host in brackets)."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"{host}:{settings.port}"


def serve(
    settings: Settings,
    factory: Factory,
    log_lines: logs.BatchedLines,
    *,
    uvloop: bool,
    ready: Callable[[list[str]], None],
    base: fleet.State | None = None,
) -> int:
    """Run `settings.workers` workers, each serving `factory(folder)`, until SIGTERM (drain,
    then exit) or SIGINT (the same, sooner); the master's exit status. `ready` gets the
    listening addresses once the socket is bound; `base`, what the state file held at start,
    is counted once in the host's totals (each worker adds only its own counts to the file)."""
    master = os.getpid()
    folder = Path(tempfile.mkdtemp(prefix="toolslim-workers-"))
    board = fleet.Board(folder)
    budget.HostBudget.create(folder / budget.FILE)
    sessions.create(folder / sessions.FILE)
    if base is not None:
        board.put_base(base)

    async def load() -> Service:
        return factory(folder)

    def child_exit(server: Any, worker: Any) -> None:
        board.retire(worker.pid)
        budget.release(folder / budget.FILE, worker.pid)
        log_lines.flush()

    def flush(server: Any, worker: Any) -> None:
        # Before a fork, so a child never inherits lines still waiting; after it, for the
        # child's "Booting worker" line.
        log_lines.flush()

    def when_ready(server: Any) -> None:
        ready([str(listener) for listener in server.LISTENERS])
        log_lines.flush()

    options: dict[str, Any] = {
        "bind": [address(settings)],
        "workers": settings.workers,
        "worker_class": UVLoopWorker if uvloop else Worker,
        "graceful_timeout": (
            math.ceil(settings.shutdown_delay + settings.shutdown_grace) + CLEANUP_SECONDS
        ),
        "backlog": 1024,
        "accesslog": None,  # one line per request comes from each worker's Ledger
        "loglevel": settings.log_level,
        "logger_class": _Log,
        "proc_name": "toolslim",
        "pre_fork": flush,
        "post_fork": flush,
        "child_exit": child_exit,
        "when_ready": when_ready,
    }
    if any(setting.name == "control_socket_disable" for setting in KNOWN_SETTINGS):
        options["control_socket_disable"] = True  # gunicorn >= 25.1: no socket in $HOME
    try:
        _Arbiter(options, load).run()
    except SystemExit as stop:
        if os.getpid() != master:
            raise  # a worker leaving, with its own status
        return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        if os.getpid() == master:
            shutil.rmtree(folder, ignore_errors=True)
    return 0
