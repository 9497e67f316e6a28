"""The tool ledger and lint against the real Claude Code (pinned in tests/clients/, installed by
`.ci/install-clients`): `claude -p` with two local stdio MCP servers (tests/clients/
mcp_server.py) and `--strict-mcp-config`, through `toolslim serve` to the fake Anthropic
upstream, which answers one `tool_use` of an MCP tool, then text. Each turn runs in its own
loopback-only network namespace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from realclients import CLIENTS, refusal, turn

CLAUDE = CLIENTS / "claude"
JOT = "mcp__notebook__jot"  # tests/clients/mcp_server.py's tools, as Claude Code names them
OFFERED = {"notebook": {"mcp__notebook__jot", "mcp__notebook__leaf_through"}}
OFFERED["abacus"] = {"mcp__abacus__tally"}


@pytest.fixture(scope="module")
def claude_turn(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One turn (it takes 1-3 s) shared by the tests here; skipped, saying why, when claude
    cannot run here."""
    if (why := refusal(CLAUDE)) is not None:
        pytest.skip(why)
    work = tmp_path_factory.mktemp("claude")
    report = turn("claude_turn", work, "--claude", str(CLAUDE), "--call", JOT, '{"line": "hi"}')
    return report, work


def test_claude_code_runs_the_mcp_tool_the_fake_upstream_calls(
    claude_turn: tuple[dict[str, Any], Path],
) -> None:
    report, _ = claude_turn
    run = report["claude"]
    assert run["returncode"] == 0, run["stderr"]
    posts = [item for item in report["recording"] if item["kind"] == "post"]
    assert len(posts) == 2, [item["path"] for item in report["recording"]]
    assert posts[0]["headers"]["user-agent"].startswith("claude-cli/2.1.197")
    offered = {tool["name"] for tool in posts[0]["body"]["tools"]}
    assert set().union(*OFFERED.values()) <= offered
    result = posts[1]["body"]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert 'notebook/jot got {"line": "hi"}' in str(result["content"])


def test_the_ledger_counts_the_call_under_its_server_and_offers_both_servers(
    claude_turn: tuple[dict[str, Any], Path],
) -> None:
    report, _ = claude_turn
    tools = report["proxy"]["stats"]["tools"]

    assert [row["client"] for row in tools["clients"]] == ["claude-cli"]
    assert tools["unknown_calls"] == {"total": 0, "names": {}}
    servers = {row["server"]: row for row in tools["servers"]}
    assert {"builtin", "notebook", "abacus"} == servers.keys()
    assert all(row["client"] == "claude-cli" and row["requests"] == 2 for row in servers.values())
    assert [servers[name]["calls"] for name in ("builtin", "notebook", "abacus")] == [0, 1, 0]
    rows = {row["tool"]: row for row in tools["costliest"]}
    for server, names in OFFERED.items():
        assert servers[server]["tools"] == len(names)
        assert all(rows[name]["server"] == server and rows[name]["tokens"] > 0 for name in names)
    assert rows[JOT]["calls"] == 1


def test_lint_finds_nothing_a_provider_would_reject_in_what_claude_code_sent(
    claude_turn: tuple[dict[str, Any], Path],
) -> None:
    report, work = claude_turn
    lint = report["proxy"]["stats"]["lint"]
    assert [f for f in lint["findings"] if f["severity"] == "rejected"] == []
    assert lint["upstream_rejections"] == {"explained": 0, "unexplained": 0}
    (capture,) = sorted((work / "capture").glob("*.jsonl"))  # the bodies as Claude Code sent them
    done = toolslim_lint(capture)
    assert done.returncode == 0, done.stdout + done.stderr  # 1: a `rejected` finding
    # The same capture with one MCP tool renamed to a name Anthropic refuses: lint reads the
    # catalogues in the capture, and would have said so.
    records = [json.loads(line) for line in capture.read_text().splitlines()]
    for record in records:
        body = json.loads(record.get("body") or "null")
        if isinstance(body, dict) and body.get("tools"):
            for tool in body["tools"]:
                if tool["name"] == JOT:
                    tool["name"] = "jot a line!"
            record["body"] = json.dumps(body)
    broken = work / "broken.jsonl"
    broken.write_text("".join(json.dumps(record) + "\n" for record in records))
    done = toolslim_lint(broken)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "anthropic_name" in done.stdout


def toolslim_lint(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolslim", "lint", "--provider", "anthropic", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
