"""What the WebSocket relay costs a `response.create`: direct vs `toolslim` `[]` vs `[toolschema]`,
and against the HTTP path (POST /v1/responses, streamed) for the same body in the same run.

Starts bench/fake_upstream.py in `responses` mode (an aiohttp server that
answers each `response.create` on GET /v1/responses, and each POST /v1/responses, with the same
events: `response.created`, a few `response.output_text.delta`, `response.completed` with usage)
and two `python -m toolslim serve` processes (`--pipeline ''` and `--pipeline toolschema`). The
body is ~80 KB: Codex's envelope from the committed capture, Claude Code's 29 tools as Responses
function tools, and a transcript of shell calls; one number in the last user message changes per
message, so no cache of whole messages helps while the catalogue repeats, as in a session.

Per repetition and target, in turn: N messages over one WebSocket, then N requests over one
keep-alive HTTP connection, each closed-loop at concurrency 1 (send, wait for
`response.completed`, repeat). Latency p50/p99 per message; the proxy process's CPU per message
(utime + stime from /proc/<pid>/stat over the run and its drain, per message the upstream got).
Ratios are taken within a repetition, then the median over repetitions.

Run: `python bench/ws_bench.py [--quick] [--messages N] [--reps N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import ClientSession, WSMsgType

from common import (
    OPENAI_HEADERS,
    TICK,
    cpu_ticks,
    elsewhere,
    load_average,
    median,
    request,
    revision,
    rss_mb,
    start_proxy,
    start_upstream,
    stop,
    upstream_stats,
    wait_idle,
)
from compact_bench import WORDS, _source_chunk, catalogue
from fake_upstream import as_sse, responses_events
from toolslim.core.pipeline import Pipeline

HERE = Path(__file__).resolve().parent
CODEX = HERE.parent / "captures" / "openai-responses.codex.json"
TARGETS = ("direct", "[]", "[toolschema]")
PIPELINES = {"[]": "", "[toolschema]": "toolschema"}
TRANSPORTS = ("ws", "http")
SIZE = 80_000
DELTAS = 5  # response.output_text.delta events per answer
TURN = "@@turn@@"  # where each message's own number goes
TURN_WIDTH = 8  # digits: every message has the same length
COMPLETED = b'{"type":"response.completed"'
RECEIVE_TIMEOUT = 30.0  # seconds any one answer may take before the run is abandoned


def responses_tools() -> list[dict[str, Any]]:
    """Claude Code's catalogue as Responses function tools (where `toolschema` has work)."""
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description", ""),
            "strict": False,
            "parameters": tool["input_schema"],
        }
        for tool in catalogue()
        if isinstance(tool, dict)
    ]


