"""`toolslim lint FILE... [--provider P]... [--json]`, run as a child process: one aligned line
per finding, exit 1 when one is `rejected`, 0 otherwise, 2 on unreadable input; request bodies,
captures, bare tool arrays and MCP tools/list results alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "tracker.tools-list.json"


def toolslim_lint(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolslim", "lint", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_mcp_tools_list_result_gives_one_aligned_line_per_finding_and_exit_1() -> None:
    done = toolslim_lint(EXAMPLE)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 8
    rule_column = {line.index("anthropic_") for line in lines if "  anthropic  " in line}
    assert len(rule_column) == 1  # aligned
    assert any("get_board" in line and "anthropic_root_combinator (rejected)" in line
               for line in lines)  # fmt: skip
    assert done.stderr.strip() == "toolslim lint: 8 findings (6 rejected, 2 degraded) in 1 file"


def test_provider_narrows_the_check_and_degraded_alone_exits_0() -> None:
    done = toolslim_lint(EXAMPLE, "--provider", "gemini")
    assert done.returncode == 0
    [line] = done.stdout.splitlines()
    assert "gemini_name_64 (degraded)" in line


def test_json_lists_each_finding_with_its_server_rule_and_fix(tmp_path: Path) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [],
        "tools": [{"name": "mcp__ci__get", "input_schema": {"anyOf": [{"type": "object"}]}}],
    }
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    done = toolslim_lint(path, "--provider", "anthropic", "--json")
    assert done.returncode == 1
    [finding] = json.loads(done.stdout)
    assert finding["tool"] == "mcp__ci__get" and finding["server"] == "ci"
    assert finding["rule"] == "anthropic_root_combinator" and finding["fix"]


def test_a_bare_tools_array_and_the_captures_lint_clean_for_their_own_provider(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "Read", "input_schema": {"type": "object"}}]))
    captures = sorted((ROOT / "captures").glob("claude-code*.json"))
    done = toolslim_lint(path, *captures, "--provider", "anthropic")
    assert (done.returncode, done.stdout) == (0, "")


def test_a_capture_in_json_lines_is_read_and_each_catalogue_linted_once(tmp_path: Path) -> None:
    body = json.dumps({"model": "m", "tools": [{"name": "a.b", "input_schema": {}}]})
    record = {"v": 1, "body_sha256": "x", "body": body}
    path = tmp_path / "capture.jsonl"
    path.write_text("\n".join(json.dumps(record) for _ in range(3)) + "\n")
    done = toolslim_lint(path, "--provider", "anthropic")
    assert done.returncode == 1
    assert len(done.stdout.splitlines()) == 1


def test_unreadable_input_exits_2_and_says_why(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not json")
    done = toolslim_lint(text, tmp_path / "missing.json", EXAMPLE)
    assert done.returncode == 2
    assert "notes.txt" in done.stderr and "missing.json" in done.stderr
    assert len(done.stdout.splitlines()) == 8  # the readable file is still linted


def test_the_readme_shows_what_the_command_prints_on_its_example() -> None:
    example = "docs/examples/tracker.tools-list.json"
    done = subprocess.run(
        [sys.executable, "-m", "toolslim", "lint", example, "--provider", "anthropic"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for line in (done.stdout + done.stderr).splitlines():
        assert line in readme
