"""Capture: a held request's line is written once its answer is read, with the answer's tool
calls (name, namespace, owning server) as the `calls` key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from toolslim.observe.capture import Recorder


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    made = Recorder(tmp_path)
    yield made
    made.close()


def request(body: bytes = b'{"model":"m"}') -> dict[str, Any]:
    return {
        "method": "POST",
        "path": "/v1/messages",
        "query": "",
        "upstream": "anthropic",
        "headers": {"x-api-key": "sk-secret"},
        "body": body,
        "forwarded": body,
    }


def lines(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("toolslim-capture-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_a_held_request_is_written_once_answered_with_each_call_and_its_server(
    tmp_path: Path, recorder: Recorder
) -> None:
    held = recorder.hold(**request())
    assert held is not None
    taken = datetime.now(UTC)
    held.answered(
        [
            ("Bash", None),
            ("mcp__aws-docs__read_documentation", None),
            ("search", "mcp__aws_docs"),
            ("mcp_git_git_status", None),
            ("exec", "functions"),
        ]
    )
    recorder.close()
    [line] = lines(tmp_path)
    assert line["calls"] == [
        {"name": "Bash", "server": "builtin"},
        {"name": "mcp__aws-docs__read_documentation", "server": "aws-docs"},
        {"name": "search", "server": "aws_docs", "namespace": "mcp__aws_docs"},
        {"name": "mcp_git_git_status", "server": "git"},
        {"name": "exec", "server": "builtin", "namespace": "functions"},
    ]
    # The line is the request's, taken when it was held: its time, its redacted headers.
    assert datetime.fromisoformat(line["ts"]) <= taken
    assert line["headers"] == {"x-api-key": "[redacted]"}
    assert line["body"] == '{"model":"m"}'


def test_an_answer_without_calls_says_so_and_an_unread_one_has_no_calls_key(
    tmp_path: Path, recorder: Recorder
) -> None:
    for calls in ([], None):
        held = recorder.hold(**request())
        assert held is not None
        held.answered(calls)
    recorder.record(**request())  # not held: written at once, as before
    recorder.close()
    first, second, third = lines(tmp_path)
    assert first["calls"] == []
    assert "calls" not in second and "calls" not in third


def test_a_held_request_is_written_once_however_often_it_is_answered(
    tmp_path: Path, recorder: Recorder
) -> None:
    held = recorder.hold(**request())
    assert held is not None
    held.answered([("Read", None)])
    held.answered([("Write", None)])
    recorder.close()
    assert [line["calls"] for line in lines(tmp_path)] == [[{"name": "Read", "server": "builtin"}]]
    assert (recorder.written, recorder.dropped) == (1, 0)


def test_lines_are_written_in_the_order_answers_are_read(
    tmp_path: Path, recorder: Recorder
) -> None:
    slow, fast = recorder.hold(**request(b'{"n":1}')), recorder.hold(**request(b'{"n":2}'))
    assert slow is not None and fast is not None
    fast.answered([])
    slow.answered([])
    recorder.close()
    assert [line["body"] for line in lines(tmp_path)] == ['{"n":2}', '{"n":1}']


def test_an_answer_read_after_close_is_dropped_and_counted_never_raised(
    tmp_path: Path, recorder: Recorder
) -> None:
    held = recorder.hold(**request())
    assert held is not None
    recorder.close()
    held.answered([("Read", None)])
    assert (recorder.written, recorder.dropped) == (0, 1)
    assert lines(tmp_path) == []


def test_calls_that_cannot_be_read_leave_the_line_without_them(
    tmp_path: Path, recorder: Recorder
) -> None:
    held = recorder.hold(**request())
    assert held is not None
    held.answered([("Read",)])  # type: ignore[list-item]  # not a (name, namespace) pair
    recorder.close()
    [line] = lines(tmp_path)
    assert "calls" not in line and line["body"] == '{"model":"m"}'
