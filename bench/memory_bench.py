"""Resident memory of `toolslim [toolschema]` over 20,000 requests with 1,000 distinct catalogues.

Starts bench/fake_upstream.py and `python -m toolslim serve --pipeline toolschema`, then sends
the requests (aiohttp client, concurrency 8, half of them streamed) whose bodies carry 1,000
catalogues in rotation: Claude Code's smaller tools (from the committed capture) with each
tool's description made distinct per catalogue, plus a short transcript, ~45 KB a body. With
more catalogues than memo entries, every request is a memo miss and an eviction, the most
memory-churning path. The proxy's VmRSS (/proc/<pid>/status) is sampled at the start, every
500 requests and at the end, with the backlog of catalogue token counts it reports in /stats
(`tokens_pending`).

Goal (issue 3): flat (here: at most 10 MB of growth after the first 2,000 requests) and under
100 MB throughout. Run: `python bench/memory_bench.py [--requests N] [--catalogues N]`.

With `--bytes` (issue 23) it sends instead 5,000 requests, each with a distinct catalogue of
Claude Code's full size (all its tools, ~63 KB, ~70 KB bodies), to a proxy whose memo may keep
any number of entries (`memo_size: 1000000`) but only `--memo-bytes` bytes: the byte bound is
what holds memory. Its own state file (the default one in the home folder is shared by every
run, and loaded whole at start). The start is sampled after a first request, which loads what
is loaded once (the tokenizer, ~34 MB; the price table, ~21 MB). Goal: RSS at every sample at
most the start plus the sum of the per-catalogue byte bounds (the memo's `memo_bytes`, drift's
kept facts and the tool ledger a quarter of it each, lint's 1 MiB) plus a fixed overhead
(`--overhead`, 16 MB: the token-count backlog of 64 bodies, the allocator's slack), and /stats
`memo.bytes` and `tools.memory.bytes` within their bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import fake_upstream
from common import Load, get_json, load, load_average, rss_mb, start_proxy, start_upstream, stop
from compact_bench import bodies, catalogue
from toolslim.observe import drift, health

TOOL_BYTES_LIMIT = 3_000  # keep the smaller tools: a ~35 KB catalogue, ~45 KB bodies


def read_stats(port: int, done: int) -> dict[str, Any]:
    """The proxy's /stats once it has counted `done` requests (it counts each one after
    its response, once the catalogue's tokens are counted), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        stats: dict[str, Any] = get_json(port, "/stats")
        if stats["requests"]["total"] >= done or time.monotonic() > deadline:
            return stats
        time.sleep(0.1)


def make_bodies(count: int, full: bool = False) -> list[bytes]:
    """One body per catalogue: same tools, each description marked with the catalogue's index
    (`full`: all of Claude Code's tools, else the smaller ones)."""
    base = [t for t in catalogue() if full or len(json.dumps(t)) <= TOOL_BYTES_LIMIT]
    out = []
    for index in range(count):
        tools = copy.deepcopy(base)
        for tool in tools:
            assert isinstance(tool, dict)
            tool["description"] = f"{tool['description']} (workspace profile {index})"
        body = bodies(tools, 70_000 if full else 45_000, 1, seed=index)[0]
        if index % 2:  # half of them non-stream; the generator's bodies end "stream":true}
            body = body[: -len(b'"stream":true}')] + b'"stream":false}'
        out.append(body)
    return out


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
    parser.add_argument("--bytes", action="store_true", help="the byte bound (issue 23)")
    parser.add_argument("--memo-bytes", default="25MiB", help="with --bytes: the memo's bound")
    parser.add_argument("--overhead", type=float, default=16, help="with --bytes: MB allowed")
    args = parser.parse_args()
    if args.bytes:
        args.requests = args.catalogues = 5_000
    began = time.monotonic()
    *items, warm = make_bodies(args.catalogues + 1, full=args.bytes)
    sizes = [len(b) for b in items]
    print(f"# memory_bench {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs")
    print(
        f"{args.requests:,} requests, {args.catalogues:,} distinct catalogues in rotation, "
        f"bodies {min(sizes):,}-{max(sizes):,} B, concurrency {args.concurrency}"
    )
    print(f"load average at start: {load_average()}")
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="toolslim-membench-") as tmp:
        try:
            upstream, upstream_port = start_upstream(Path(tmp))
            processes.append(upstream)
            # A state file of its own: the default one (in the home folder) is shared with
            # every other run, and the ledger loads what it holds at start.
            flags = ["--pipeline", "toolschema", "--state-file", str(Path(tmp) / "state.db")]
            if args.bytes:
                config = Path(tmp) / "toolslim.yaml"
                config.write_text(f"memo_size: 1000000\nmemo_bytes: {args.memo_bytes}\n")
                flags += ["--config", str(config)]
            proxy = start_proxy("[toolschema]", Path(tmp), {"anthropic": upstream_port}, flags)
            processes.append(proxy.process)
            pid = proxy.process.pid
            expected = {True: fake_upstream.sse_reply(5), False: fake_upstream.message_reply()}
            url = f"http://127.0.0.1:{proxy.port}/v1/messages"
            cold = rss_mb(pid)
            if args.bytes:  # what loads once, on first use: the tokenizer, the price table
                asyncio.run(load(url, [warm], 2, 1))
                read_stats(proxy.port, 2)
                print(
                    f"RSS before any request {cold:.1f} MB, after a first one {rss_mb(pid):.1f} MB"
                )
            samples = [(0, 0.0, rss_mb(pid), 0)]

            def right(body: bytes, status: int, reply: bytes) -> bool:
                return status == 200 and reply == expected[body.endswith(b"true}")]

            async def sample(done: Load) -> None:
                point = (done.done, time.monotonic() - started, rss_mb(pid))
                stats = await asyncio.to_thread(get_json, proxy.port, "/stats")
                samples.append((*point, find(stats, "tokens_pending")))

            deadline = began + args.max_seconds
            every = (500, sample)
            started = time.monotonic()
            result = asyncio.run(
                load(url, items, args.requests, args.concurrency, None, deadline, right, every)
            )
            if samples[-1][0] != result.done:
                samples.append((result.done, result.seconds, rss_mb(pid), -1))
            failed = result.failed
            stats = read_stats(proxy.port, result.done + (2 if args.bytes else 0))
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
    if args.bytes:
        bytes_goal(samples, stats, failed, args.requests, args.overhead)
    else:
        flat_goal(samples, failed, args.requests)
    print(f"load average at end: {load_average()}")
    print(f"took {time.monotonic() - began:.0f} s")


