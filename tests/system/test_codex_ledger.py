"""The tool ledger against the real Codex CLI: the fake Responses upstream answers a turn with
a call to one of the tools Codex offers, Codex runs it and asks again with its output, and
toolslim's /stats `tools` counts that call once, under the name the catalogue gives the tool,
while every byte goes through unchanged. Each turn runs in a loopback-only namespace.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from fake_responses import TEXT, Received, Recording
from realclients import CLIENTS, refusal, turn

CODEX = CLIENTS / "codex"


@pytest.fixture
def codex() -> Path:
    """The installed codex launcher; the test is skipped, saying why, when it cannot run."""
    if (why := refusal(CODEX)) is not None:
        pytest.skip(why)
    return CODEX


def codex_turn(
    codex: Path, work: Path, calls: list[dict[str, Any]], model: str = "", http: bool = False
) -> Any:
    """One turn through `toolslim serve --capture`, the fake answering with `calls` first;
    `http`: the fake refuses the WebSocket with 426, and codex uses SSE at once."""
    args = ["--codex", str(codex), "--proxy", "--capture"]
    args += ["--model", model] if model else []
    args += ["--refuse-upgrade", "426"] if http else []
    for call in calls:
        args += ["--call", json.dumps(call)]
    return turn("codex_turn", work, *args)


def outputs(recording: Recording) -> list[dict[str, Any]]:
    """The tool outputs Codex sent back, in order."""
    return [
        item
        for create in recording.creates()
        for item in create.body.get("input", [])
        if str(item.get("type", "")).endswith("_call_output")
    ]


def tool_rows(stats: Any) -> dict[str, dict[str, Any]]:
    return {row["tool"]: row for row in stats["tools"]["costliest"]}


EXEC = {"type": "custom_tool_call", "name": "exec", "input": 'text("ran")'}
# What the fake answers, the model Codex asks for ("" its default) and the ledger's name.
CASES = {
    "exec, a freeform tool of the functions namespace, named bare": (EXEC, "", "functions/exec"),
    "exec named with its namespace": ({**EXEC, "namespace": "functions"}, "", "functions/exec"),
    "sleep, a function of the clock namespace": (
        {
            "type": "function_call",
            "name": "sleep",
            "namespace": "clock",
            "arguments": '{"duration_ms": 1}',
        },
        "",
        "clock/sleep",
    ),
    "exec_command, the shell, a top-level tool of -m gpt-5.5": (
        {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "echo ran"}'},
        "gpt-5.5",
        "exec_command",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tool_codex_runs_is_counted_once_under_the_name_its_catalogue_gives_it(
    codex: Path, tmp_path: Path, case: str
) -> None:
    call, model, name = CASES[case]
    report = codex_turn(codex, tmp_path, [call], model)

    run = report["codex"]
    assert run["returncode"] == 0, run["stderr"]
    assert TEXT in run["stdout"], run["stderr"]
    recording = Recording([Received.from_json(item) for item in report["recording"]])
    (output,) = outputs(recording)  # codex ran the tool and sent what it gave
    assert output["call_id"] == "call_fake0002"
    assert "unsupported" not in json.dumps(output["output"]), output
    stats = report["proxy"]["stats"]
    tools = stats["tools"]
    assert tools["unknown_calls"] == {"total": 0, "names": {}}
    rows = tool_rows(stats)
    assert rows[name]["calls"] == 1, report["proxy"]["log"]
    assert (rows[name]["client"], rows[name]["server"]) == ("codex", "builtin")
    (server,) = tools["servers"]
    assert (server["client"], server["server"], server["calls"]) == ("codex", "builtin", 1)
    assert [client["client"] for client in tools["clients"]] == ["codex"]
    # Every tool of the catalogue is offered, each with its tokens.
    assert len(rows) == server["tools"] >= 10
    assert all(row["tokens"] > 0 and row["client"] == "codex" for row in rows.values())


def test_the_ledger_forwards_every_message_of_a_codex_turn_byte_for_byte(
    codex: Path, tmp_path: Path
) -> None:
    report = codex_turn(codex, tmp_path, [EXEC])

    assert report["codex"]["returncode"] == 0, report["codex"]["stderr"]
    captured = report["proxy"]["capture"]  # what toolslim received and forwarded, hashed
    assert len(captured) == 3  # the warm-up, the request, the tool's output
    assert all(item["forwarded_sha256"] == item["body_sha256"] for item in captured)
    recording = Recording([Received.from_json(item) for item in report["recording"]])
    arrived = [hashlib.sha256(item.raw).hexdigest() for item in recording.creates("websocket")]
    assert arrived == [item["body_sha256"] for item in captured]
    requests = report["proxy"]["stats"]["requests"]
    assert requests["bytes_forwarded"] == requests["bytes_received"]


def test_a_turn_of_two_calls_counts_the_same_over_http_where_each_request_carries_the_tools(
    codex: Path, tmp_path: Path
) -> None:
    report = codex_turn(codex, tmp_path, [EXEC, EXEC], http=True)

    assert report["codex"]["returncode"] == 0, report["codex"]["stderr"]
    recording = Recording([Received.from_json(item) for item in report["recording"]])
    posts = recording.creates("http")
    assert len(posts) == 3
    assert all("additional_tools" in post.raw.decode() for post in posts)
    stats = report["proxy"]["stats"]
    (server,) = stats["tools"]["servers"]
    assert (server["requests"], server["calls"]) == (3, 2)
    assert stats["tools"]["unknown_calls"]["total"] == 0


def test_a_follow_up_without_tools_still_offers_and_counts_those_of_the_response_it_continues(
    codex: Path, tmp_path: Path
) -> None:
    """Codex sends a tool's output with `previous_response_id` and no catalogue: the upstream
    puts the earlier input back in the prompt, tools included, so they are offered again, and
    a call in the answer to that follow-up is a call of one of them."""
    report = codex_turn(codex, tmp_path, [EXEC, EXEC])

    assert report["codex"]["returncode"] == 0, report["codex"]["stderr"]
    recording = Recording([Received.from_json(item) for item in report["recording"]])
    _, request, *follow_ups = recording.creates("websocket")
    assert "additional_tools" in request.raw.decode()
    assert len(follow_ups) == 2 and len(outputs(recording)) == 2
    assert all(
        create.body["previous_response_id"] and "additional_tools" not in create.raw.decode()
        for create in follow_ups
    )
    stats = report["proxy"]["stats"]
    assert stats["tools"]["unknown_calls"]["total"] == 0
    (server,) = stats["tools"]["servers"]
    assert (server["requests"], server["calls"]) == (3, 2)
    assert tool_rows(stats)["functions/exec"]["calls"] == 2