def template(size: int, seed: int, additional_tools: bool = False) -> tuple[bytes, bytes]:
    """The HTTP body of about `size` bytes, split around the per-message number.

    Codex's `additional_tools` input item is dropped unless asked for: a body that has one
    is parsed whole on every memo hit, which would measure that path instead of the relay."""
    rng = random.Random(seed)
    codex = orjson.loads(CODEX.read_bytes())
    tools = responses_tools()
    items: list[Any] = [
        item
        for item in codex["input"]
        if additional_tools or item.get("type") != "additional_tools"
    ]
    budget = size - len(orjson.dumps({**codex, "tools": tools}))
    while budget > 0:
        call = f"call_{rng.getrandbits(64):016x}"
        path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"
        turn = [
            {
                "type": "function_call",
                "name": "shell",
                "call_id": call,
                "arguments": orjson.dumps({"command": ["cat", path], "workdir": "/repo"}).decode(),
            },
            {"type": "function_call_output", "call_id": call, "output": _source_chunk(rng)},
        ]
        items += turn
        budget -= len(orjson.dumps(turn))
    text = f"Turn {TURN}: now run the tests again."
    items.append(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    body = orjson.dumps({**codex, "input": items, "tools": tools, "stream": True})
    head, tail = body.split(TURN.encode())
    return head, tail


def as_message(body: bytes) -> bytes:
    """An HTTP body as the `response.create` message Codex sends (`type` first)."""
    return b'{"type":"response.create",' + body[1:]


def maker(head: bytes, tail: bytes, numbers: Iterator[int]) -> Callable[[], bytes]:
    """Bodies that differ from every other one in the run in one fixed-width number."""

    def make() -> bytes:
        return head + b"%0*d" % (TURN_WIDTH, next(numbers)) + tail

    return make


async def ws_run(
    session: ClientSession, url: str, make: Callable[[], bytes], count: int, seconds: float
) -> list[float]:
    """Seconds from sending each message to its `response.completed`, one at a time."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    async with session.ws_connect(
        url, headers=OPENAI_HEADERS, max_msg_size=0, autoping=False, decode_text=False
    ) as ws:
        for _ in range(count):
            if time.monotonic() > deadline:
                break
            data = make()
            started = time.perf_counter()
            await ws.send_frame(data, WSMsgType.TEXT)
            while True:
                msg = await ws.receive(timeout=RECEIVE_TIMEOUT)
                if msg.type is not WSMsgType.TEXT:
                    raise SystemExit(f"{url}: the WebSocket ended ({msg.type!r}, {msg.data!r})")
                if msg.data.startswith(COMPLETED):
                    break
            latencies.append(time.perf_counter() - started)
    return latencies


async def http_run(
    session: ClientSession, url: str, make: Callable[[], bytes], count: int, seconds: float
) -> list[float]:
    """Seconds from sending each POST to the end of its SSE stream, one at a time."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        data = make()
        started = time.perf_counter()
        async with session.post(url, data=data, headers=OPENAI_HEADERS) as response:
            reply = await response.read()
            if response.status != 200 or COMPLETED not in reply:
                raise SystemExit(f"{url}: status {response.status}, {len(reply)} B")
        latencies.append(time.perf_counter() - started)
    return latencies


async def verify(
    session: ClientSession,
    name: str,
    port: int,
    upstream: int,
    head: bytes,
    tail: bytes,
    frames: list[bytes],
) -> str:
    """One message and one POST through the target: the answers arrive intact, and the
    upstream got the body byte-identical (direct, `[]`) or compacted as the pipeline does."""
    seen = []
    for transport in TRANSPORTS:
        body = head + b"9" * TURN_WIDTH + tail
        sent = as_message(body) if transport == "ws" else body
        url = f"http://127.0.0.1:{port}/v1/responses"
        if transport == "ws":
            async with session.ws_connect(url, headers=OPENAI_HEADERS, decode_text=False) as ws:
                await ws.send_frame(sent, WSMsgType.TEXT)
                got = [(await ws.receive(timeout=RECEIVE_TIMEOUT)).data for _ in frames]
            intact = got == frames
        else:
            async with session.post(url, data=sent, headers=OPENAI_HEADERS) as response:
                reply = await response.read()
                intact = response.status == 200 and reply == b"".join(as_sse(frames))
        if not intact:
            raise SystemExit(f"{name} {transport}: the answer did not arrive intact")
        last = "last_message" if transport == "ws" else "last_body"
        _, received = request(upstream, f"/_bench/{last}")
        if name == "[toolschema]":
            expected = Pipeline(["toolschema"]).run(sent, "openai-responses").body
            if received != expected or len(received) >= len(sent):
                raise SystemExit(f"{name} {transport}: upstream did not get the compacted body")
            seen.append(f"{transport} compacted {len(sent):,} -> {len(received):,} B")
        elif received != sent:
            raise SystemExit(f"{name} {transport}: upstream did not get the body byte-identical")
        else:
            seen.append(f"{transport} byte-identical ({len(sent):,} B)")
    return "; ".join(seen)


@dataclass
class Run:
    """One closed-loop run of one target over one transport."""

    target: str
    transport: str
    rep: int
    count: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    cpu_us: float | None = None  # proxy CPU per message the upstream received
    other_cores: float = 0.0  # CPU used meanwhile by processes outside this bench


async def measure(
    run: Run,
    session: ClientSession,
    url: str,
    make: Callable[[], bytes],
    count: int,
    seconds: float,
    pids: list[int],
    proxy: int | None,
    upstream_port: int,
) -> None:
    wait_idle(pids)
    key = "messages" if run.transport == "ws" else "requests"
    before = upstream_stats(upstream_port)[key]
    other = elsewhere(pids)
    proxy_before = cpu_ticks(proxy) if proxy else 0
    loop = ws_run if run.transport == "ws" else http_run
    latencies = await loop(session, url, make, count, seconds)
    wait_idle(pids)  # the proxy's counting after the last answer belongs to the run
    received = upstream_stats(upstream_port)[key] - before
    run.other_cores = other()
    run.count = len(latencies)
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    run.p50_ms, run.p99_ms = cuts[49] * 1000, cuts[98] * 1000
    if proxy is not None:
        run.cpu_us = (cpu_ticks(proxy) - proxy_before) / TICK * 1e6 / max(received, 1)


async def bench(args: argparse.Namespace, folder: Path) -> tuple[list[Run], dict[str, float]]:
    began = time.monotonic()
    # The client (this process) and the fake upstream on CPU 0, the proxies on CPU 1.
    split = args.pin == "auto" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2
    load_cpu, proxy_cpu = (0, 1) if split else (None, None)
    if split:
        os.sched_setaffinity(0, {0})
    placement = "client + upstream on CPU 0, proxies on CPU 1" if split else "not pinned"
    print(f"# ws_bench {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs")
    print(
        f"toolslim: {revision()}; placement: {placement}; proxies at --log-level {args.log_level}"
    )
    print(f"load average at start: {load_average()}")
    head, tail = template(SIZE, SIZE, args.additional_tools)
    frames = responses_events(DELTAS)
    size, extra = len(head) + TURN_WIDTH + len(tail), len(as_message(head)) - len(head)
    tools = responses_tools()
    print(
        f"body: {size:,} B over HTTP (+{extra} B as a response.create), {len(tools)} tools in "
        f"{len(orjson.dumps(tools)):,} B; answer: {len(frames)} events"
    )
    if args.additional_tools:
        print("input keeps Codex's additional_tools item (a second catalogue)")
    numbers = itertools.count(10**TURN_WIDTH // 10)
    makers = {"http": maker(head, tail, numbers), "ws": maker(as_message(head), tail, numbers)}
    processes: list[subprocess.Popen[bytes]] = []
    runs: list[Run] = []
    try:
        upstream, upstream_port = start_upstream(folder, "responses", load_cpu, DELTAS)
        processes.append(upstream)
        ports: dict[str, int] = {"direct": upstream_port}
        pids: dict[str, int | None] = {"direct": None}
        for name in PIPELINES:
            flags = ["--pipeline", PIPELINES[name], "--log-level", args.log_level]
            proxy = start_proxy(name, folder, {"openai": upstream_port}, flags, cpu=proxy_cpu)
            processes.append(proxy.process)
            ports[name], pids[name] = proxy.port, proxy.process.pid
        every = [p.pid for p in processes]
        async with ClientSession(auto_decompress=False) as session:
            for target in TARGETS:
                checked = await verify(
                    session, target, ports[target], upstream_port, head, tail, frames
                )
                print(f"check {target:>12}: answers intact; upstream got: {checked}")
            warm = max(50, args.messages // 10)
            for target in TARGETS:  # not measured: heaps grown, memo filled, pools open
                for transport in TRANSPORTS:
                    url = f"http://127.0.0.1:{ports[target]}/v1/responses"
                    loop = ws_run if transport == "ws" else http_run
                    await loop(session, url, makers[transport], warm, args.run_seconds)
            stopped = False
            for rep in range(args.reps):
                order = TARGETS[rep % 3 :] + TARGETS[: rep % 3]
                for target in order:
                    for transport in TRANSPORTS if rep % 2 == 0 else TRANSPORTS[::-1]:
                        if time.monotonic() - began > args.max_seconds:
                            stopped = True
                            break
                        run = Run(target, transport, rep)
                        await measure(
                            run,
                            session,
                            f"http://127.0.0.1:{ports[target]}/v1/responses",
                            makers[transport],
                            args.messages,
                            args.run_seconds,
                            every,
                            pids[target],
                            upstream_port,
                        )
                        runs.append(run)
            if stopped:
                print(f"stopped starting runs after --max-seconds {args.max_seconds:g}")
        rss = {name: rss_mb(pid) for name, pid in pids.items() if pid is not None}
    finally:
        stop(processes)
    return runs, rss


def report(runs: list[Run], reps: int) -> None:
    def pick(target: str, transport: str, rep: int | None = None) -> list[Run]:
        return [
            r
            for r in runs
            if (r.target, r.transport) == (target, transport) and rep in (None, r.rep)
        ]

    def cpu(items: list[Run]) -> str:
        values = [r.cpu_us for r in items if r.cpu_us is not None]
        return f"{median(values):.0f}" if values else "-"

    print()
    print(
        f"{'target':>12} {'msgs':>5} {'ws p50':>7} {'ws p99':>7} {'ws cpu':>7} "
        f"{'http p50':>8} {'http p99':>8} {'http cpu':>8} {'ws/http':>7} {'other':>5}"
    )
    print(f"{'':>12} {'':>5} {'ms':>7} {'ms':>7} {'µs/msg':>7} {'ms':>8} {'ms':>8} {'µs/req':>8}")
    for target in TARGETS:
        ws, http = pick(target, "ws"), pick(target, "http")
        if not ws or not http:
            continue
        ratios = []
        for rep in range(reps):
            one, other = pick(target, "ws", rep), pick(target, "http", rep)
            if one and other and one[0].cpu_us and other[0].cpu_us:
                ratios.append(one[0].cpu_us / other[0].cpu_us)
        ratio = f"{median(ratios):.3f}" if ratios else "-"
        print(
            f"{target:>12} {median([r.count for r in ws]):>5.0f} "
            f"{median([r.p50_ms for r in ws]):>7.3f} {median([r.p99_ms for r in ws]):>7.3f} "
            f"{cpu(ws):>7} {median([r.p50_ms for r in http]):>8.3f} "
            f"{median([r.p99_ms for r in http]):>8.3f} {cpu(http):>8} {ratio:>7} "
            f"{median([r.other_cores for r in ws + http]):>5.2f}"
        )
    print()
    print("added over direct (median over reps of the per-rep difference); [toolschema] vs []")
    print(
        f"{'target':>12} {'ws +p50 ms':>10} {'http +p50 ms':>12} {'ws cpu x':>8} {'http cpu x':>10}"
    )
    for target in PIPELINES:
        added: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
        versus: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
        for rep in range(reps):
            for transport in TRANSPORTS:
                mine, direct = pick(target, transport, rep), pick("direct", transport, rep)
                empty = pick("[]", transport, rep)
                if mine and direct:
                    added[transport].append(mine[0].p50_ms - direct[0].p50_ms)
                if mine and empty and mine[0].cpu_us and empty[0].cpu_us:
                    versus[transport].append(mine[0].cpu_us / empty[0].cpu_us)
        print(
            f"{target:>12} {median(added['ws']):>+10.3f} {median(added['http']):>+12.3f} "
            f"{median(versus['ws']):>8.3f} {median(versus['http']):>10.3f}"
        )
    print("cpu: the proxy process's CPU per message (ws) or request (http) the upstream got;")
    print("ws/http: ws cpu / http cpu per rep, median; other: cores used meanwhile by processes")
    print("outside this bench (the machine is shared: read a run with other > 0.2 as noisy)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 rep of 300 messages (< 1 min)")
    parser.add_argument("--messages", type=int, default=2000, help="per run (target, transport)")
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--run-seconds", type=float, default=30, help="end a run after")
    parser.add_argument("--max-seconds", type=float, default=540, help="start no run after")
    parser.add_argument("--log-level", default="info", help="the proxies' (info: the default)")
    parser.add_argument("--pin", choices=["auto", "none"], default="auto")
    parser.add_argument(
        "--additional-tools", action="store_true", help="keep Codex's additional_tools item"
    )
    args = parser.parse_args()
    if args.quick:
        args.reps, args.messages, args.max_seconds = 1, 300, 100
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolslim-wsbench-") as tmp:
        runs, rss = asyncio.run(bench(args, Path(tmp)))
    report(runs, args.reps)
    print("proxy RSS at the end: " + ", ".join(f"{n} {v:.0f} MB" for n, v in rss.items()))
    print(f"load average at end: {load_average()}")
    print(f"took {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
