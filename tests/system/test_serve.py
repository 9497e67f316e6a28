"""serve: the real process: start-up, the collector settings, and a graceful SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from child import python_output
from proxy_harness import (
    ANTHROPIC,
    KEY,
    TIMEOUT,
    FakeUpstream,
    dumps,
    serve_process,
    stop_process,
    wait_healthy,
)

# --- graceful shutdown (a real `serve` process and a real SIGTERM) ---------------------------


async def test_sigterm_stops_accepting_lets_the_stream_in_flight_finish_and_exits_0(
    upstream: FakeUpstream, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    process, base = serve_process(
        tmp_path, f"upstreams: {{anthropic: '{upstream.url}/a'}}\nshutdown_grace: 10\n"
    )
    try:
        await wait_healthy(client, base, process)
        headers = {"X-Fake": "sse:6:200", "x-api-key": KEY}
        async with client.post(f"{base}/v1/messages", data=dumps(ANTHROPIC), headers=headers) as r:
            assert await r.content.readline() == b"event: message_start\n"
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            with pytest.raises(aiohttp.ClientConnectionError):
                async with aiohttp.ClientSession(timeout=TIMEOUT) as fresh:
                    await fresh.get(f"{base}/healthz")
            rest = await r.read()
        assert rest.count(b"event: delta") == 6
        assert rest.endswith(b"\n\n") and b"message_delta" in rest
        returncode = await asyncio.wait_for(asyncio.to_thread(process.wait), 15)
        assert returncode == 0
    finally:
        log = stop_process(process)
    assert "POST /v1/messages upstream=anthropic api=anthropic status=200" in log
    assert KEY not in log


def test_serving_hides_start_up_objects_from_the_collector_and_collects_young_ones_rarely() -> None:
    """In a child process: the collector settings are process-wide, so tests never change them
    in the test runner itself."""
    code = (
        "import gc\n"
        "from toolslim.serve.serving import tune_gc\n"
        "before = gc.get_threshold()\n"
        "tune_gc()\n"
        "print(gc.get_freeze_count() > 1000, gc.get_threshold()[0] > before[0],"
        " gc.get_threshold()[1:] == before[1:])\n"
    )
    assert python_output(code).split() == ["True", "True", "True"]


async def test_one_process_on_uvloop_serves_requests_through_the_door(
    upstream: FakeUpstream, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    pytest.importorskip("uvloop", reason="uvloop is an extra: pip install 'toolslim[uvloop]'")
    process, base = serve_process(
        tmp_path, f"upstreams: {{anthropic: '{upstream.url}/a'}}\nevent_loop: uvloop\n"
    )
    try:
        await wait_healthy(client, base, process)
        async with client.post(f"{base}/v1/messages", data=dumps(ANTHROPIC)) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(asyncio.to_thread(process.wait), 15) == 0
    finally:
        err = stop_process(process)
    assert "ERROR" not in err and "Traceback" not in err
