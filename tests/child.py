"""Python run in a child process, for tests of process-wide state (the garbage collector's
settings, patched sockets) that must never change in the test runner itself."""

from __future__ import annotations

import subprocess
import sys


def python_output(code: str) -> str:
    """What `code` prints, run by this interpreter in a child; the test fails with the
    child's stderr unless it exits 0."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
