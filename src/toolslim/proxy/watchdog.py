"""The timeout watchdog and its patrol: every wait on an upstream is held to its limit by one
timer for the whole app (asyncio only; nothing here knows about HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class Watchdog:
    """Cancels a handler's task once one wait on the upstream outlasts its limit: the wait for
    response headers, then each read of the body. Time spent writing to a slow client never
    counts. A wait costs one clock read; the app's one `Patrol` does the checking.
    """

    __slots__ = ("_cancelling", "_fired", "_limit", "_since", "_task", "_time")

    def __init__(self, task: asyncio.Task[Any], time: Callable[[], float]) -> None:
        self._task = task
        self._cancelling = task.cancelling()
        self._time = time
        self._since: float | None = None  # when the pending wait began
        self._limit = 0.0
        self._fired = False

    def waiting(self, limit: float) -> None:
        self._since = self._time()
        self._limit = limit

    def done(self) -> None:
        self._since = None

    def check(self, now: float) -> None:
        if self._since is not None and not self._fired and now >= self._since + self._limit:
            self._fired = True
            self._task.cancel()

    def expired(self) -> bool:
        """Whether the CancelledError being handled is this watchdog's own (then it is
        consumed), not the client's going away or a shutdown."""
        return self._fired and self._task.uncancel() <= self._cancelling


class Patrol:
    """One timer for every request's watchdog: a round every `period` seconds while any is
    watched, so a wait is cut at most `period` after its limit. (A timer per request, made
    and cancelled around each wait, costs more than the request's own work at small sizes.)
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float) -> None:
        self._loop = loop
        self._period = period
        self._watched: set[Watchdog] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self) -> Watchdog:
        """A watchdog over the current task, until `release`."""
        task = asyncio.current_task(self._loop)  # given the loop: no getpid system call
        if task is None:
            raise RuntimeError("Patrol.watch() is called from a task")
        watchdog = Watchdog(task, self._loop.time)
        self._watched.add(watchdog)
        if self._timer is None:
            self._timer = self._loop.call_later(self._period, self._round)
        return watchdog

    def release(self, watchdog: Watchdog) -> None:
        self._watched.discard(watchdog)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _round(self) -> None:
        self._timer = None  # this round's handle is spent, whatever happens below
        now = self._loop.time()
        for watchdog in list(self._watched):  # a cancelled task may release at once
            watchdog.check(now)
        if self._watched:
            self._timer = self._loop.call_later(self._period, self._round)
