"""What the proxy costs a request: direct vs a naive aiohttp proxy vs `toolslim` `pipeline: []`
vs `[toolschema]`.

Starts bench/fake_upstream.py, bench/naive_proxy.py and two `python -m toolslim serve` processes
(`--pipeline ''` and `--pipeline toolschema`), then measures, in this one run, for ~80 KB, ~300
KB and ~2 MB bodies, non-stream and stream, and for each target: latency p50/p99 at concurrency
1, throughput at concurrency 32 (wrk, bench/rotate.lua) and the proxy process's CPU time per
request (utime + stime from /proc/<pid>/stat over the run and the drain after it, divided by the
requests the upstream received). The bodies rotate, one per request in turn: one catalogue
(Claude Code's, from the committed capture) and 16 different transcripts per size, so a cache of
whole bodies cannot help. Each target gets 1 s of unrecorded load per body set first; then
targets are interleaved within each repetition, and medians are taken over repetitions.

Goals (issues 3 and 23), as ratios within a repetition: `[toolschema]` to `[]`, p50 latency <=
1.10x, throughput >= 0.90x, CPU per request <= 1.15x at every size; `[]` to the naive proxy,
throughput >= 0.90x and CPU per request <= 1.10x at 80 KB.

Needs wrk (`apt-get install -y wrk`). Run: `python bench/proxy_bench.py [--quick]`.

With `--workers 1,2` it measures instead `[toolschema]` served by each number of workers on
each event loop (`--loops asyncio,uvloop`), all in one run: see `workers_main`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fake_upstream
from common import (
    TICK,
    Proxy,
    busy_ticks,
    children_cpu,
    cpu_ticks,
    free_port,
    median,
    pinned,
    request,
    revision,
    rss_mb,
    self_cpu,
    start_proxy,
    start_upstream,
    stop,
    tree_ticks,
    upstream_stats,
    wait_idle,
    wait_until,
)
from compact_bench import SIZES, bodies, catalogue
from toolslim.core.pipeline import Pipeline

HERE = Path(__file__).resolve().parent
ROTATE = HERE / "rotate.lua"
TARGETS = ("direct", "naive", "[]", "[toolschema]")
PIPELINES = {"[]": "", "[toolschema]": "toolschema"}
MODES = ("nonstream", "stream")
EVENTS = 5  # content_block_delta events per stream answer
GOALS = {"p50": 1.10, "rps": 0.90, "cpu": 1.15}
NAIVE_GOALS = {"rps": 0.90, "cpu": 1.10}  # `[]` against the naive proxy, at 80 KB


def verify(
    name: str, port: int, upstream: int, items: list[bytes], compacted: list[bytes], mode: str
) -> str:
    """One request through the target: the upstream got the right body, the client the answer."""
    status, reply = request(port, "/v1/messages", items[0])
    expected = (
        fake_upstream.sse_reply(EVENTS) if mode == "stream" else fake_upstream.message_reply()
    )
    if status != 200 or reply != expected:
        raise SystemExit(f"{name} {mode}: response not intact (status {status}, {len(reply)} B)")
    _, received = request(upstream, "/_bench/last_body")
    if name == "[toolschema]":
        if received != compacted[0] or len(received) >= len(items[0]):
            raise SystemExit(f"{name} {mode}: upstream did not get the compacted body")
        return f"compacted {len(items[0]):,} -> {len(received):,} B"
    if received != items[0]:
        raise SystemExit(f"{name} {mode}: upstream did not get the body byte-identical")
    return "byte-identical"


def start_naive(upstream: int, cpu: int | None, folder: Path) -> Proxy:
    """bench/naive_proxy.py on a free port, once it answers."""
    port = free_port()
    command = [sys.executable, str(HERE / "naive_proxy.py"), "--port", str(port)]
    command += ["--upstream", f"http://127.0.0.1:{upstream}"]
    log = folder / "proxy-naive.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*pinned(cpu), *command], stdout=subprocess.DEVNULL, stderr=sink)
    proxy = Proxy("naive", port, process, log)

    def up() -> bool:
        if process.poll() is not None:
            raise SystemExit(f"naive proxy exited: {log.read_text()[-2000:]}")
        return request(port, "/healthz")[0] in (200, 404)

    wait_until(up, f"the naive proxy on port {port}")
    return proxy


@dataclass
class Cell:
    """One wrk run of one target."""

    target: str
    size: str
    mode: str
    conc: int
    rep: int
    requests: int = 0  # completed, as wrk counts them
    rps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    errors: int = 0
    cpu_ms: float | None = None  # proxy CPU per request the upstream received
    forwarded: float = 0.0  # mean bytes per request the upstream received
    other_cores: float = 0.0  # CPU used meanwhile by processes outside this bench
    raw: dict[str, Any] = field(default_factory=dict)


def warm(port: int, body_list: Path, wrk_cpu: int | None, folder: Path) -> None:
    """One second of load at concurrency 32, not recorded."""
    command = [*pinned(wrk_cpu), "wrk", "-t1", "-c32", "-d1s", "--timeout", "10s"]
    command += ["-s", str(ROTATE), f"http://127.0.0.1:{port}/v1/messages"]
    env = dict(os.environ, BENCH_BODIES=str(body_list), BENCH_OUT=str(folder / "warm.json"))
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True, timeout=60)


def run_cell(
    cell: Cell,
    port: int,
    body_list: Path,
    duration: int,
    wrk_cpu: int | None,
    upstream: subprocess.Popen[bytes],
    upstream_port: int,
    proxies: dict[str, Proxy],
    folder: Path,
) -> None:
    pids = [upstream.pid] + [p.process.pid for p in proxies.values()]
    wait_idle(pids)
    proxy = proxies.get(cell.target)
    before = upstream_stats(upstream_port)
    ours_before = sum(cpu_ticks(p) for p in pids) / TICK + children_cpu() + self_cpu()
    busy_before, started = busy_ticks(), time.monotonic()
    proxy_before = cpu_ticks(proxy.process.pid) if proxy else 0
    out = folder / "wrk.json"
    out.unlink(missing_ok=True)
    command = [*pinned(wrk_cpu), "wrk", "-t1", f"-c{cell.conc}", f"-d{duration}s"]
    command += ["--timeout", "10s", "-s", str(ROTATE), f"http://127.0.0.1:{port}/v1/messages"]
    env = dict(os.environ, BENCH_BODIES=str(body_list), BENCH_OUT=str(out))
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True, timeout=duration + 60)
    wait_idle(pids)
    after = upstream_stats(upstream_port)
    elapsed = time.monotonic() - started
    ours = sum(cpu_ticks(p) for p in pids) / TICK + children_cpu() + self_cpu() - ours_before
    cell.other_cores = max(0.0, (busy_ticks() - busy_before) / TICK - ours) / elapsed
    summary = json.loads(out.read_text())
    cell.raw = summary
    cell.requests = summary["requests"]
    cell.rps = summary["requests"] / (summary["duration_us"] / 1e6)
    cell.p50_ms = summary["lat_us"]["p50"] / 1000
    cell.p99_ms = summary["lat_us"]["p99"] / 1000
    cell.errors = sum(summary["errors"].values())
    received = after["requests"] - before["requests"]
    cell.forwarded = (after["bytes"] - before["bytes"]) / max(received, 1)
    if proxy is not None:
        spent = (cpu_ticks(proxy.process.pid) - proxy_before) / TICK
        cell.cpu_ms = spent * 1000 / max(received, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 rep, 1 s per run (< 2 min)")
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--duration", type=int, default=2, help="seconds per wrk run")
    parser.add_argument("--bodies", type=int, default=16, help="distinct transcripts per size")
    parser.add_argument("--sizes", default=",".join(SIZES), help="of " + ",".join(SIZES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--log-level", default="info", help="the proxies' (info: the default)")
    parser.add_argument("--pin", choices=["auto", "none"], default="auto")
    parser.add_argument("--max-seconds", type=float, default=540, help="start no run after")
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument(
        "--session-header",
        action="store_true",
        help="send X-Claude-Code-Session-Id, as Claude Code does (drift reads it, not the body)",
    )
    parser.add_argument("--workers", help="e.g. 1,2: compare worker counts (and --loops)")
    parser.add_argument("--loops", help="with --workers: event loops (asyncio,uvloop)")
    args = parser.parse_args()
    if args.workers:
        workers_main(args)
        return
    if args.quick:
        args.reps, args.duration, args.max_seconds = 1, 1, 100
    # wrk's requests (rotate.lua) carry Claude Code's session header when this is set.
    os.environ["BENCH_SESSION"] = "bench-session" if args.session_header else ""
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk: apt-get install -y wrk")
    sizes = [s for s in args.sizes.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    began = time.monotonic()
    # wrk and the fake upstream on CPU 0, the proxies on CPU 1: the proxy has a core of its own.
    split = args.pin == "auto" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2
    load_cpu, proxy_cpu = (0, 1) if split else (None, None)
    placement = "wrk + upstream on CPU 0, proxies on CPU 1" if split else "not pinned"
    load = os.getloadavg()
    print(f"# proxy_bench {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs")
    print(
        f"toolslim: {revision()}; placement: {placement}; proxies at --log-level {args.log_level}"
    )
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")

    tools = catalogue()
    compactor = Pipeline(["toolschema"])
    processes: list[subprocess.Popen[bytes]] = []
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="toolslim-bench-") as tmp:
        folder = Path(tmp)
        lists: dict[tuple[str, str], Path] = {}
        sets: dict[tuple[str, str], tuple[list[bytes], list[bytes]]] = {}
        for size in sizes:
            streamed = bodies(tools, SIZES[size], args.bodies, seed=SIZES[size])
            for mode in modes:
                items = streamed
                if mode == "nonstream":  # the generator's bodies end with "stream":true}
                    tail, swap = b',"stream":true}', b',"stream":false}'
                    assert all(b.endswith(tail) for b in streamed)
                    items = [b[: -len(tail)] + swap for b in streamed]
                paths = []
                for index, body in enumerate(items):
                    path = folder / f"{size}-{mode}-{index:02d}.json"
                    path.write_bytes(body)
                    paths.append(str(path))
                lists[size, mode] = folder / f"{size}-{mode}.list"
                lists[size, mode].write_text("\n".join(paths) + "\n")
                sets[size, mode] = (items, [compactor.run(b).body for b in items[:1]])
            mean = statistics.mean(len(b) for b in streamed)
            print(f"bodies {size}: {args.bodies} transcripts, mean {mean:,.0f} B")
        try:
            upstream, upstream_port = start_upstream(folder, cpu=load_cpu, events=EVENTS)
            processes.append(upstream)
            proxies: dict[str, Proxy] = {"naive": start_naive(upstream_port, proxy_cpu, folder)}
            processes.append(proxies["naive"].process)
            for name in PIPELINES:
                flags = ["--pipeline", PIPELINES[name], "--log-level", args.log_level]
                upstreams = {"anthropic": upstream_port}
                proxies[name] = start_proxy(name, folder, upstreams, flags, cpu=proxy_cpu)
                processes.append(proxies[name].process)
            ports = {"direct": upstream_port} | {n: p.port for n, p in proxies.items()}
            for target in TARGETS:
                seen = set()
                for (_, mode), (items, compacted) in sets.items():
                    seen.add(verify(target, ports[target], upstream_port, items, compacted, mode))
                print(f"check {target}: responses intact; upstream got: {'; '.join(sorted(seen))}")
            stopped = False
            for size in sizes:
                for mode in modes:
                    for target in TARGETS:  # not measured: heaps grown, pools filled
                        warm(ports[target], lists[size, mode], load_cpu, folder)
                    for rep in range(args.reps):
                        turn = rep % len(TARGETS)
                        order = TARGETS[turn:] + TARGETS[:turn]
                        for target in order:
                            for conc in (1, 32):
                                if time.monotonic() - began > args.max_seconds:
                                    stopped = True
                                    break
                                cell = Cell(target, size, mode, conc, rep)
                                run_cell(
                                    cell,
                                    ports[target],
                                    lists[size, mode],
                                    args.duration,
                                    load_cpu,
                                    upstream,
                                    upstream_port,
                                    proxies,
                                    folder,
                                )
                                cells.append(cell)
            if stopped:
                print(f"stopped starting runs after --max-seconds {args.max_seconds:g}")
            rss = {name: rss_mb(p.process.pid) for name, p in proxies.items()}
        finally:
            stop(processes)
    report(cells, sizes, modes, args.reps)
    load = os.getloadavg()
    print("proxy RSS at the end: " + ", ".join(f"{n} {v:.0f} MB" for n, v in rss.items()))
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"took {time.monotonic() - began:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([c.__dict__ for c in cells], indent=1))


def cells_of(
    cells: list[Cell], target: str, size: str, mode: str, conc: int, rep: int | None = None
) -> list[Cell]:
    """The runs of one target, size, mode and concurrency (of one repetition, if given)."""
    return [
        c
        for c in cells
        if (c.target, c.size, c.mode, c.conc) == (target, size, mode, conc)
        and (rep is None or c.rep == rep)
    ]


def report(cells: list[Cell], sizes: list[str], modes: list[str], reps: int) -> None:
    pick = functools.partial(cells_of, cells)

    print()
    print(
        f"{'body':>5} {'mode':>9} {'target':>12} {'p50 ms':>7} {'p99 ms':>7} {'req/s':>7} "
        f"{'cpu ms/req':>10} {'@c32':>6} {'fwd KB':>7} {'errors':>6} {'other':>5}"
    )
    print(f"{'':>5} {'':>9} {'':>12} {'c=1':>7} {'c=1':>7} {'c=32':>7} {'c=1':>10}")
    verdicts: list[bool] = []
    ratio_rows = []
    naive_rows = []
    for size in sizes:
        for mode in modes:
            for target in TARGETS:
                one, many = pick(target, size, mode, 1), pick(target, size, mode, 32)
                if not one or not many:
                    continue
                cpu1 = [c.cpu_ms for c in one if c.cpu_ms is not None]
                cpu32 = [c.cpu_ms for c in many if c.cpu_ms is not None]
                errors = sum(c.errors for c in one + many)
                other = median([c.other_cores for c in one + many])
                p50, p99 = median([c.p50_ms for c in one]), median([c.p99_ms for c in one])
                print(
                    f"{size:>5} {mode:>9} {target:>12} {p50:>7.2f} "
                    f"{p99:>7.2f} {median([c.rps for c in many]):>7.0f} "
                    f"{_fmt(cpu1):>10} {_fmt(cpu32):>6} "
                    f"{median([c.forwarded for c in one + many]) / 1000:>7.0f} {errors:>6} "
                    f"{other:>5.2f}"
                )
            ratios: dict[str, list[float]] = {"p50": [], "rps": [], "cpu": [], "base": []}
            added: dict[str, list[float]] = {"[]": [], "[toolschema]": []}
            naive: dict[str, list[float]] = {"rps": [], "cpu": [], "p50": []}
            for rep in range(reps):
                one = {t: pick(t, size, mode, 1, rep) for t in TARGETS}
                many = {t: pick(t, size, mode, 32, rep) for t in TARGETS}
                if not all(one.values()) or not all(many.values()):
                    continue
                slim, empty, direct = (
                    (one[t][0], many[t][0]) for t in ("[toolschema]", "[]", "direct")
                )
                ratios["p50"].append(slim[0].p50_ms / empty[0].p50_ms)
                ratios["rps"].append(slim[1].rps / empty[1].rps)
                ratios["cpu"].append((slim[1].cpu_ms or 0) / (empty[1].cpu_ms or 1))
                ratios["base"].append(empty[1].rps / direct[1].rps)
                plain = (one["naive"][0], many["naive"][0])
                naive["rps"].append(empty[1].rps / plain[1].rps)
                naive["cpu"].append((empty[1].cpu_ms or 0) / (plain[1].cpu_ms or 1))
                naive["p50"].append(empty[0].p50_ms / plain[0].p50_ms)
                added["[]"].append(empty[0].p50_ms - direct[0].p50_ms)
                added["[toolschema]"].append(slim[0].p50_ms - direct[0].p50_ms)
            if ratios["p50"]:
                p50, rps, cpu = (median(ratios[k]) for k in ("p50", "rps", "cpu"))
                met = p50 <= GOALS["p50"] and rps >= GOALS["rps"] and cpu <= GOALS["cpu"]
                verdicts.append(met)
                ratio_rows.append(
                    f"{size:>5} {mode:>9} {p50:>9.3f} {rps:>9.3f} {cpu:>9.3f} "
                    f"{median(added['[]']):>+9.2f} {median(added['[toolschema]']):>+9.2f} "
                    f"{median(ratios['base']):>9.3f}  {'met' if met else 'NOT met'}"
                )
                rps, cpu = median(naive["rps"]), median(naive["cpu"])
                goal = "-"
                if size == "80KB":
                    met = rps >= NAIVE_GOALS["rps"] and cpu <= NAIVE_GOALS["cpu"]
                    verdicts.append(met)
                    goal = "met" if met else "NOT met"
                naive_rows.append(
                    f"{size:>5} {mode:>9} {median(naive['p50']):>9.3f} {rps:>9.3f} {cpu:>9.3f}"
                    f"  {goal}"
                )
    print()
    print("[toolschema] vs [] (median over reps of the per-rep ratio); p50 added over direct")
    print(
        f"{'body':>5} {'mode':>9} {'p50 x':>9} {'req/s x':>9} {'cpu x':>9} "
        f"{'[] +ms':>9} {'[ts] +ms':>9} {'[]/direct':>9}  goals"
    )
    print(
        f"{'':>5} {'':>9} {'<=1.10':>9} {'>=0.90':>9} {'<=1.15':>9} {'c=1':>9} {'c=1':>9} "
        f"{'req/s':>9}"
    )
    for row in ratio_rows:
        print(row)
    print()
    print("[] vs the naive aiohttp proxy (median over reps of the per-rep ratio)")
    print(f"{'body':>5} {'mode':>9} {'p50 x':>9} {'req/s x':>9} {'cpu x':>9}  goals (80KB)")
    print(f"{'':>5} {'':>9} {'':>9} {'>=0.90':>9} {'<=1.10':>9}")
    for row in naive_rows:
        print(row)
    print(
        "goals ([toolschema] vs []: p50 <= 1.10x, req/s >= 0.90x, CPU/req <= 1.15x; "
        "[] vs naive at 80KB: req/s >= 0.90x, CPU/req <= 1.10x):",
        "all met" if verdicts and all(verdicts) else "NOT all met",
    )
    print("cpu ms/req: proxy process CPU per request received upstream (c=32 column for the")
    print("goal); other: cores used meanwhile by processes outside this bench (noise)")


def _fmt(values: list[float]) -> str:
    return f"{median(values):.2f}" if values else "-"


# --- --workers: N worker processes on one port, asyncio vs uvloop -------------------------


def start_workers(
    name: str, workers: int, loop: str, upstream: int, log_level: str, folder: Path
) -> Proxy:
    """`toolslim serve --workers N --event-loop LOOP` with [toolschema], once all answer."""
    flags = ["--pipeline", "toolschema", "--log-level", log_level]
    flags += ["--workers", str(workers), "--event-loop", loop]

    def ready(port: int) -> bool:
        status, body = request(port, "/stats")
        return status == 200 and json.loads(body)["workers"]["count"] == workers

    return start_proxy(name, folder, {"anthropic": upstream}, flags, ready=ready)


def workers_main(args: argparse.Namespace) -> None:
    """[toolschema] on 1 and N workers, asyncio and uvloop: every target in turn within each
    repetition (the start rotates), unpinned: the workers need both CPUs, and wrk and the
    fake upstream share them (the ratio of N workers to 1 is bounded by that)."""
    counts = [int(n) for n in args.workers.split(",")]
    loops = (args.loops or "asyncio,uvloop").split(",")
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk: apt-get install -y wrk")
    sizes = [s for s in args.sizes.split(",") if s] if args.sizes != ",".join(SIZES) else []
    sizes = sizes or ["80KB", "2MB"]
    modes = [m for m in args.modes.split(",") if m]
    reps = 1 if args.quick else min(args.reps, 3)
    duration = 1 if args.quick else args.duration
    targets = [f"w{n} {loop}" for n in counts for loop in loops]
    began = time.monotonic()
    load = os.getloadavg()
    print(f"# proxy_bench --workers {args.workers} {time.strftime('%Y-%m-%d %H:%M:%S')}")
    print(f"{os.cpu_count()} CPUs; toolslim: {revision()}; not pinned; log level {args.log_level}")
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    tools = catalogue()
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="toolslim-bench-") as tmp:
        folder = Path(tmp)
        lists: dict[tuple[str, str], Path] = {}
        for size in sizes:
            streamed = bodies(tools, SIZES[size], args.bodies, seed=SIZES[size])
            for mode in modes:
                items = streamed
                if mode == "nonstream":
                    items = [b[: -len(b',"stream":true}')] + b',"stream":false}' for b in streamed]
                paths = []
                for index, body in enumerate(items):
                    path = folder / f"{size}-{mode}-{index:02d}.json"
                    path.write_bytes(body)
                    paths.append(str(path))
                lists[size, mode] = folder / f"{size}-{mode}.list"
                lists[size, mode].write_text("\n".join(paths) + "\n")
        processes: list[subprocess.Popen[bytes]] = []
        try:
            upstream, upstream_port = start_upstream(folder, events=EVENTS)
            processes.append(upstream)
            proxies = {}
            for target in targets:
                count, loop = target.split()
                proxies[target] = start_workers(
                    target, int(count[1:]), loop, upstream_port, args.log_level, folder
                )
                processes.append(proxies[target].process)
            for size in sizes:
                for mode in modes:
                    for target in targets:
                        warm(proxies[target].port, lists[size, mode], None, folder)
                    for rep in range(reps):
                        shift = rep % len(targets)
                        for target in targets[shift:] + targets[:shift]:
                            for conc in (1, 32):
                                if time.monotonic() - began > args.max_seconds:
                                    break
                                cell = Cell(target, size, mode, conc, rep)
                                run_workers_cell(
                                    cell,
                                    proxies,
                                    lists[size, mode],
                                    duration,
                                    upstream,
                                    upstream_port,
                                    folder,
                                )
                                cells.append(cell)
        finally:
            stop(processes)
    workers_report(cells, targets, counts, loops, sizes, modes, reps)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"took {time.monotonic() - began:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([c.__dict__ for c in cells], indent=1))


def run_workers_cell(
    cell: Cell,
    proxies: dict[str, Proxy],
    body_list: Path,
    duration: int,
    upstream: subprocess.Popen[bytes],
    upstream_port: int,
    folder: Path,
) -> None:
    """One wrk run against one target; CPU summed over the master and its workers."""
    masters = [upstream.pid] + [p.process.pid for p in proxies.values()]
    proxy = proxies[cell.target]

    def everything() -> int:
        return cpu_ticks(upstream.pid) + sum(tree_ticks(p.process.pid) for p in proxies.values())

    wait_idle(masters)
    before = upstream_stats(upstream_port)
    ours_before = everything() / TICK + children_cpu() + self_cpu()
    busy_before, started = busy_ticks(), time.monotonic()
    proxy_before = tree_ticks(proxy.process.pid)
    out = folder / "wrk.json"
    out.unlink(missing_ok=True)
    command = ["wrk", "-t1", f"-c{cell.conc}", f"-d{duration}s", "--timeout", "10s"]
    command += ["-s", str(ROTATE), f"http://127.0.0.1:{proxy.port}/v1/messages"]
    env = dict(os.environ, BENCH_BODIES=str(body_list), BENCH_OUT=str(out))
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True, timeout=duration + 60)
    time.sleep(0.2)  # the workers' last writes; wait_idle sees masters only
    after = upstream_stats(upstream_port)
    elapsed = time.monotonic() - started
    ours = everything() / TICK + children_cpu() + self_cpu() - ours_before
    cell.other_cores = max(0.0, (busy_ticks() - busy_before) / TICK - ours) / elapsed
    summary = json.loads(out.read_text())
    cell.raw = summary
    cell.requests = summary["requests"]
    cell.rps = summary["requests"] / (summary["duration_us"] / 1e6)
    cell.p50_ms = summary["lat_us"]["p50"] / 1000
    cell.p99_ms = summary["lat_us"]["p99"] / 1000
    cell.errors = sum(summary["errors"].values())
    received = after["requests"] - before["requests"]
    cell.forwarded = (after["bytes"] - before["bytes"]) / max(received, 1)
    spent = (tree_ticks(proxy.process.pid) - proxy_before) / TICK
    cell.cpu_ms = spent * 1000 / max(received, 1)


def workers_report(
    cells: list[Cell],
    targets: list[str],
    counts: list[int],
    loops: list[str],
    sizes: list[str],
    modes: list[str],
    reps: int,
) -> None:
    pick = functools.partial(cells_of, cells)

    print()
    print(
        f"{'body':>5} {'mode':>9} {'target':>11} {'p50 ms':>7} {'req/s':>7} {'cpu ms/req':>10}"
        f" {'errors':>6} {'other':>5}"
    )
    print(f"{'':>5} {'':>9} {'':>11} {'c=1':>7} {'c=32':>7} {'c=32':>10}")
    for size in sizes:
        for mode in modes:
            for target in targets:
                one, many = pick(target, size, mode, 1), pick(target, size, mode, 32)
                if not many:
                    continue
                cpu = [c.cpu_ms for c in many if c.cpu_ms is not None]
                print(
                    f"{size:>5} {mode:>9} {target:>11} {median([c.p50_ms for c in one]):>7.2f} "
                    f"{median([c.rps for c in many]):>7.0f} {_fmt(cpu):>10} "
                    f"{sum(c.errors for c in one + many):>6} "
                    f"{median([c.other_cores for c in one + many]):>5.2f}"
                )

    def ratio(a: str, b: str, size: str, mode: str, conc: int, key: str) -> float:
        """Median over repetitions of target a's figure over target b's."""
        values = []
        for rep in range(reps):
            x, y = pick(a, size, mode, conc, rep), pick(b, size, mode, conc, rep)
            if x and y and getattr(y[0], key):
                values.append(getattr(x[0], key) / getattr(y[0], key))
        return median(values)

    print()
    base, top = min(counts), max(counts)
    print(f"w{top} vs w{base} (same loop): req/s and CPU per request at c=32")
    for size in sizes:
        for mode in modes:
            for loop in loops:
                a, b = f"w{top} {loop}", f"w{base} {loop}"
                rps, cpu = (ratio(a, b, size, mode, 32, key) for key in ("rps", "cpu_ms"))
                print(f"{size:>5} {mode:>9} {loop:>8}: req/s x{rps:.3f}  cpu/req x{cpu:.3f}")
    if len(loops) > 1:
        print()
        print(f"{loops[1]} vs {loops[0]} (same workers): req/s c=32, p50 c=1, CPU/req c=32")
        for size in sizes:
            for mode in modes:
                for count in counts:
                    a, b = f"w{count} {loops[1]}", f"w{count} {loops[0]}"
                    rps, cpu = (ratio(a, b, size, mode, 32, key) for key in ("rps", "cpu_ms"))
                    p50 = ratio(a, b, size, mode, 1, "p50_ms")
                    print(
                        f"{size:>5} {mode:>9} w{count}: req/s x{rps:.3f}  p50 x{p50:.3f}"
                        f"  cpu/req x{cpu:.3f}"
                    )
    print("cpu ms/req: the master's and its workers' CPU per request received upstream;")
    print("other: cores used meanwhile by processes outside this bench (noise)")


if __name__ == "__main__":
    main()
