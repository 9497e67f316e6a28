"""offload: the worker thread runs jobs off the event loop, never more than its bound at once."""

from __future__ import annotations

import asyncio
import threading

from toolslim.core.pipeline import Pipeline
from toolslim.proxy.offload import Offload


async def test_the_worker_thread_runs_jobs_off_the_loop_and_takes_no_more_than_its_bound() -> None:
    offload = Offload(Pipeline(["toolschema"]), max_jobs=1)
    try:
        release = threading.Event()
        where: list[str] = []

        def job() -> str:
            where.append(threading.current_thread().name)
            release.wait(5)
            return "done"

        first = asyncio.ensure_future(offload.run(job))
        await asyncio.sleep(0)
        assert await offload.run(job) is None  # the one job allowed is running
        release.set()
        assert await first == "done"
        assert where[0].startswith("toolslim-offload")
        await asyncio.sleep(0.01)
        assert offload.jobs == 0
    finally:
        offload.close()
