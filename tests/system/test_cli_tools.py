"""`toolslim tools` as a program: the ledger of a state file in aligned tables (or JSON), with
what turning each unused MCP server off saves; no server runs. The file is written by the
ledger itself from the 10-server Claude Code capture, offered in 60 requests over 4 sessions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson

from toolslim.core.facts import CatalogueFacts
from toolslim.core.tokens import count_tokens
from toolslim.core.toolfacts import tool_facts
from toolslim.observe.ledger.book import ToolLedger
from toolslim.observe.ledger.state import StateFile
from toolslim.wire.usage import Usage

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "claude-code.mcp.anthropic.json"
CALLED = ("Bash", "Read", "mcp__git__git_status", "mcp__files__read_text_file")


def write_state(path: Path) -> None:
    raw = orjson.dumps(orjson.loads(CAPTURE.read_bytes())["tools"])
    book = ToolLedger(read_multiplier=0.1, write_multiplier=1.25)
    for index in range(60):
        usage = Usage(input_tokens=200, cache_read_input_tokens=60_000, output_tokens=50)
        calls = [(CALLED[index % len(CALLED)], None)]
        new = book.record(
            client="claude-cli",
            api="anthropic",
            model="claude-sonnet-4-5",
            session=f"s{index % 4}",
            catalogues=[CatalogueFacts(raw)],
            usage=usage,
            calls=calls,
            cache_miss=None,
        )
        for facts in new:
            book.known(facts.digest, tool_facts(facts.forwarded, count_tokens))
    state = StateFile(str(path))
    state.add(book.live())
    state.close()


def tools(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolslim", "tools", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_tools_prints_each_server_and_what_turning_the_unused_ones_off_saves(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.sqlite3"
    write_state(state)
    done = tools("--state", str(state))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("client"))
    assert "tokens/request" in header and "USD" in header
    servers = {line.split()[1] for line in lines[lines.index(header) + 1 :] if line.strip()}
    assert {"builtin", "git", "files", "memory", "fetch"} <= servers
    off = done.stdout.split("turning each off saves", 1)[1]
    assert "claude mcp remove memory" in off and "claude mcp remove git" not in off
    assert "." not in " ".join(lines[lines.index(header) + 1].split()[2:4])  # integers

    as_json = json.loads(tools("--state", str(state), "--json").stdout)
    unused = {row["server"] for row in as_json["servers"] if row["unused"]}
    assert unused and {"git", "files", "builtin"}.isdisjoint(unused)
    assert all(item["calls"] == 0 for item in as_json["unused"])


def test_since_keeps_only_the_days_asked_for_and_a_missing_file_is_an_error(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.sqlite3"
    write_state(state)
    old = json.loads(tools("--state", str(state), "--since", "2000-01-01", "--json").stdout)
    assert old["servers"]
    assert (
        json.loads(tools("--state", str(state), "--since", "2999-01-01", "--json").stdout)[
            "servers"
        ]
        == []
    )
    missing = tools("--state", str(tmp_path / "nothing.sqlite3"))
    assert missing.returncode == 2 and "no state file at" in missing.stderr
    assert not (tmp_path / "nothing.sqlite3").exists()
    bad = tools("--state", str(state), "--since", "seven")
    assert bad.returncode == 2 and "--since expects" in bad.stderr
