"""How long a hostile or broken client can stall everyone else (issue 16).

Starts bench/fake_upstream.py in `bomb` mode, `python -m toolslim serve` with RLIMIT_NOFILE at
1,024 (soft), and a probe process that sends `GET /healthz` every 10 ms on one keep-alive
connection and records each answer's latency. Then runs each abuse in turn while the probe runs,
and reports the longest probe latency (the event loop's longest stall, as a client sees it),
whether every probe was answered, and the proxy's peak VmRSS during the abuse:

- gzip: requests whose body is 4 MB of tiny gzip members (decoding is linear, off the loop);
- zstd: the same with zstd frames (needs the zstandard module);
- catalogue: requests with a 31 MB catalogue (over max_catalogue_bytes: not parsed);
- bomb: responses of 1 GiB of spaces gzipped to ~1 MB (the usage observer's copy is bounded);
- slow: 1,100 connections that send their request headers a byte a second, reconnecting when
  closed (at 1,024 descriptors the door keeps room for prompt clients);
- uploads: 20 connections that each send 30 MiB of a 31 MiB body and stop (the buffer budget,
  256 MiB, holds what fits; the rest streams through);
- flood: 2,200 connections that send a request header byte every 5 s (one closed by the
  proxy reconnects 5 s later, at the same pace), while a normal request on a new connection
  goes out every 0.25 s: each must be answered within 10 s (issue 23's probe of
  `--workers 2`). Reconnecting at once instead is a connect flood that fills the kernel's
  accept queue whatever the proxy does: one process and two workers alike then answer few
  normal requests (2 of 41 and 3 of 31 measured, shared machine).

`--workers N` serves with N gunicorn workers (RSS is then the master's and the workers' sum);
the connection limits, timeouts and buffer budget hold the same way in each.


An idle window first is the baseline: each stall is also shown as a multiple of the idle one.
Goals: no stall over 100 ms, peak RSS under 450 MB, every probe answered. Everything is on
127.0.0.1; each abuse is bounded in seconds. Run: `python bench/abuse_bench.py [--seconds S]
[--only gzip,slow,...] [--workers N]`. The machine may be shared: `other` is the CPU other
processes used meanwhile (cores), as in proxy_bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from common import elsewhere, get_json, pinned, rss_mb, start_proxy, start_upstream
from common import stop as stop_processes

PROBE_EVERY = 0.010
PROBE_TIMEOUT = 5.0
FILES = 1024  # the proxy's RLIMIT_NOFILE (soft)
GOALS = {"stall_ms": 100.0, "rss_mb": 450.0}
HEADERS = (
    b"Content-Type: application/json\r\nx-api-key: sk-ant-bench-fake-key\r\n"
    b"anthropic-version: 2023-06-01\r\n"
)


# --- the fake upstream and the probe (child processes of this file) --------------------------


def run_probe(port: int, out: str) -> None:
    """GET /healthz every 10 ms until killed; one line per probe: sent-at and seconds taken,
    or -1 when it failed (then it reconnects)."""
    request = b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n"
    with open(out, "w", buffering=1) as log:
        sock: socket.socket | None = None
        next_at = time.monotonic()
        while True:
            sent = time.monotonic()
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT)
                sock.sendall(request)
                data = b""
                while b"\r\n\r\n" not in data or not data.endswith(b"}"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise ConnectionError("closed")
                    data += chunk
                if not data.startswith(b"HTTP/1.1 200"):
                    raise ConnectionError(data[:12].decode(errors="replace"))
                log.write(f"{sent:.6f} {time.monotonic() - sent:.6f}\n")
            except OSError:
                log.write(f"{sent:.6f} -1\n")
                if sock is not None:
                    sock.close()
                sock = None
            next_at = max(next_at + PROBE_EVERY, time.monotonic())
            time.sleep(max(0.0, next_at - time.monotonic()))


# --- the abuses ---------------------------------------------------------------------------


async def post(port: int, body: bytes, extra: bytes = b"", read: bool = True) -> int:
    """One POST /v1/messages with these body bytes; the bytes of the answer read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        head = b"POST /v1/messages HTTP/1.1\r\nHost: bench\r\n" + HEADERS + extra
        writer.write(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()
        got = 0
        while read and (chunk := await reader.read(1 << 20)):
            got += len(chunk)
        return got
    finally:
        writer.close()


def small_body() -> bytes:
    return json.dumps({"model": "m", "max_tokens": 8, "messages": [], "tools": []}).encode()


def gzip_members(size: int) -> bytes:
    member = gzip.compress(b" ", compresslevel=1)
    return member * (size // len(member)) + gzip.compress(small_body())


def zstd_frames(size: int) -> bytes:
    import zstandard

    frame = zstandard.ZstdCompressor().compress(b" ")
    return frame * (size // len(frame)) + zstandard.ZstdCompressor().compress(small_body())


def catalogue(size: int) -> bytes:
    tool = {
        "name": "t",
        "description": "d" * 200,
        "input_schema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "title": "T",
            "properties": {f"p{j}": {"type": "string", "title": "P"} for j in range(20)},
        },
    }
    one = len(json.dumps(tool)) + 1
    tools = [dict(tool, name=f"t{i}") for i in range(size // one)]
    return json.dumps({"model": "m", "max_tokens": 8, "messages": [], "tools": tools}).encode()


async def repeat(seconds: float, make: Callable[[], Awaitable[object]], at_once: int = 1) -> int:
    """Run `make()` `at_once` at a time until `seconds` pass; how many ran."""
    end = time.monotonic() + seconds
    done = 0

    async def lane() -> None:
        nonlocal done
        while time.monotonic() < end:
            await make()
            done += 1

    await asyncio.gather(*(lane() for _ in range(at_once)))
    return done


async def abuse_gzip(port: int, seconds: float) -> str:
    body = gzip_members(4_000_000)
    n = await repeat(seconds, lambda: post(port, body, b"Content-Encoding: gzip\r\n"), 2)
    return f"{n} requests of {len(body) / 1e6:.1f} MB"


async def abuse_zstd(port: int, seconds: float) -> str:
    body = zstd_frames(4_000_000)
    n = await repeat(seconds, lambda: post(port, body, b"Content-Encoding: zstd\r\n"), 2)
    return f"{n} requests of {len(body) / 1e6:.1f} MB"


async def abuse_catalogue(port: int, seconds: float) -> str:
    body = catalogue(31_000_000)
    n = await repeat(seconds, lambda: post(port, body), 2)
    return f"{n} requests of {len(body) / 1e6:.1f} MB"


async def abuse_bomb(port: int, seconds: float) -> str:
    n = await repeat(seconds, lambda: post(port, small_body(), b"X-Bomb: 1\r\n"), 2)
    return f"{n} responses inflating to 1 GiB"


async def abuse_slow(port: int, seconds: float, count: int = 1100) -> str:
    """`count` connections sending request headers a byte a second, reconnecting."""
    end = time.monotonic() + seconds
    opened = closed = 0
    head = b"POST /v1/messages HTTP/1.1\r\nHost: bench\r\n" + HEADERS

    async def slow() -> None:
        nonlocal opened, closed
        while time.monotonic() < end:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            opened += 1
            try:
                for byte in head:
                    if time.monotonic() >= end:
                        break
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(1.0)
            except OSError:
                closed += 1
            finally:
                writer.close()

    await asyncio.gather(*(slow() for _ in range(count)))
    return f"{count} at once, {opened} opened, {closed} closed by the proxy"


async def abuse_uploads(port: int, seconds: float, count: int = 20) -> str:
    """`count` connections that send 30 MiB of a 31 MiB body and then hold."""
    writers = []
    body = b"x" * (30 << 20)
    for _ in range(count):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        head = b"POST /v1/messages HTTP/1.1\r\nHost: bench\r\n" + HEADERS
        writer.write(head + b"Content-Length: %d\r\n\r\n" % (31 << 20))
        writers.append(writer)

    async def send(writer: asyncio.StreamWriter) -> None:
        for at in range(0, len(body), 1 << 20):
            writer.write(body[at : at + (1 << 20)])
            await writer.drain()

    await asyncio.wait_for(asyncio.gather(*(send(w) for w in writers)), seconds * 4)
    await asyncio.sleep(seconds)
    for writer in writers:
        writer.close()
    return f"{count} x 30 MiB sent and held for {seconds:g} s"


FLOOD_EVERY = 5.0  # seconds between two header bytes of a flooding connection
NORMAL_EVERY = 0.25
NORMAL_WITHIN = 10.0


async def abuse_flood(port: int, seconds: float, count: int = 2200) -> str:
    """`count` connections sending request headers a byte every FLOOD_EVERY s, reconnecting;
    meanwhile normal requests, each on a new connection, that must be answered in time."""
    end = time.monotonic() + seconds
    opened = closed = 0
    head = b"POST /v1/messages HTTP/1.1\r\nHost: bench\r\n" + HEADERS
    latencies: list[float] = []  # -1: not answered within NORMAL_WITHIN

    async def slow() -> None:
        nonlocal opened, closed
        while time.monotonic() < end:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            opened += 1
            try:
                for byte in head:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    with contextlib.suppress(TimeoutError):  # closed: read returns b""
                        if not await asyncio.wait_for(reader.read(1), FLOOD_EVERY):
                            raise ConnectionResetError
                    if time.monotonic() >= end:
                        break
            except OSError:
                closed += 1
                await asyncio.sleep(max(0.0, min(FLOOD_EVERY, end - time.monotonic())))
            finally:
                writer.close()

    async def normal() -> None:
        sent = time.monotonic()
        try:
            await asyncio.wait_for(post(port, small_body()), NORMAL_WITHIN)
            latencies.append(time.monotonic() - sent)
        except (OSError, TimeoutError):
            latencies.append(-1.0)

    async def normals() -> None:
        tasks = []
        while time.monotonic() < end:
            tasks.append(asyncio.create_task(normal()))
            await asyncio.sleep(NORMAL_EVERY)
        await asyncio.gather(*tasks)

    async def midway() -> str:
        await asyncio.sleep(seconds / 2)
        try:
            stats = await asyncio.wait_for(
                asyncio.to_thread(get_json, port, "/stats"), NORMAL_WITHIN
            )
        except (OSError, TimeoutError, SystemExit) as exc:
            return f"/stats midway: no answer ({type(exc).__name__})"
        return f"/stats midway: connections {json.dumps(stats['connections'])}"

    stats, *_ = await asyncio.gather(midway(), normals(), *(slow() for _ in range(count)))
    answered = [took for took in latencies if took >= 0]
    return (
        f"{count} at once, {opened} opened, {closed} closed by the proxy; normal requests on "
        f"new connections: {len(answered)} of {len(latencies)} answered within "
        f"{NORMAL_WITHIN:g} s (slowest {max(answered, default=0.0):.2f} s); {stats}"
    )


ABUSES: dict[str, Callable[[int, float], Awaitable[str]]] = {
    "gzip": abuse_gzip,
    "zstd": abuse_zstd,
    "catalogue": abuse_catalogue,
    "bomb": abuse_bomb,
    "slow": abuse_slow,
    "uploads": abuse_uploads,
    "flood": abuse_flood,
}


# --- the run ------------------------------------------------------------------------------


@dataclass
class Window:
    name: str
    start: float
    end: float
    what: str
    rss_mb: float
    other: float


def read_probes(path: Path) -> list[tuple[float, float]]:
    probes = []
    for line in path.read_text().splitlines():
        sent, took = line.split()
        probes.append((float(sent), float(took)))
    return probes


def summarize(window: Window, probes: list[tuple[float, float]]) -> dict[str, float]:
    inside = [took for sent, took in probes if window.start <= sent <= window.end]
    answered = [took for took in inside if took >= 0]
    ordered = sorted(answered)
    return {
        "sent": len(inside),
        "answered": len(answered),
        "max_ms": 1000 * max(answered, default=0.0),
        "p99_ms": 1000 * (ordered[int(len(ordered) * 0.99)] if ordered else 0.0),
        "median_ms": 1000 * (statistics.median(answered) if answered else 0.0),
    }


def lower_files() -> None:
    resource.setrlimit(
        resource.RLIMIT_NOFILE, (FILES, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    )


async def sample_rss(pid: int, stop: asyncio.Event, peak: list[float]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], host_rss_mb(pid))
        await asyncio.sleep(0.1)


def host_rss_mb(pid: int) -> float:
    """VmRSS of `pid` and of its children (gunicorn's workers), in MB."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        own = rss_mb(pid)
    except OSError:  # exited meanwhile
        return 0.0
    return own + sum(host_rss_mb(int(child)) for child in children)


async def run(args: argparse.Namespace) -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))  # for 2,200 clients
    pin = args.pin == "auto" and shutil.which("taskset") is not None and os.cpu_count() != 1
    abusers_cpu, proxy_cpu = (0, 1) if pin else (None, None)
    folder = Path(tempfile.mkdtemp(prefix="toolslim-abuse-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        upstream, upstream_port = start_upstream(folder, "bomb", abusers_cpu)  # the bomb built
        processes.append(upstream)
        flags = ["--log-level", "warning", "--workers", str(args.workers)]
        upstreams = {"anthropic": upstream_port}
        proxy = start_proxy("abused", folder, upstreams, flags, proxy_cpu, preexec_fn=lower_files)
        processes.append(proxy.process)
        probes_file = folder / "probes.txt"
        # The probe beside the proxy: CPU 0 is busy with the abusers and the upstream.
        me = [sys.executable, str(Path(__file__).resolve())]
        probe_command = [*me, "--probe", str(proxy.port), str(probes_file)]
        probe = subprocess.Popen([*pinned(proxy_cpu), *probe_command])
        processes.append(probe)
        other = elsewhere(p.pid for p in processes)
        windows = []
        print(
            f"proxy pid {proxy.process.pid}, workers {args.workers}, RLIMIT_NOFILE {FILES}; "
            f"pinned: {pin}; "
            f"{args.seconds:g} s each"
        )
        await asyncio.sleep(3.0)  # past the proxy's start-up
        names = ["idle", *[n for n in ABUSES if not args.only or n in args.only.split(",")]]
        for name in names:
            stop, peak = asyncio.Event(), [0.0]
            sampler = asyncio.create_task(sample_rss(proxy.process.pid, stop, peak))
            other()
            start = time.monotonic()
            if name == "idle":
                await asyncio.sleep(args.seconds)
                what = "nothing"
            else:
                try:
                    what = await ABUSES[name](proxy.port, args.seconds)
                except ImportError as exc:
                    what = f"skipped: {exc.name} is not installed"
            end = time.monotonic()
            await asyncio.sleep(0.5)  # the last probes' answers
            stop.set()
            await sampler
            windows.append(Window(name, start, end, what, peak[0], other()))
            print(f"  {name}: {what}", flush=True)
            await asyncio.sleep(1.0)  # let the proxy settle between abuses
        probe.terminate()
        probe.wait(5)
        probes = read_probes(probes_file)
        stats = get_json(proxy.port, "/stats")
        return report(windows, probes, stats, proxy.log)
    finally:
        stop_processes(reversed(processes))


def report(
    windows: list[Window], probes: list[tuple[float, float]], stats: dict[str, object], log: Path
) -> int:
    print()
    print(
        f"{'abuse':>10} {'probes':>7} {'answered':>8} {'max ms':>8} {'p99 ms':>7} "
        f"{'x idle':>7} {'RSS MB':>7} {'other':>5}  goal"
    )
    idle = summarize(windows[0], probes)["max_ms"] or 1.0
    met = True
    for window in windows:
        s = summarize(window, probes)
        ok = (
            s["max_ms"] <= GOALS["stall_ms"]
            and window.rss_mb <= GOALS["rss_mb"]
            and s["answered"] == s["sent"]
        )
        met = met and ok
        print(
            f"{window.name:>10} {s['sent']:>7.0f} {s['answered']:>8.0f} {s['max_ms']:>8.1f} "
            f"{s['p99_ms']:>7.1f} {s['max_ms'] / idle:>7.1f} {window.rss_mb:>7.0f} "
            f"{window.other:>5.2f}  {'met' if ok else 'MISSED'}"
        )
    connections = stats.get("connections", {})
    components = stats.get("components", {})
    print()
    print(f"/stats connections: {json.dumps(connections)}")
    for name, counters in dict(components).items():  # type: ignore[call-overload]
        print(f"/stats {name} skip_reasons: {json.dumps(counters['skip_reasons'])}")
    logged = log.read_bytes()
    print(f"proxy log: {len(logged.splitlines())} lines, {len(logged)} bytes (level warning)")
    goals = f"stall <= {GOALS['stall_ms']:g} ms, RSS <= {GOALS['rss_mb']:g} MB, all answered"
    print(f"goals ({goals}): {'met' if met else 'MISSED'}")
    return 0 if met else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per abuse (default 10)")
    parser.add_argument("--only", default="", help="comma-separated abuses: " + ",".join(ABUSES))
    parser.add_argument("--pin", choices=("auto", "none"), default="auto")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers (default 1)")
    parser.add_argument("--probe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        run_probe(int(args.probe[0]), args.probe[1])
        return
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
