"""SIGTERM and SIGINT while serving: not ready at once, serving on for `shutdown_delay` (for
load balancers to notice), then no new connections, the requests in flight given
`shutdown_grace` to finish, the rest cut; a second signal exits at once with status 1.

aiohttp's own shutdown waits up to its timeout for handlers and then as long again for the
cancelled ones, so the connection limits do the waiting and aiohttp is left only the
cutting. A worker of `serve --workers N` stops the same way, on its own share of the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Final

from aiohttp import web

from toolslim.proxy.app import grace_over
from toolslim.proxy.limits import ConnectionLimits

log = logging.getLogger("toolslim.proxy.app")

SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
# aiohttp's shutdown timeout once the grace is over (build the AppRunner with it): each
# connection still busy then is cut within twice this.
CUT_SECONDS: Final = 0.25
# What is left after the grace for the cut and the app's cleanup (closing the upstream
# sessions, the last counts): the process exits within grace + this.
CLEANUP_SECONDS: Final = 0.9


class Signals:
    """The first SIGTERM/SIGINT sets `received`; a second one runs `last_words` (flush the
    log) and exits the process at once with status 1."""

    def __init__(self, loop: asyncio.AbstractEventLoop, last_words: Callable[[], None]) -> None:
        self.received = asyncio.Event()
        self._loop = loop
        self._last_words = last_words
        for signum in SIGNALS:
            loop.add_signal_handler(signum, self._signalled, signum)

    def _signalled(self, signum: int) -> None:
        if not self.received.is_set():
            self.received.set()
            return
        log.warning("%s again: exiting at once", signal.Signals(signum).name)
        self._last_words()
        os._exit(1)

    def close(self) -> None:
        for signum in SIGNALS:
            self._loop.remove_signal_handler(signum)


async def drain(
    runner: web.AppRunner,
    connections: ConnectionLimits,
    *,
    delay: float,
    grace: float,
    not_ready: Callable[[], None],
) -> None:
    """The shutdown: /readyz 503 at once, `delay` seconds more serving, then no new
    connections, idle ones closed, and up to `grace` seconds for the requests in flight
    (busy connections close once their response is written); then `runner.cleanup()` cuts the
    rest, within CLEANUP_SECONDS."""
    not_ready()
    if delay:
        await asyncio.sleep(delay)
    connections.stop_listening()
    connections.drain()
    assert runner.server is not None
    runner.server.pre_shutdown()  # a busy connection closes after its response
    await runner.shutdown()  # the app's on_shutdown: WebSockets close after their response
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(grace):
            await connections.quiet()
    grace_over(runner.app)  # what is cut next is counted and logged as cut by the shutdown
    started = time.monotonic()
    try:
        async with asyncio.timeout(CLEANUP_SECONDS):
            await runner.cleanup()
    except TimeoutError:
        log.warning("shutdown: cleanup cut short after %.1f s", time.monotonic() - started)
    finally:
        connections.close()
