"""watchdog: one patrol holds every wait on an upstream to its limit."""

from __future__ import annotations

import asyncio

from toolslim.proxy.watchdog import Patrol


async def test_the_patrol_cuts_a_wait_within_one_period_of_its_limit_and_sleeps_when_idle() -> None:
    loop = asyncio.get_running_loop()
    patrol = Patrol(loop, period=0.05)

    async def wait_on_upstream(limit: float) -> float:
        watchdog = patrol.watch()
        started = loop.time()
        try:
            watchdog.waiting(limit)
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            assert watchdog.expired()  # its own cancellation, consumed
            return loop.time() - started
        finally:
            patrol.release(watchdog)
        raise AssertionError("not cut")

    cut = await asyncio.gather(wait_on_upstream(0.1), wait_on_upstream(0.2))
    assert 0.1 <= cut[0] < 0.1 + 0.05 + 0.05  # one period late at most (and a little slack)
    assert 0.2 <= cut[1] < 0.2 + 0.05 + 0.05
    await asyncio.sleep(0.12)
    assert patrol._timer is None  # nothing watched: no timer runs
