"""watchdog: every wait held `within(limit)` raises Stalled once it outlasts its limit, checked
by one timer for the whole app; the clock is the test's, so no assertion reads wall time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from toolslim.proxy.watchdog import Stalled, Watchdogs

HOUR = 3600.0  # a period no test waits for: the test runs each round itself


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def waiting(watchdogs: Watchdogs, limit: float, forever: asyncio.Event) -> asyncio.Task[str]:
    """A task that waits `limit` seconds at most for `forever` (never set unless told)."""

    async def wait() -> str:
        watchdog = watchdogs.watch()
        try:
            with watchdog.within(limit):
                await forever.wait()
            return "answered"
        finally:
            watchdogs.release(watchdog)

    return asyncio.ensure_future(wait())


async def started(task: asyncio.Task[str]) -> asyncio.Task[str]:
    await asyncio.sleep(0)  # the task runs up to its wait
    return task


async def rounds_then(watchdogs: Watchdogs, clock: Clock, times: list[float]) -> None:
    for now in times:
        clock.now = now
        watchdogs.check()
        await asyncio.sleep(0)


async def test_a_wait_that_outlasts_its_limit_raises_stalled_and_one_within_it_does_not() -> None:
    clock = Clock()
    watchdogs = Watchdogs(asyncio.get_running_loop(), HOUR, clock)
    forever = asyncio.Event()
    task = await started(waiting(watchdogs, 5.0, forever))
    await rounds_then(watchdogs, clock, [1.0, 4.9])
    assert not task.done()
    await rounds_then(watchdogs, clock, [5.0])
    with pytest.raises(Stalled):
        await task
    watchdogs.stop()


async def test_a_wait_that_ends_in_time_is_answered() -> None:
    clock = Clock()
    watchdogs = Watchdogs(asyncio.get_running_loop(), HOUR, clock)
    answer = asyncio.Event()
    task = await started(waiting(watchdogs, 5.0, answer))
    await rounds_then(watchdogs, clock, [4.0])
    answer.set()
    assert await task == "answered"
    await rounds_then(watchdogs, clock, [100.0])  # after the wait: nothing to cut
    watchdogs.stop()


async def test_time_between_waits_never_counts() -> None:
    clock = Clock()
    watchdogs = Watchdogs(asyncio.get_running_loop(), HOUR, clock)
    first, second = asyncio.Event(), asyncio.Event()

    async def two_waits() -> str:
        watchdog = watchdogs.watch()
        try:
            with watchdog.within(5.0):
                await first.wait()
            await second.wait()  # not held: the client is slow to read, say
            with watchdog.within(5.0):
                await asyncio.Event().wait()
            return "answered"
        finally:
            watchdogs.release(watchdog)

    task = asyncio.ensure_future(two_waits())
    await asyncio.sleep(0)
    first.set()
    await asyncio.sleep(0)
    await rounds_then(watchdogs, clock, [50.0])  # long past the first wait's limit
    assert not task.done()
    second.set()
    await rounds_then(watchdogs, clock, [50.0, 54.0])
    assert not task.done()
    await rounds_then(watchdogs, clock, [55.0])
    with pytest.raises(Stalled):
        await task
    watchdogs.stop()


async def test_a_cancellation_not_the_watchdog_s_own_passes_through_as_it_is() -> None:
    clock = Clock()
    watchdogs = Watchdogs(asyncio.get_running_loop(), HOUR, clock)
    task = await started(waiting(watchdogs, 5.0, asyncio.Event()))
    task.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await task
    watchdogs.stop()


async def test_each_wait_is_cut_at_its_own_limit() -> None:
    clock = Clock()
    watchdogs = Watchdogs(asyncio.get_running_loop(), HOUR, clock)
    short = await started(waiting(watchdogs, 1.0, asyncio.Event()))
    long = await started(waiting(watchdogs, 9.0, asyncio.Event()))
    await rounds_then(watchdogs, clock, [1.0])
    assert short.done() and not long.done()
    await rounds_then(watchdogs, clock, [9.0])
    results = await asyncio.gather(short, long, return_exceptions=True)
    assert [type(result) for result in results] == [Stalled, Stalled]
    watchdogs.stop()


async def test_the_timer_runs_the_rounds_while_a_wait_is_watched_and_stops_when_none_is() -> None:
    clock = Clock()
    watchdogs = Watchdogs(asyncio.get_running_loop(), 0.001, clock)
    assert not watchdogs.ticking  # nothing watched: no timer
    task = await started(waiting(watchdogs, 5.0, asyncio.Event()))
    assert watchdogs.ticking
    clock.now = 5.0  # the timer's next round cuts it, no one else checks
    with pytest.raises(Stalled):
        await task
    await until(lambda: not watchdogs.ticking)


async def until(condition: Callable[[], bool]) -> None:
    """Bounded: the timer's last round comes one period after the last release."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the timer kept running")
