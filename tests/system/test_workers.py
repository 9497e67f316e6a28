"""workers: `toolslim serve --workers 2`, a real gunicorn master and two workers on one port,
through real sockets. Every answer of /stats and /metrics, whichever worker gives it, holds
the exact totals of both; a killed worker is replaced and its counts stay; SIGTERM drains
both."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exposition import expected_samples
from proxy_harness import (
    ANTHROPIC,
    KEY,
    FakeUpstream,
    Proxy,
    dumps,
    stats_of,
    total_is,
)
from served import (
    KINDS,
    ROUNDS,
    WORKERS,
    Served,
    fresh_client,
    get_json,
    send_batch,
    serve,
    settled,
    stop,
)

EVENTS = 10  # per stream of the SIGTERM test, 400 ms apart: 4 s, all in flight at SIGTERM


@pytest.fixture
async def served(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[Served]:
    running = await serve(upstream, tmp_path)
    try:
        yield running
    finally:
        stop(running)


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Path -> value of every leaf (a list's items at their index)."""
    if not isinstance(value, dict | list):
        return {path: value}
    items = value.items() if isinstance(value, dict) else enumerate(value)
    flat: dict[str, Any] = {}
    for key, item in items:
        flat |= flatten(item, f"{path}.{key}" if path else str(key))
    return flat


# What one process serving all of the traffic and two workers sharing it may show apart:
# when it ran, how long each request took, each worker's own capacities (connections, memo)
# and what its session tracker held (a session whose requests reach both is tracked by both).
APART = (
    "connections.",
    "drift.",
    "memo.",
    "series.points",
    "started_at",
    "timings.proxy_overhead_seconds.",
    "timings.upstream_ttfb_seconds.",
    "uptime_seconds",
    "workers.",
    # The tool ledger's times are each process's clock, its USD sums add in another order:
    # test_ledger_state.py holds its counts exact across workers.
    "tools.",
)


def comparable(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in flatten(stats).items() if not k.startswith(APART)}


# Gauges of the connections open and busy now: every worker counts its clients' connections,
# and the /stats requests asking are among them (on the answering worker, and on another as
# of its last publish, while it was answering the previous one).
LIVE = ("connections.open", "connections.busy")
LIVE_SAMPLES = ("toolslim_client_connections", "toolslim_client_connections_busy")


def without_live(samples: dict[tuple[str, Any], Any]) -> dict[tuple[str, Any], Any]:
    """Scraped samples without those of the LIVE gauges."""
    return {key: value for key, value in samples.items() if key[0] not in LIVE_SAMPLES}


def timeless(stats: dict[str, Any]) -> dict[str, Any]:
    """An answer without the fields that move with the clock alone, or with the asking."""
    return {
        k: v
        for k, v in flatten(stats).items()
        if not k.endswith("uptime_seconds") and k not in LIVE
    }


