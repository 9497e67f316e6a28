"""A real Prometheus server (Debian's `prometheus`) scrapes a 2-worker toolslim on 127.0.0.1
once a second, while traffic flows and each original worker is killed in turn (Prometheus keeps
its connection, so this is what moves its scrapes to another worker). PromQL through its HTTP
API then sees the totals /stats shows, and never a counter reset."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from proxy_harness import FakeUpstream, closed_port, total_is
from served import KINDS, ROUNDS, Served, fresh_client, send_batch, serve, settled, stop

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="needs the prometheus binary: apt-get install -y prometheus"
)
WAVES = 3  # batches sent while Prometheus scrapes, a worker killed between two


@pytest.fixture
async def served(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[Served]:
    folder = tmp_path / "toolslim"
    folder.mkdir()
    running = await serve(upstream, folder)
    try:
        yield running
    finally:
        stop(running)


@pytest.fixture
async def prometheus(served: Served, tmp_path: Path) -> AsyncIterator[str]:
    """A Prometheus scraping `served` every second; its base URL."""
    assert PROMETHEUS is not None
    folder = tmp_path / "prometheus"
    folder.mkdir()
    target = served.url.removeprefix("http://")
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: toolslim\n"
        "    metrics_path: /metrics\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = closed_port()
    command = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    log = folder / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=folder, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as client:
            while True:
                assert process.poll() is None, log.read_text()
                try:
                    async with client.get(f"{base}/-/ready") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                await asyncio.sleep(0.1)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


async def query(client: aiohttp.ClientSession, base: str, promql: str) -> list[dict[str, Any]]:
    async with client.get(f"{base}/api/v1/query", params={"query": promql}) as response:
        body = await response.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def value_once(
    client: aiohttp.ClientSession, base: str, promql: str, until: Any, seconds: float = 30
) -> float:
    """The one value `promql` gives, once `until` holds for it (new scrapes come each second)."""
    deadline = time.monotonic() + seconds
    while True:
        result = await query(client, base, promql)
        if result and until(float(result[0]["value"][1])):
            return float(result[0]["value"][1])
        assert time.monotonic() < deadline, (promql, result)
        await asyncio.sleep(0.2)


def replaced(pid: int) -> Any:
    """Whether a /stats answer shows two workers again, `pid` not among them."""
    return lambda stats: (
        stats["workers"]["count"] == 2 and pid not in {w["pid"] for w in stats["workers"]["list"]}
    )


async def test_promql_sum_of_toolslim_requests_total_equals_stats_requests_total(
    served: Served, prometheus: str
) -> None:
    batch = len(KINDS) * ROUNDS
    async with fresh_client() as client:
        first = await settled(client, served, lambda s: True)
        originals = [w["pid"] for w in first["workers"]["list"]]
        for wave in range(WAVES):  # the totals grow while they are scraped
            await send_batch(client, served.url)
            await settled(client, served, total_is((wave + 1) * batch))
            await asyncio.sleep(1.2)
            if wave < len(originals):
                os.kill(originals[wave], signal.SIGKILL)
                await settled(client, served, replaced(originals[wave]), seconds=20)
        requests = WAVES * batch
        stats = await settled(client, served, total_is(requests))
    total = stats["requests"]["total"]
    assert total == requests
    async with aiohttp.ClientSession() as client:
        promql = "sum(toolslim_requests_total)"
        assert await value_once(client, prometheus, promql, lambda v: v == total) == total
        # The invariant, through Prometheus: per component, runs of every outcome add up.
        runs = 'sum(toolslim_component_runs_total{component="toolschema"})'
        assert await value_once(client, prometheus, runs, lambda v: v == total) == total
        assert (await query(client, prometheus, 'up{job="toolslim"}'))[0]["value"][1] == "1"
        # Whichever worker answered each scrape, the counter never went down.
        samples = "count_over_time(toolslim_requests_total[5m])"
        assert await value_once(client, prometheus, samples, lambda v: v >= 5) >= 5
        resets = await query(client, prometheus, "resets(toolslim_requests_total[5m])")
        assert float(resets[0]["value"][1]) == 0
        series = await query(client, prometheus, "toolslim_requests_total")
        assert len(series) == 1  # one target, one series: the host's total
    assert stats["workers"]["exited"] == 2
