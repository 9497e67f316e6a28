"""The tool ledger's state file with real programs: `toolslim serve` stopped and started again
on the same file continues its totals, refuses a file that is not its own with a clear error,
and two workers (gunicorn) count exactly what one process counts, in /stats and in the file."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp

from proxy_harness import (
    ANTHROPIC,
    FakeUpstream,
    Proxy,
    dumps,
    serve_process,
    stats_of,
    stop_process,
    wait_healthy,
)
from served import fresh_client, get_json, serve, settled, stop
from toolslim.observe.ledger import render
from toolslim.observe.ledger.state import StateFile

TOOLS = [
    {"name": "read_file", "input_schema": {"type": "object"}},
    {"name": "mcp__git__status", "input_schema": {"type": "object"}},
]
BODY = dumps({**ANTHROPIC, "tools": TOOLS})


def offered(stats: dict[str, Any]) -> dict[str, int]:
    """Requests that offered each tool."""
    return {item["tool"]: item["requests"] for item in stats["tools"]["costliest"]}


def counts(stats: dict[str, Any]) -> dict[str, Any]:
    """The ledger's integer counts, per tool and per server (times and USD sums left out)."""
    tools = stats["tools"]
    return {
        "tools": sorted(
            (i["tool"], i["requests"], i["sessions"], i["tokens"], i["calls"], i["offered_tokens"])
            for i in tools["costliest"]
        ).__repr__(),
        "servers": sorted(
            (r["server"], r["requests"], r["tools"], r["offered_tokens"], r["calls"])
            for r in tools["servers"]
        ).__repr__(),
    }


async def send(client: aiohttp.ClientSession, base: str, count: int) -> None:
    for index in range(count):
        headers = {"X-Claude-Code-Session-Id": f"s{index % 3}"}
        async with client.post(f"{base}/v1/messages", data=BODY, headers=headers) as response:
            assert response.status == 200
            await response.read()


def yaml_for(upstream: FakeUpstream, state: Path) -> str:
    base = upstream.url
    return (
        f"upstreams: {{anthropic: '{base}/a', openai: '{base}/o', gemini: '{base}/g'}}\n"
        f"state_file: {state}\nlog_level: warning\n"
    )


def terminate(process: Any) -> str:
    process.send_signal(signal.SIGTERM)
    process.wait(30)
    return stop_process(process)


async def until_offered(client: aiohttp.ClientSession, base: str, count: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        stats = await get_json(client, f"{base}/stats")
        if offered(stats).get("read_file", 0) >= count or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.05)


async def test_a_restart_on_the_same_state_file_continues_the_totals(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    state = tmp_path / "state.sqlite3"
    async with aiohttp.ClientSession() as client:
        process, base = serve_process(tmp_path, yaml_for(upstream, state))
        try:
            await wait_healthy(client, base, process)
            await send(client, base, 3)
            assert offered(await until_offered(client, base, 3))["read_file"] == 3
        finally:
            terminate(process)
        process, base = serve_process(tmp_path, yaml_for(upstream, state))
        try:
            await wait_healthy(client, base, process)
            first = await get_json(client, f"{base}/stats")
            assert first["requests"]["total"] == 0  # the process's own counters start afresh
            assert offered(first) == {"read_file": 3, "mcp__git__status": 3}
            assert first["tools"]["costliest"][0]["sessions"] == 3
            await send(client, base, 2)
            assert offered(await until_offered(client, base, 5))["read_file"] == 5
        finally:
            terminate(process)
    kept = render.render(StateFile(str(state)).load(), time.time(), min_requests=1, min_sessions=1)
    assert {item["tool"]: item["requests"] for item in kept["costliest"]}["read_file"] == 5


def test_a_corrupt_state_file_stops_the_start_with_a_message_naming_it(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    state = tmp_path / "state.sqlite3"
    junk = b"this was never a database " * 50
    state.write_bytes(junk)
    process, _ = serve_process(tmp_path, yaml_for(upstream, state))
    assert process.wait(30) == 2
    err = stop_process(process)
    assert f"state_file {state} is not a toolslim state file" in err
    assert "Traceback" not in err
    assert state.read_bytes() == junk  # never overwritten


async def test_two_workers_count_exactly_what_one_process_counts_in_stats_and_file(
    upstream: FakeUpstream, tmp_path: Path, proxy: Proxy
) -> None:
    state = tmp_path / "state.sqlite3"
    served = await serve(upstream, tmp_path, 2, "--state-file", str(state))
    alone = await proxy()
    requests = 40
    try:
        async with fresh_client() as client:
            await send(client, served.url, requests)
            await send(client, str(alone.make_url("")).rstrip("/"), requests)
            host = await settled(
                client, served, lambda s: offered(s).get("read_file", 0) >= requests
            )
            one = await stats_of(client, alone, lambda s: offered(s).get("read_file") == requests)
    finally:
        assert stop(served) == 0
    assert all(w["requests"] > 0 for w in host["workers"]["list"]), host["workers"]
    assert counts(host) == counts(one)
    kept = render.render(StateFile(str(state)).load(), time.time(), min_requests=1, min_sessions=1)
    assert counts({"tools": kept}) == counts(one)