def scraped(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_every_answer_of_any_worker_holds_the_exact_totals_of_both_field_by_field(
    served: Served, proxy: Proxy
) -> None:
    alone = await proxy()  # one process, in this test, given the very same traffic
    bases = (served.url, str(alone.make_url("")).rstrip("/"))
    requests = len(KINDS) * ROUNDS + 1
    async with fresh_client() as client:
        sent = await send_batch(client, *bases)
        # One more, after all others: the latest catalogue (cache P and s) is the same in both.
        method, path, body, headers = KINDS[0]
        for base in bases:
            async with client.request(method, base + path, data=body, headers=headers) as r:
                await r.read()
        sent += len(body or b"")
        host = await settled(client, served, total_is(requests))
        one = await stats_of(client, alone, total_is(requests))
        answers = [await get_json(client, f"{served.url}/stats") for _ in range(20)]
        scrapes = []
        for _ in range(10):
            async with client.get(f"{served.url}/metrics") as response:
                scrapes.append(scraped(await response.text()))

    assert host["requests"]["total"] == one["requests"]["total"] == requests
    assert host["requests"]["bytes_received"] == sent
    assert comparable(host) == comparable(one)
    for histogram in ("proxy_overhead_seconds", "upstream_ttfb_seconds"):
        assert host["timings"][histogram]["count"] == one["timings"][histogram]["count"]
    assert (
        host["memo"]["hits"] + host["memo"]["misses"] == one["memo"]["hits"] + one["memo"]["misses"]
    )
    assert sum(p["requests"] for p in host["series"]["points"]) == requests
    toolschema = host["components"]["toolschema"]
    assert toolschema["applied"] + toolschema["skipped"] + toolschema["error"] == requests

    workers = host["workers"]
    assert workers["count"] == WORKERS and workers["exited"] == 0
    assert all(w["requests"] > 0 for w in workers["list"]), workers  # both served some
    assert sum(w["requests"] for w in workers["list"]) == requests
    assert {a["workers"]["answered_by"] for a in answers} == {w["pid"] for w in workers["list"]}
    for answer in answers:
        assert timeless(answer) | {"workers.answered_by": 0} == timeless(host) | {
            "workers.answered_by": 0
        }
    expected, _ = expected_samples(host)
    for scrape in scrapes:
        assert without_live(scrape) == without_live(expected)


async def test_a_killed_worker_is_replaced_and_its_counts_stay_in_the_totals(
    served: Served,
) -> None:
    requests = len(KINDS) * ROUNDS
    async with fresh_client() as client:
        await send_batch(client, served.url)
        before = await settled(client, served, total_is(requests))
        victim = max(before["workers"]["list"], key=lambda w: w["requests"])
        assert victim["requests"] > 0
        os.kill(victim["pid"], signal.SIGKILL)

        def replaced(stats: dict[str, Any]) -> bool:
            pids = {w["pid"] for w in stats["workers"]["list"]}
            return stats["workers"]["exited"] == 1 and len(pids) == 2 and victim["pid"] not in pids

        after = await settled(client, served, replaced, seconds=20)
        assert comparable(after) == comparable(before)
        await send_batch(client, served.url)
        again = await settled(client, served, total_is(2 * requests))
    assert again["requests"]["total"] == 2 * requests
    assert again["requests"]["by_status"]["5xx"] == 2 * ROUNDS
    assert again["workers"]["count"] == WORKERS
    assert "was sent SIGKILL" in served.text()


async def test_sigterm_drains_both_workers_streams_and_the_master_exits_0(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    served = await serve(upstream, tmp_path)
    headers = {"X-Fake": f"sse:{EVENTS}:400", "x-api-key": KEY}
    streams: list[tuple[aiohttp.ClientSession, aiohttp.ClientResponse]] = []

    async def open_stream() -> None:
        session = fresh_client()
        response = await session.post(
            f"{served.url}/v1/messages", data=dumps(ANTHROPIC), headers=headers
        )
        streams.append((session, response))
        assert await response.content.readline() == b"event: message_start\n"

    try:
        async with fresh_client() as client:
            # Streams, each on a connection of its own, until both workers relay some.
            for _ in range(4):
                await asyncio.gather(*(open_stream() for _ in range(4)))
                stats = await settled(
                    client, served, lambda s: s["requests"]["active_streams"] == len(streams)
                )
                if all(w["active_streams"] > 0 for w in stats["workers"]["list"]):
                    break
            assert all(w["active_streams"] > 0 for w in stats["workers"]["list"]), stats
        (shared,) = (tmp_path / "tmp").glob("toolslim-workers-*")
        assert len(list(shared.glob("worker-*.json"))) == WORKERS
        served.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        with pytest.raises(aiohttp.ClientConnectionError):
            async with fresh_client() as late:
                await late.get(f"{served.url}/healthz")
        for _, response in streams:
            rest = await response.read()
            assert rest.count(b"event: delta") == EVENTS and b"message_delta" in rest
        returncode = await asyncio.wait_for(asyncio.to_thread(served.process.wait), 30)
        assert returncode == 0, served.text()
        assert not shared.exists()  # the master removed the workers' directory
    finally:
        for session, response in streams:
            response.release()
            await session.close()
        stop(served)
    assert "Traceback" not in served.text()


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed")
async def test_event_loop_uvloop_runs_aiohttp_s_uvloop_worker_class(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    served = await serve(
        upstream, tmp_path, WORKERS, "--event-loop", "uvloop", "--log-level", "info"
    )
    try:
        async with fresh_client() as client:
            method, path, body, headers = KINDS[0]
            async with client.request(method, served.url + path, data=body, headers=headers) as r:
                assert r.status == 200
            stats = await settled(client, served, total_is(1))
        assert stats["workers"]["count"] == WORKERS
    finally:
        assert stop(served) == 0
    assert "Using worker: UVLoopWorker" in served.text()
