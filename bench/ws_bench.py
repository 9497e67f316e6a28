"""What the WebSocket relay costs a `response.create`: direct vs `toolslim` `[]` vs `[toolschema]`,
and against the HTTP path (POST /v1/responses, streamed) for the same body in the same run.

Starts its own fake Responses upstream (this file with `--fake-upstream`: an aiohttp server that
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
import contextlib
import itertools
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import ClientSession, WSMsgType, web
from compact_bench import WORDS, _source_chunk, catalogue
from proxy_bench import (
    TICK,
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
    stop,
    upstream_stats,
    wait_idle,
    wait_until,
)

from toolslim.core.pipeline import Pipeline

HERE = Path(__file__).resolve().parent
CODEX = HERE.parent / "captures" / "openai-responses.codex.json"
TARGETS = ("direct", "[]", "[toolschema]")
PIPELINES = {"[]": "", "[toolschema]": "toolschema"}
TRANSPORTS = ("ws", "http")
SIZE = 80_000
DELTAS = 5  # response.output_text.delta events per answer
HEADERS = {"Authorization": "Bearer sk-bench-fake-key", "Content-Type": "application/json"}
TURN = "@@turn@@"  # where each message's own number goes
TURN_WIDTH = 8  # digits: every message has the same length
COMPLETED = b'{"type":"response.completed"'
RECEIVE_TIMEOUT = 30.0  # seconds any one answer may take before the run is abandoned


def events(deltas: int) -> list[bytes]:
    """One answer's events, compact JSON, `type` first as the Responses API sends them."""
    shell = {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": "gpt-5-codex",
        "status": "in_progress",
        "output": [],
        "usage": None,
    }
    out: list[dict[str, Any]] = [{"type": "response.created", "response": shell}]
    position = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    out += [{"type": "response.output_text.delta", **position, "delta": "word "}] * deltas
    usage = {
        "input_tokens": 19_000,
        "input_tokens_details": {"cached_tokens": 18_000},
        "output_tokens": deltas,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 19_000 + deltas,
    }
    text = {"type": "output_text", "text": "word " * deltas, "annotations": []}
    item = {"id": "msg_bench", "type": "message", "role": "assistant", "status": "completed"}
    done = {**shell, "status": "completed", "output": [{**item, "content": [text]}]}
    out.append({"type": "response.completed", "response": {**done, "usage": usage}})
    return [orjson.dumps({**event, "sequence_number": n}) for n, event in enumerate(out)]


def sse(frames: list[bytes]) -> list[bytes]:
    """The same events as an HTTP stream's SSE events, one chunk each."""
    return [b"event: %s\ndata: %s\n\n" % (orjson.loads(f)["type"].encode(), f) for f in frames]


@dataclass
class Counters:
    messages: int = 0  # response.create messages over WebSockets
    posts: int = 0  # POST /v1/responses
    received: int = 0  # bytes of both
    last_message: bytes = b""
    last_post: bytes = b""


COUNTERS = web.AppKey("counters", Counters)
FRAMES = web.AppKey("frames", list)


async def upstream_websocket(request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=0, decode_text=False)
    await ws.prepare(request)
    counters, frames = request.app[COUNTERS], request.app[FRAMES]
    async for msg in ws:
        if msg.type is not WSMsgType.TEXT:
            break
        counters.messages += 1
        counters.received += len(msg.data)
        counters.last_message = msg.data
        for frame in frames:
            await ws.send_frame(frame, WSMsgType.TEXT)
    return ws


