"""What the tests of real client CLIs share: whether a loopback-only network namespace can be
made here, and one turn of a client run in its own (`unshare -n`) by a script of tests/clients/
that writes WORK/report.json. docs/clients.md says how each client is set up.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / ".clients" / "node_modules" / ".bin"
TURN_LIMIT = 150  # seconds for one whole turn in its namespace; the client itself gets 60


@functools.cache
def unshare_refusal() -> str | None:
    """Why a loopback-only network namespace cannot be made here, or None when it can."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare (util-linux) and ip (iproute2)"
    probe = ["unshare", "-n", "ip", "link", "set", "lo", "up"]
    result = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=False)
    if result.returncode != 0:
        return f"`unshare -n` is not permitted here: {result.stderr.strip()}"
    return None


def refusal(binary: Path) -> str | None:
    """Why the client launcher `binary` cannot run here (the test skips saying so), or None."""
    if not binary.exists():
        return f"{binary.name} is not installed at {binary}: run .ci/install-clients"
    if shutil.which("node") is None:
        return "node is not on PATH (the client launchers are node scripts)"
    return unshare_refusal()


def turn(script: str, work: Path, *args: str) -> dict[str, Any]:
    """Run `python -m tests.clients.SCRIPT --work WORK ARGS` in a fresh loopback-only
    namespace and return its report (failing the test when it has none, or an error)."""
    command = ["timeout", "--kill-after=5", str(TURN_LIMIT), "unshare", "-n", sys.executable]
    command += ["-m", f"tests.clients.{script}", "--work", str(work), *args]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=TURN_LIMIT + 15, check=False
    )
    report_path = work / "report.json"
    assert report_path.exists(), f"no report (exit {result.returncode}): {result.stderr}"
    report: dict[str, Any] = json.loads(report_path.read_text())
    assert report["error"] is None, f"{report['error']}\n{result.stderr}"
    return report
