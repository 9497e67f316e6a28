"""The benches' kit: free ports, the fake upstream and `toolslim serve` as child processes, CPU
and memory read from /proc, the load client, medians. Every bench in this folder uses it; none
keeps a copy of its own."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")
# What the benches send as the client: a fake key, never a real one.
ANTHROPIC_HEADERS = {
    "Content-Type": "application/json",
    "x-api-key": "sk-ant-bench-fake-key",
    "anthropic-version": "2023-06-01",
}
OPENAI_HEADERS = {"Authorization": "Bearer sk-bench-fake-key", "Content-Type": "application/json"}


# --- ports and processes ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: int | None) -> list[str]:
    """The command prefix that pins a child to `cpu` (none for None)."""
    return ["taskset", "-c", str(cpu)] if cpu is not None else []


def stop(processes: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process, then SIGKILL whichever has not exited within 10 s."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def request(
    port: int, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request on a fresh connection (POST when there is a body, with the Anthropic
    client headers unless others are given); the status and the de-chunked response body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        method = "GET" if body is None else "POST"
        sent = {} if body is None else (ANTHROPIC_HEADERS if headers is None else headers)
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def get_json(port: int, path: str) -> Any:
    status, body = request(port, path)
    if status != 200:
        raise SystemExit(f"GET {path} on port {port}: status {status}")
    return json.loads(body)


def wait_until(check: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    """Until `check()` is true (an OSError counts as not yet); exits naming `what` after
    `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def start_upstream(
    folder: Path, mode: str = "messages", cpu: int | None = None, events: int = 5
) -> tuple[subprocess.Popen[bytes], int]:
    """bench/fake_upstream.py in `mode` on a free port, once it accepts connections."""
    command = [sys.executable, str(HERE / "fake_upstream.py"), "--mode", mode, "--port", "0"]
    command += ["--events", str(events)]
    log = folder / f"upstream-{mode}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*pinned(cpu), *command], stdout=subprocess.PIPE, stderr=sink)
    assert process.stdout is not None
    line = process.stdout.readline().decode()  # "listening on 127.0.0.1:PORT"
    if not line.startswith("listening on"):
        raise SystemExit(f"fake upstream did not start: {line!r} {log.read_text()[-2000:]}")
    return process, int(line.rsplit(":", 1)[1])


@dataclass
class Proxy:
    """A `toolslim serve` child process and where it listens."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path


def start_proxy(
    name: str,
    folder: Path,
    upstreams: dict[str, int],
    flags: Sequence[str] = (),
    cpu: int | None = None,
    ready: Callable[[int], bool] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> Proxy:
    """`python -m toolslim serve` on a free port, each upstream (`anthropic`, `openai`, ...)
    at its port on 127.0.0.1, with `flags`; returned once `ready(port)` (default: /healthz
    answers 200). Its stderr goes to a log file in `folder`; `env` is added to its
    environment (ab_bench.py: PYTHONPATH, another build)."""
    port = free_port()
    command = [sys.executable, "-m", "toolslim", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port)]
    for api, upstream in upstreams.items():
        command += ["--upstream", f"{api}=http://127.0.0.1:{upstream}"]
    slug = "".join(c for c in name if c.isalnum() or c in "-_") or "empty"
    log = folder / f"proxy-{slug}.log"
    # The flags say what is measured: no TOOLSLIM_* variable of this shell changes it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSLIM_")} | (env or {})
    # The tool ledger's state file in the run's folder: a run neither reads nor grows the
    # user's (~/.local/state/toolslim), so one run's history never weighs on the next.
    env["XDG_STATE_HOME"] = str(folder)
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*pinned(cpu), *command, *flags],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
            preexec_fn=preexec_fn,  # a resource limit, set in the child before exec
        )
    proxy = Proxy(name, port, process, log)

    def up() -> bool:
        if process.poll() is not None:
            raise SystemExit(f"toolslim {name} exited: {log.read_text()[-2000:]}")
        return ready(port) if ready is not None else request(port, "/healthz")[0] == 200

    wait_until(up, f"toolslim {name} on port {port}", 30.0)
    return proxy


def upstream_stats(port: int) -> dict[str, int]:
    """What the fake upstream has received so far (its /_bench/stats)."""
    stats: dict[str, int] = get_json(port, "/_bench/stats")
    return stats


# --- CPU and memory, from /proc -----------------------------------------------------------


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (all its threads), in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def tree_ticks(pid: int) -> int:
    """utime + stime of a process and its children (gunicorn's master and its workers)."""
    ticks = cpu_ticks(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == pid:  # field 4: the parent
            ticks += cpu_ticks(int(stat.parent.name))
    return ticks


def busy_ticks() -> int:
    """Non-idle ticks of the whole machine, summed over CPUs."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(values) - values[3] - values[4]  # minus idle and iowait


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb(pid: int) -> float:
    """The process's resident memory (VmRSS), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def elsewhere(pids: Iterable[int]) -> Callable[[], float]:
    """A function giving the CPU cores used, since its previous call, by everything on the
    machine but this process, its finished children and `pids`: the share of a shared machine
    a bench must report beside its figures."""
    pids = list(pids)

    def ours() -> float:
        ticks = 0
        for pid in pids:
            try:
                ticks += cpu_ticks(pid)
            except OSError:  # exited meanwhile
                continue
        return ticks / TICK + children_cpu() + self_cpu()

    state = [time.monotonic(), busy_ticks(), ours()]

    def cores() -> float:
        now, busy, mine = time.monotonic(), busy_ticks(), ours()
        spent = (busy - state[1]) / TICK - (mine - state[2])
        used = spent / max(1e-9, now - state[0])
        state[:] = [now, busy, mine]
        return max(0.0, used)

    return cores


def wait_idle(pids: list[int], limit: float = 3.0) -> None:
    """Until no process of `pids` used CPU for two polls in a row (at most `limit` s)."""
    deadline = time.monotonic() + limit
    last, quiet = [cpu_ticks(p) for p in pids], 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        now = [cpu_ticks(p) for p in pids]
        quiet = quiet + 1 if now == last else 0
        last = now


# --- the load client ----------------------------------------------------------------------


@dataclass
class Load:
    """What a `load` run did."""

    sent: int = 0
    done: int = 0
    failed: int = 0  # answered with another status, or a body `check` refused
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, per answered request


async def load(
    url: str,
    bodies: Sequence[bytes],
    total: int,
    concurrency: int,
    headers: dict[str, str] | None = None,
    deadline: float = float("inf"),
    check: Callable[[bytes, int, bytes], bool] | None = None,
    every: tuple[int, Callable[[Load], Awaitable[None]]] | None = None,
) -> Load:
    """POST `total` requests to `url` over `concurrency` keep-alive connections, the bodies in
    rotation, until `deadline` (time.monotonic()). `check(body, status, reply)` says whether an
    answer was right (default: status 200); `every` = (n, call) awaits `call` after each n-th
    answer, for samples taken while the load runs."""
    result = Load()
    sent_headers = ANTHROPIC_HEADERS if headers is None else headers
    started = time.monotonic()
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while result.sent < total and time.monotonic() < deadline:
                body = bodies[result.sent % len(bodies)]
                result.sent += 1
                began = time.perf_counter()
                async with session.post(url, data=body, headers=sent_headers) as response:
                    reply = await response.read()
                result.latencies.append(time.perf_counter() - began)
                right = check(body, response.status, reply) if check else response.status == 200
                result.failed += not right
                result.done += 1
                if every is not None and result.done % every[0] == 0:
                    await every[1](result)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.monotonic() - started
    return result


# --- figures ------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def revision() -> str:
    """The commit of the toolslim being measured, and whether src/ differs from it."""
    try:
        git = ["git", "-C", str(HERE.parent)]
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True)
        dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True)
        mark = " + uncommitted changes in src/" if dirty.stdout.strip() else ""
        return head.stdout.decode().strip() + mark
    except OSError:
        return "unknown revision"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"
