"""One `claude -p` turn with two local stdio MCP servers (tests/clients/mcp_server.py) against
the fake Anthropic upstream, through `toolslim serve`, run INSIDE a loopback-only network
namespace; everything observed goes to a report.

    timeout 150 unshare -n python -m tests.clients.claude_turn --claude BIN --work DIR \
        [--call TOOL JSON]

(from the repository root). The report, DIR/report.json, holds claude's exit status and
output, what the fake upstream received, toolslim's /stats, log and capture (DIR/capture/, which
`toolslim lint` reads). Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from tests.clients.codex_turn import reported, settled_stats, toolslim_serve
from tests.fake_anthropic import Options, make_fake_anthropic
from tests.fake_responses import Recording

KEY = "sk-ant-fake-claude-key-0123456789"
PROMPT = "write hello into the notebook"
SERVERS = ("notebook", "abacus")  # tests/clients/mcp_server.py's, both configured
# Claude Code offline (docs/clients.md): no telemetry, updater or error reports; wait for
# every MCP server before the first request, so its tools are in it.
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "MCP_CONNECTION_NONBLOCKING": "0",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.claude_turn")
    parser.add_argument("--claude", type=Path, required=True, help="the claude executable")
    parser.add_argument("--work", type=Path, required=True, help="empty directory for it all")
    parser.add_argument("--call", nargs=2, metavar=("TOOL", "JSON"), help="answer with it")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds claude may run")
    args = parser.parse_args(argv)
    args.claude, args.work = args.claude.resolve(), args.work.resolve()
    report: dict[str, Any] = {"error": None, "claude": None, "proxy": None, "recording": []}
    return reported(args.work, report, lambda: _turn(args, report))


async def _turn(args: argparse.Namespace, report: dict[str, Any]) -> None:
    recording = Recording()
    call = (args.call[0], json.loads(args.call[1])) if args.call else None
    fake = web.AppRunner(make_fake_anthropic(Options(call=call), recording))
    await fake.setup()
    try:
        await web.TCPSite(fake, "127.0.0.1", 0).start()
        upstream = f"anthropic=http://127.0.0.1:{fake.addresses[0][1]}"
        async with toolslim_serve(args.work, upstream, capture=True) as (base, proxy_report):
            report["proxy"] = proxy_report
            report["claude"] = await _claude(args, base)
            proxy_report["stats"] = await settled_stats(base)
    finally:
        report["recording"] = [item.to_json() for item in recording.received]
        await fake.cleanup()


def mcp_config(work: Path) -> Path:
    """An MCP config naming both servers, each this Python running mcp_server.py NAME."""
    script = Path(__file__).with_name("mcp_server.py")
    servers = {
        name: {"type": "stdio", "command": sys.executable, "args": [str(script), name]}
        for name in SERVERS
    }
    path = work / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=1))
    return path


async def _claude(args: argparse.Namespace, base: str) -> dict[str, Any]:
    home, cwd = args.work / "home", args.work / "cwd"
    for directory in (home, cwd):
        directory.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": KEY,
        "LANG": "C.UTF-8",
        **QUIET,
    }
    command = [str(args.claude), "-p", args.prompt, "--mcp-config", str(mcp_config(args.work))]
    command += ["--strict-mcp-config", "--allowedTools", ",".join(f"mcp__{s}" for s in SERVERS)]
    started = time.monotonic()
    child = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a kill reaches the MCP servers it started too
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
            os.killpg(child.pid, signal.SIGKILL)
    return {
        "command": command,
        "returncode": None if timed_out else child.returncode,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 1),
        "stdout": stdout.decode(errors="replace"),
        "stderr": stderr.decode(errors="replace"),
    }


if __name__ == "__main__":
    sys.exit(main())
