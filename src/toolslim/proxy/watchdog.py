"""The timeout watchdog: each wait of the request path is held to its limit by one timer for
the whole app, and a wait that outlasts its limit raises `Stalled` (asyncio only; nothing here
knows about HTTP)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any


class Stalled(Exception):
    """A wait held `within(limit)` outlasted its limit."""


class Watchdog:
    """One task's waits, each held to its limit: `with watchdog.within(limit): await ...`
    raises Stalled once the wait outlasts `limit` seconds. Time between waits (writing to a
    slow client) never counts. A wait costs one clock read; the app's `Watchdogs` check.

    One wait at a time: the watchdog is its own context manager, so a wait allocates nothing.
    """

    __slots__ = ("_cancelling", "_fired", "_limit", "_since", "_task", "_time")

    def __init__(self, task: asyncio.Task[Any], time: Callable[[], float]) -> None:
        self._task = task
        self._cancelling = task.cancelling()
        self._time = time
        self._since: float | None = None  # when the pending wait began
        self._limit = 0.0
        self._fired = False

    def within(self, limit: float) -> Watchdog:
        """The next wait, held to `limit` seconds (use it in a `with` statement)."""
        self._limit = limit
        return self

    def __enter__(self) -> None:
        self._since = self._time()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._since = None
        # The cancellation is this watchdog's own (then it is consumed), not the client's
        # going away or a shutdown: those pass through as they are.
        if kind is asyncio.CancelledError and self._fired:
            self._fired = False
            if self._task.uncancel() <= self._cancelling:
                raise Stalled from None

    def check(self, now: float) -> None:
        """Cancel the task if its pending wait began more than its limit before `now`."""
        if self._since is not None and not self._fired and now >= self._since + self._limit:
            self._fired = True
            self._task.cancel()


class Watchdogs:
    """Every task's watchdog, checked by one timer: a round every `period` seconds while any
    is watched, so a wait is cut at most `period` after its limit. (A timer per request, made
    and cancelled around each wait, costs more than the request's own work at small sizes.)
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        period: float,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._loop = loop
        self._period = period
        # Any one monotonic clock will do: a wait and its check read the same one. The C
        # function, not loop.time (a Python method around it): it is read on every wait.
        self._clock = time.monotonic if clock is None else clock
        self._watched: set[Watchdog] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self) -> Watchdog:
        """A watchdog over the current task, until `release`."""
        task = asyncio.current_task(self._loop)  # given the loop: no getpid system call
        if task is None:
            raise RuntimeError("Watchdogs.watch() is called from a task")
        watchdog = Watchdog(task, self._clock)
        self._watched.add(watchdog)
        if self._timer is None:
            self._timer = self._loop.call_later(self._period, self._round)
        return watchdog

    def release(self, watchdog: Watchdog) -> None:
        self._watched.discard(watchdog)

    @property
    def ticking(self) -> bool:
        """Whether the timer is set: it is only while a watchdog is watched (or one round
        after the last is released)."""
        return self._timer is not None

    def check(self) -> None:
        """One round now: every watched wait past its limit is cut."""
        now = self._clock()
        for watchdog in list(self._watched):  # a cancelled task may release at once
            watchdog.check(now)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _round(self) -> None:
        self._timer = None  # this round's handle is spent, whatever happens below
        self.check()
        if self._watched:
            self._timer = self._loop.call_later(self._period, self._round)
