"""Resident memory of `toolslim [toolschema]` over 20,000 requests with 1,000 distinct catalogues.

Starts bench/fake_upstream.py and `python -m toolslim serve --pipeline toolschema`, then sends
the requests (aiohttp client, concurrency 8, half of them streamed) whose bodies carry 1,000
catalogues in rotation: Claude Code's smaller tools (from the committed capture) with each
tool's description made distinct per catalogue, plus a short transcript, ~45 KB a body. With
more catalogues than memo entries, every request is a memo miss and an eviction, the most
memory-churning path. The proxy's VmRSS (/proc/<pid>/status) is sampled at the start, every
2,000 requests and at the end, with the backlog of catalogue token counts it reports in /stats
(`tokens_pending`).

Goal (issue 3): flat (here: at most 10 MB of growth after the first 2,000 requests) and under
100 MB throughout. Run: `python bench/memory_bench.py [--requests N] [--catalogues N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import fake_upstream
from compact_bench import bodies, catalogue
from proxy_bench import free_port, rss_mb, stop

HERE = Path(__file__).resolve().parent
TOOL_BYTES_LIMIT = 3_000  # keep the smaller tools: a ~35 KB catalogue, ~45 KB bodies
HEADERS = {
    "Content-Type": "application/json",
    "x-api-key": "sk-ant-bench-fake-key",
    "anthropic-version": "2023-06-01",
}


def read_stats(port: int, done: int) -> dict[str, Any]:
    """The proxy's /stats once it has counted `done` requests (it counts each one after
    its response, once the catalogue's tokens are counted), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", "/stats")
            stats: dict[str, Any] = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        if stats["requests"]["total"] >= done or time.monotonic() > deadline:
            return stats
        time.sleep(0.1)


def make_bodies(count: int) -> list[bytes]:
    """One body per catalogue: same tools, each description marked with the catalogue's index."""
    base = [t for t in catalogue() if len(json.dumps(t)) <= TOOL_BYTES_LIMIT]
    out = []
    for index in range(count):
        tools = copy.deepcopy(base)
        for tool in tools:
            assert isinstance(tool, dict)
            tool["description"] = f"{tool['description']} (workspace profile {index})"
        body = bodies(tools, 45_000, 1, seed=index)[0]
        if index % 2:  # half of them non-stream; the generator's bodies end "stream":true}
            body = body[: -len(b'"stream":true}')] + b'"stream":false}'
        out.append(body)
    return out


async def load(
    port: int, items: list[bytes], total: int, concurrency: int, pid: int, deadline: float
) -> tuple[list[tuple[int, float, float, int]], int]:
    """Send `total` requests; the samples (requests done, seconds, RSS MB, token counts still
    pending in the proxy) and the number of failed responses."""
    samples = [(0, 0.0, rss_mb(pid), 0)]
    started = time.monotonic()
    sent = done = failed = 0
    expected = {True: fake_upstream.sse_reply(5), False: fake_upstream.message_reply()}
    url = f"http://127.0.0.1:{port}/v1/messages"
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal sent, done, failed
            while sent < total and time.monotonic() < deadline:
                body = items[sent % len(items)]
                sent += 1
                async with session.post(url, data=body, headers=HEADERS) as response:
                    reply = await response.read()
                stream = body.endswith(b"true}")
                if response.status != 200 or reply != expected[stream]:
                    failed += 1
                done += 1
                if done % 2000 == 0:
                    point = (done, time.monotonic() - started, rss_mb(pid))
                    async with session.get(f"http://127.0.0.1:{port}/stats") as response:
                        backlog = find(await response.json(), "tokens_pending")
                    samples.append((*point, backlog))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    if samples[-1][0] != done:
        samples.append((done, time.monotonic() - started, rss_mb(pid), -1))
    return samples, failed


def find(snapshot: Any, key: str) -> int:
    """The first value under `key` anywhere in the /stats snapshot, or -1."""
    if isinstance(snapshot, dict):
        if key in snapshot:
            return int(snapshot[key])
        for value in snapshot.values():
            if (found := find(value, key)) != -1:
                return found
    return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--catalogues", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-seconds", type=float, default=540, help="stop sending after")
    args = parser.parse_args()
    began = time.monotonic()
    items = make_bodies(args.catalogues)
    sizes = [len(b) for b in items]
    print(f"# memory_bench {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs")
    print(
        f"{args.requests:,} requests, {args.catalogues:,} distinct catalogues in rotation, "
        f"bodies {min(sizes):,}-{max(sizes):,} B, concurrency {args.concurrency}"
    )
    load_avg = os.getloadavg()
    print(f"load average at start: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}")
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="toolslim-membench-") as tmp:
        try:
            command = [sys.executable, str(HERE / "fake_upstream.py"), "--port", "0"]
            with open(Path(tmp) / "upstream.log", "wb") as sink:
                upstream = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=sink)
            processes.append(upstream)
            assert upstream.stdout is not None
            upstream_port = int(upstream.stdout.readline().decode().rsplit(":", 1)[1])
            port = free_port()
            command = [sys.executable, "-m", "toolslim", "serve", "--host", "127.0.0.1"]
            command += ["--port", str(port), "--pipeline", "toolschema"]
            command += ["--upstream", f"anthropic=http://127.0.0.1:{upstream_port}"]
            with open(Path(tmp) / "proxy.log", "wb") as sink:
                proxy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=sink)
            processes.append(proxy)
            ready = time.monotonic() + 20
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if proxy.poll() is not None or time.monotonic() > ready:
                        raise SystemExit("toolslim did not start") from None
                    time.sleep(0.05)
            deadline = began + args.max_seconds
            samples, failed = asyncio.run(
                load(port, items, args.requests, args.concurrency, proxy.pid, deadline)
            )
            stats = read_stats(port, samples[-1][0])
        finally:
            stop(processes)
    print()
    print(f"{'requests':>9} {'seconds':>8} {'RSS MB':>7} {'tokens_pending':>14}")
    for done, seconds, mb, backlog in samples:
        print(f"{done:>9,} {seconds:>8.1f} {mb:>7.1f} {backlog if backlog >= 0 else '-':>14}")
    memo = stats["memo"]
    component = stats["components"]["toolschema"]
    print(
        f"memo: {memo['size']}/{memo['capacity']} entries, {memo['hits']:,} hits, "
        f"{memo['misses']:,} misses; toolschema applied {component['applied']:,}; "
        f"failed responses {failed}"
    )
    settled = [mb for done, _, mb, _ in samples if done >= 2000]
    growth = max(settled) - settled[0] if settled else float("nan")
    peak = max(mb for _, _, mb, _ in samples)
    met = samples[-1][0] >= args.requests and failed == 0 and peak < 100 and growth <= 10
    print(
        f"peak {peak:.1f} MB, growth after 2,000 requests {growth:+.1f} MB; "
        f"goal (flat: <= 10 MB growth, < 100 MB): {'met' if met else 'NOT met'}"
    )
    load_avg = os.getloadavg()
    print(f"load average at end: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}")
    print(f"took {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
