"""The request path's worker thread: work too heavy for the event loop (a large or compressed
request body's decoding and catalogue walk) runs there, so that no request stalls the others.

One thread, with a pipeline of its own: the pipeline's memo is not thread-safe, and the loop's
pipeline keeps running small bodies meanwhile. Both pipelines are built from the same settings
and give the same output for the same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final, ParamSpec, TypeVar

from toolslim.core.pipeline import Pipeline

# Jobs queued or running at once; beyond, the caller does without (a body goes on untouched,
# skipped `busy`). Each one's body is also held to the buffer budget (budget.BufferBudget).
MAX_JOBS: Final = 64

P = ParamSpec("P")
T = TypeVar("T")


class Offload:
    """One worker thread and a bound on the jobs waiting for it."""

    def __init__(self, pipeline: Pipeline, max_jobs: int = MAX_JOBS) -> None:
        self.pipeline = pipeline  # only ever run on the worker thread
        self.max_jobs = max_jobs
        self.jobs = 0  # queued or running; changed on the loop's thread only
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="toolslim-offload")
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`func(*args, **kwargs)` on the worker thread; None at once when MAX_JOBS are queued.

        A caller that is cancelled (its client went away) takes its job out of the queue
        unless it is already running; a running job is counted until it ends.
        """
        if self.jobs >= self.max_jobs:
            return None
        self._loop = asyncio.get_running_loop()
        future = self._executor.submit(func, *args, **kwargs)
        self.jobs += 1
        future.add_done_callback(self._ended)
        return await asyncio.wrap_future(future)

    def _ended(self, future: Future[Any]) -> None:
        # On the worker thread when the job ran, on the loop's when it was cancelled queued.
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed at exit
                loop.call_soon_threadsafe(self._one_less)

    def _one_less(self) -> None:
        self.jobs -= 1

    def close(self) -> None:
        """Drop the queued jobs; the running one ends by itself."""
        self._executor.shutdown(wait=False, cancel_futures=True)
