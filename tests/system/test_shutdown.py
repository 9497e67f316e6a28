"""shutdown with workers: `toolslim serve --workers 2` stops as one process does. After SIGTERM
every worker keeps accepting for `shutdown_delay` while /readyz answers 503, then refuses new
connections, gives the streams in flight `shutdown_grace`, cuts the rest and exits.

Bounds on time are generous (the machine may be shared): the sequence itself is
delay + grace + about a second; the test allows a few more."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import aiohttp
import pytest

from proxy_harness import ANTHROPIC, KEY, FakeUpstream, dumps
from served import fresh_client, get_json, serve, settled, stop

DELAY, GRACE = 1.0, 3.0
SLACK = 3.0  # what a shared machine may add to the sequence's own second
EVENTS, APART_MS = 20, 500  # a 10 s stream: still running when the grace ends


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_sigterm_with_workers_turns_unready_keeps_accepting_then_cuts_at_the_grace(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    served = await serve(
        upstream,
        tmp_path,
        # info: each request's log line, to read how the cut streams ended
        yaml=f"shutdown_delay: {DELAY}\nshutdown_grace: {GRACE}\nlog_level: info\n",
    )
    streams: list[tuple[aiohttp.ClientSession, aiohttp.ClientResponse]] = []
    try:
        async with fresh_client() as client:
            pids = [
                w["pid"] for w in (await get_json(client, f"{served.url}/stats"))["workers"]["list"]
            ]
            for _ in range(2):  # each on a connection of its own: any worker may take it
                session = fresh_client()
                response = await session.post(
                    f"{served.url}/v1/messages",
                    data=dumps({**ANTHROPIC, "stream": True}),
                    headers={"X-Fake": f"sse:{EVENTS}:{APART_MS}", "x-api-key": KEY},
                )
                streams.append((session, response))
                assert await response.content.readline() == b"event: message_start\n"
            await settled(client, served, lambda s: s["requests"]["active_streams"] == 2)

        signalled = time.monotonic()
        served.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        during_delay = []
        for _ in range(6):  # new connections: whichever worker takes each says not ready
            async with fresh_client() as late, late.get(f"{served.url}/readyz") as answer:
                during_delay.append(answer.status)
        assert time.monotonic() - signalled < DELAY, "the delay passed before the probes ended"
        assert during_delay == [503] * 6

        await asyncio.sleep(max(0.0, signalled + DELAY + 1.0 - time.monotonic()))
        with pytest.raises(aiohttp.ClientConnectionError):  # the delay is over: refused
            async with fresh_client() as late:
                await late.get(f"{served.url}/healthz")

        ends = []
        for _, response in streams:
            with pytest.raises(aiohttp.ClientPayloadError):  # cut when the grace ended
                await response.read()
            ends.append(time.monotonic() - signalled)
        exits: dict[int, float] = {}  # when the master reaped each worker
        while served.process.poll() is None and time.monotonic() - signalled < 30:
            exits |= {
                pid: time.monotonic() - signalled for pid in pids if pid not in exits and gone(pid)
            }
            await asyncio.sleep(0.01)
        returncode = await asyncio.wait_for(asyncio.to_thread(served.process.wait), 30)
        exited = time.monotonic() - signalled
    finally:
        for session, response in streams:
            response.release()
            await session.close()
        stop(served)
    assert returncode == 0, served.text()
    assert all(end <= DELAY + GRACE + SLACK for end in ends), ends
    assert sorted(exits) == sorted(pids) and all(gone(pid) for pid in pids)
    assert all(end <= DELAY + GRACE + SLACK for end in exits.values()), exits
    assert exited <= DELAY + GRACE + SLACK, exited
    assert "Traceback" not in served.text()
    # the streams the grace's end cut are the shutdown's doing, not their clients'
    cut = [line for line in served.text().splitlines() if line.endswith(" shutdown")]
    assert len(cut) == len(streams), served.text()
    assert "client_disconnect" not in served.text()