Sample = tuple[int, float, float, int]  # requests done, seconds, RSS MB, tokens pending


def bytes_goal(
    samples: list[Sample], stats: dict[str, Any], failed: int, requests: int, overhead: float
) -> None:
    """RSS within the start's plus the byte bounds of the per-catalogue caches plus a fixed
    overhead, all along: the memo's (`memo_bytes`), drift's kept facts (a quarter of it),
    the tool ledger's (`tools.memory.max_bytes`) and lint's remembered findings."""
    memo, ledger = stats["memo"], stats["tools"]["memory"]
    bounds = {
        "memo": memo["max_bytes"],
        "drift": memo["max_bytes"] // drift.KEPT_SHARE,
        "ledger": ledger["max_bytes"],
        "lint": health.LINTED_BYTES,
    }
    start, peak = samples[0][2], max(mb for _, _, mb, _ in samples)
    bound = start + sum(bounds.values()) / 2**20 + overhead
    print(
        f"memo holds {memo['bytes'] / 2**20:.1f} MiB of {memo['max_bytes'] / 2**20:.1f} MiB; "
        f"the tool ledger {ledger['bytes'] / 2**20:.1f} MiB of "
        f"{ledger['max_bytes'] / 2**20:.1f} MiB"
    )
    print(
        "bounds: "
        + ", ".join(f"{name} {size / 2**20:.2f} MiB" for name, size in bounds.items())
        + f"; sum {sum(bounds.values()) / 2**20:.2f} MiB"
    )
    print(
        f"RSS at start {start:.1f} MB, peak {peak:.1f} MB, bound {bound:.1f} MB "
        f"(start + the sum + {overhead:g} MB)"
    )
    met = (
        samples[-1][0] >= requests
        and failed == 0
        and peak <= bound
        and memo["bytes"] <= memo["max_bytes"]
        and ledger["bytes"] <= ledger["max_bytes"]
    )
    print(f"goal (RSS <= start + the bounds' sum + overhead): {'met' if met else 'NOT met'}")


def flat_goal(samples: list[Sample], failed: int, requests: int) -> None:
    """At most 10 MB of growth after the first 2,000 requests, and under 100 MB."""
    settled = [mb for done, _, mb, _ in samples if done >= 2000]
    growth = max(settled) - settled[0] if settled else float("nan")
    peak = max(mb for _, _, mb, _ in samples)
    met = samples[-1][0] >= requests and failed == 0 and peak < 100 and growth <= 10
    print(
        f"peak {peak:.1f} MB, growth after 2,000 requests {growth:+.1f} MB; "
        f"goal (flat: <= 10 MB growth, < 100 MB): {'met' if met else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
