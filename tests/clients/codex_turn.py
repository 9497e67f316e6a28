"""One `codex exec` turn against the fake Responses upstream, optionally through `toolslim
serve`, run INSIDE a loopback-only network namespace; everything observed goes to a report.

    timeout 150 unshare -n python -m tests.clients.codex_turn --codex BIN --work DIR [--proxy]

(from the repository root). The report, DIR/report.json, holds codex's exit status and output,
what the fake upstream received, and toolslim's /stats and log. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from tests.fake_responses import Options, Recording, make_fake_responses

KEY = "sk-fake-codex-key-0123456789"
PROMPT = "say hi"
# Codex's OpenTelemetry exporter otherwise spends 5 s at exit failing to reach its collector.
CONFIG = """\
openai_base_url = "{base}/v1"

[analytics]
enabled = false
"""
STATS_WAIT = 5.0  # seconds /stats may take to settle after codex exits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.codex_turn")
    parser.add_argument("--codex", type=Path, required=True, help="the codex executable")
    parser.add_argument("--work", type=Path, required=True, help="empty directory for it all")
    parser.add_argument("--proxy", action="store_true", help="put toolslim serve in between")
    parser.add_argument("--refuse-upgrade", type=int, metavar="STATUS")
    parser.add_argument("--capture", action="store_true", help="toolslim serve --capture")
    parser.add_argument(
        "--call",
        type=json.loads,
        action="append",
        default=[],
        metavar="JSON",
        help="answer the next request with this output item (repeatable)",
    )
    parser.add_argument("--model", help="codex's -m (its default model otherwise)")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds codex may run")
    args = parser.parse_args(argv)
    args.codex, args.work = args.codex.resolve(), args.work.resolve()
    report: dict[str, Any] = {"error": None, "codex": None, "proxy": None, "recording": []}
    return reported(args.work, report, lambda: _turn(args, report))


def reported(
    work: Path, report: dict[str, Any], turn: Callable[[], Coroutine[Any, Any, None]]
) -> int:
    """Run one client's turn inside the namespace (its loopback brought up) and write `report`
    to work/report.json whatever happens; 0 when the turn raised nothing."""
    # SIGTERM (from `timeout`) unwinds through the finally blocks, so no child outlives us.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
        asyncio.run(turn())
    except (Exception, KeyboardInterrupt) as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        (work / "report.json").write_text(json.dumps(report, indent=1))
    return 0 if report["error"] is None else 1


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


async def _turn(args: argparse.Namespace, report: dict[str, Any]) -> None:
    recording = Recording()
    fake = web.AppRunner(
        make_fake_responses(
            Options(refuse_upgrade=args.refuse_upgrade, calls=tuple(args.call)), recording
        )
    )
    await fake.setup()
    try:
        await web.TCPSite(fake, "127.0.0.1", 0).start()
        upstream = f"http://127.0.0.1:{fake.addresses[0][1]}"
        if args.proxy:
            async with toolslim_serve(args.work, f"openai={upstream}", args.capture) as (
                base,
                proxy_report,
            ):
                report["proxy"] = proxy_report
                report["codex"] = await _codex(args, base)
                proxy_report["stats"] = await settled_stats(base)
        else:
            report["codex"] = await _codex(args, upstream)
    finally:
        report["recording"] = [item.to_json() for item in recording.received]
        await fake.cleanup()


async def _codex(args: argparse.Namespace, base: str) -> dict[str, Any]:
    home, codex_home, cwd = (args.work / name for name in ("home", "codex-home", "cwd"))
    for directory in (home, codex_home, cwd):
        directory.mkdir(parents=True, exist_ok=True)
    config = CONFIG.format(base=base)
    (codex_home / "config.toml").write_text(config)
    # A fresh environment: nothing of the caller's (keys, proxies, RUST_LOG) leaks in.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "CODEX_API_KEY": KEY,
        "LANG": "C.UTF-8",
    }
    command = [str(args.codex), "exec", "--skip-git-repo-check"]
    command += ["-m", args.model] if args.model else []
    command.append(args.prompt)
    started = time.monotonic()
    # Its own process group: the node launcher runs the native binary as a child, and a kill
    # must reach both.
    child = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = await asyncio.wait_for(child.communicate(), args.timeout)
    except TimeoutError:
        timed_out = True
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = await asyncio.wait_for(child.communicate(), 10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # whatever of the group is left
    return {
        "command": command,
        "config": config,
        "returncode": None if timed_out else child.returncode,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 1),
        "stdout": stdout.decode(errors="replace"),
        "stderr": stderr.decode(errors="replace"),
    }


@contextlib.asynccontextmanager
async def toolslim_serve(work: Path, upstream: str, capture: bool = False) -> Any:
    """`toolslim serve` before the fake upstream, ready; stopped (and its log read) on exit;
    with `capture`, what it captured (one record a request) goes into the report too."""
    port = _free_port()
    log_path = work / "toolslim.log"
    command = [sys.executable, "-m", "toolslim", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--upstream", upstream, "--log-level", "info"]
    command += ["--capture", str(work / "capture")] if capture else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSLIM_")}
    env["XDG_STATE_HOME"] = str(work / "state")  # its tool ledger starts empty, every run
    proxy_report: dict[str, Any] = {"command": command, "stats": None}
    with log_path.open("wb") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            base = f"http://127.0.0.1:{port}"
            await _ready(base, child)
            yield base, proxy_report
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=10)
            proxy_report["returncode"] = child.returncode
            proxy_report["log"] = log_path.read_text(errors="replace")
            captured = sorted((work / "capture").glob("*.jsonl")) if capture else []
            lines = [line for path in captured for line in path.read_text().splitlines()]
            proxy_report["capture"] = [json.loads(line) for line in lines if line]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _ready(base: str, child: subprocess.Popen[bytes], limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise RuntimeError(f"toolslim serve exited with {child.returncode}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(base + "/readyz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"toolslim serve was not ready within {limit} s")


async def settled_stats(base: str) -> Any:
    """/stats once nothing streams and `requests` held still between two polls, or after
    STATS_WAIT: a connection codex closed on exit may still be being counted."""
    deadline = time.monotonic() + STATS_WAIT
    previous: Any = None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while True:
            async with session.get(base + "/stats") as response:
                snapshot = await response.json()
            requests = snapshot.get("requests", {})
            settled = requests.get("active_streams") == 0 and requests == previous
            if settled or time.monotonic() >= deadline:
                return snapshot
            previous = requests
            await asyncio.sleep(0.25)


if __name__ == "__main__":
    sys.exit(main())
