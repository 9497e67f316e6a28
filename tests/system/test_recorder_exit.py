"""Capture's writer thread in a real process: a recorder nobody closed neither holds the process
open nor loses the lines it was given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith("toolslim-capture-"))


def lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in files(directory) for line in path.read_text().splitlines()]


def test_a_recorder_never_closed_still_lets_the_process_exit_with_its_lines_written(
    tmp_path: Path,
) -> None:
    script = (
        "import sys\n"
        "from toolslim.observe.capture import Recorder\n"
        "recorder = Recorder(sys.argv[1])\n"
        "recorder.record(method='POST', path='/v1/messages', query='', upstream='anthropic',"
        " headers={}, body=b'{\"n\":1}', forwarded=b'{\"n\":1}')\n"
    )
    # The writer is not a daemon (a daemon dies mid-write); it must stop once main has ended.
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=60)
    assert [r["body"] for r in lines(tmp_path)] == ['{"n":1}']