async def upstream_post(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    counters = request.app[COUNTERS]
    counters.posts += 1
    counters.received += len(body)
    counters.last_post = body
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for chunk in sse(request.app[FRAMES]):
        await response.write(chunk)
    await response.write_eof()
    return response


async def upstream_bench(request: web.Request) -> web.Response:
    counters = request.app[COUNTERS]
    name = request.match_info["name"]
    if name == "last_message":
        return web.Response(body=counters.last_message)
    if name == "last_post":
        return web.Response(body=counters.last_post)
    stats = {"messages": counters.messages, "posts": counters.posts, "bytes": counters.received}
    return web.json_response(stats)


async def serve_upstream(port: int, deltas: int) -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[COUNTERS], app[FRAMES] = Counters(), events(deltas)
    app.router.add_get("/v1/responses", upstream_websocket)
    app.router.add_post("/v1/responses", upstream_post)
    app.router.add_get("/_bench/{name}", upstream_bench)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"listening on 127.0.0.1:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


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
        url, headers=HEADERS, max_msg_size=0, autoping=False, decode_text=False
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
        async with session.post(url, data=data, headers=HEADERS) as response:
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
            async with session.ws_connect(url, headers=HEADERS, decode_text=False) as ws:
                await ws.send_frame(sent, WSMsgType.TEXT)
                got = [(await ws.receive(timeout=RECEIVE_TIMEOUT)).data for _ in frames]
            intact = got == frames
        else:
            async with session.post(url, data=sent, headers=HEADERS) as response:
                intact = response.status == 200 and await response.read() == b"".join(sse(frames))
        if not intact:
            raise SystemExit(f"{name} {transport}: the answer did not arrive intact")
        last = "last_message" if transport == "ws" else "last_post"
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
    key = "messages" if run.transport == "ws" else "posts"
    before = upstream_stats(upstream_port)[key]
    ours_before = sum(cpu_ticks(p) for p in pids) / TICK + children_cpu() + self_cpu()
    busy_before, started = busy_ticks(), time.monotonic()
    proxy_before = cpu_ticks(proxy) if proxy else 0
    loop = ws_run if run.transport == "ws" else http_run
    latencies = await loop(session, url, make, count, seconds)
    wait_idle(pids)  # the proxy's counting after the last answer belongs to the run
    elapsed = time.monotonic() - started
    received = upstream_stats(upstream_port)[key] - before
    ours = sum(cpu_ticks(p) for p in pids) / TICK + children_cpu() + self_cpu() - ours_before
    run.other_cores = max(0.0, (busy_ticks() - busy_before) / TICK - ours) / elapsed
    run.count = len(latencies)
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    run.p50_ms, run.p99_ms = cuts[49] * 1000, cuts[98] * 1000
    if proxy is not None:
        run.cpu_us = (cpu_ticks(proxy) - proxy_before) / TICK * 1e6 / max(received, 1)


def start_upstream(cpu: int | None, folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    command = [sys.executable, str(Path(__file__).resolve()), "--fake-upstream", "--port", "0"]
    with (folder / "upstream.log").open("wb") as sink:
        process = subprocess.Popen([*pinned(cpu), *command], stdout=subprocess.PIPE, stderr=sink)
    assert process.stdout is not None
    line = process.stdout.readline().decode()  # "listening on 127.0.0.1:PORT"
    if not line.startswith("listening on"):
        raise SystemExit(f"fake upstream did not start: {(folder / 'upstream.log').read_text()}")
    return process, int(line.rsplit(":", 1)[1])


def start_proxy(
    name: str, upstream: int, cpu: int | None, log_level: str, folder: Path
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = [sys.executable, "-m", "toolslim", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--upstream", f"openai=http://127.0.0.1:{upstream}"]
    command += ["--pipeline", PIPELINES[name], "--log-level", log_level]
    log = folder / f"proxy-{PIPELINES[name] or 'empty'}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*pinned(cpu), *command], stdout=subprocess.DEVNULL, stderr=sink)

    def up() -> bool:
        if process.poll() is not None:
            raise SystemExit(f"toolslim {name} exited: {log.read_text()[-2000:]}")
        return request(port, "/healthz")[0] == 200

    wait_until(up, f"toolslim {name} on port {port}")
    return process, port


async def bench(args: argparse.Namespace, folder: Path) -> tuple[list[Run], dict[str, float]]:
    began = time.monotonic()
    # The client (this process) and the fake upstream on CPU 0, the proxies on CPU 1.
    split = args.pin == "auto" and shutil.which("taskset") and (os.cpu_count() or 1) >= 2
    load_cpu, proxy_cpu = (0, 1) if split else (None, None)
    if split:
        os.sched_setaffinity(0, {0})
    placement = "client + upstream on CPU 0, proxies on CPU 1" if split else "not pinned"
    load = os.getloadavg()
    print(f"# ws_bench {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs")
    print(
        f"toolslim: {revision()}; placement: {placement}; proxies at --log-level {args.log_level}"
    )
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    head, tail = template(SIZE, SIZE, args.additional_tools)
    frames = events(DELTAS)
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
        upstream, upstream_port = start_upstream(load_cpu, folder)
        processes.append(upstream)
        ports: dict[str, int] = {"direct": upstream_port}
        pids: dict[str, int | None] = {"direct": None}
        for name in PIPELINES:
            process, ports[name] = start_proxy(
                name, upstream_port, proxy_cpu, args.log_level, folder
            )
            processes.append(process)
            pids[name] = process.pid
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
    parser.add_argument("--fake-upstream", action="store_true", help="be the fake upstream only")
    parser.add_argument("--port", type=int, default=0, help="the fake upstream's")
    args = parser.parse_args()
    if args.fake_upstream:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_upstream(args.port, DELTAS))
        return
    if args.quick:
        args.reps, args.messages, args.max_seconds = 1, 300, 100
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolslim-wsbench-") as tmp:
        runs, rss = asyncio.run(bench(args, Path(tmp)))
    report(runs, args.reps)
    load = os.getloadavg()
    print("proxy RSS at the end: " + ", ".join(f"{n} {v:.0f} MB" for n, v in rss.items()))
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"took {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
