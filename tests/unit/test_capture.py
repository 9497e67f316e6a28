"""Capture: JSON Lines records written off the request path, credentials redacted, rotated."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from toolslim.observe import capture
from toolslim.observe.capture import REDACTED, Recorder

NAME = re.compile(r"^toolslim-capture-\d{8}T\d{6}Z-\d{4}\.jsonl$")


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    """Recorders a test makes; each is closed afterwards so no writer thread outlives it."""
    made: list[Recorder] = []
    yield made
    for recorder in made:
        recorder.close()


def make(recorders: list[Recorder], directory: Path, **options: Any) -> Recorder:
    recorder = Recorder(directory, **options)
    recorders.append(recorder)
    return recorder


def request(body: bytes = b'{"n":0}', **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "method": "POST",
        "path": "/v1/messages",
        "query": "",
        "upstream": "anthropic",
        "headers": {"Content-Type": "application/json"},
        "body": body,
        "forwarded": body,
    }
    fields.update(overrides)
    return fields


def files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith("toolslim-capture-"))


def writers() -> int:
    """Capture writer threads alive in this process (each recorder starts one, named so)."""
    return sum(1 for thread in threading.enumerate() if thread.name == "toolslim-capture")


def lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in files(directory) for line in path.read_text().splitlines()]


def test_a_record_is_one_json_line_with_every_field(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path)
    body, forwarded = '{"tools":[],"é":1}'.encode(), b'{"tools":[]}'
    recorder.record(**request(body, forwarded=forwarded, query="beta=true"))
    recorder.close()
    [path] = files(tmp_path)
    assert NAME.match(path.name)
    [line] = lines(tmp_path)
    assert set(line) == {
        "v",
        "ts",
        "method",
        "path",
        "query",
        "upstream",
        "headers",
        "body_sha256",
        "body_bytes",
        "forwarded_sha256",
        "forwarded_bytes",
        "body",
        "forwarded",
    }
    assert line["v"] == 1
    assert line["ts"].endswith("Z")
    assert datetime.fromisoformat(line["ts"]).utcoffset() is not None
    assert (line["method"], line["path"], line["query"], line["upstream"]) == (
        "POST",
        "/v1/messages",
        "beta=true",
        "anthropic",
    )
    assert line["headers"] == {"content-type": "application/json"}
    assert line["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert line["body_bytes"] == len(body)
    assert line["forwarded_sha256"] == hashlib.sha256(forwarded).hexdigest()
    assert line["forwarded_bytes"] == len(forwarded)
    assert line["body"].encode() == body
    assert line["forwarded"].encode() == forwarded


def test_forwarded_is_left_out_when_it_equals_the_body(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path)
    recorder.record(**request(b'{"a":1}'))
    recorder.close()
    [line] = lines(tmp_path)
    assert "forwarded" not in line and "forwarded_base64" not in line
    assert line["forwarded_sha256"] == line["body_sha256"]


def test_bodies_that_are_not_utf8_are_stored_as_base64(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path)
    body, forwarded = b"\xff\xfe{", b"\xc3"
    recorder.record(**request(body, forwarded=forwarded))
    recorder.close()
    [line] = lines(tmp_path)
    assert "body" not in line and "forwarded" not in line
    assert base64.b64decode(line["body_base64"]) == body
    assert base64.b64decode(line["forwarded_base64"]) == forwarded


def test_without_store_bodies_only_hashes_and_sizes_are_written(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path, store_bodies=False)
    body = b'{"messages":"a-private-prompt"}'
    recorder.record(**request(body, forwarded=b'{"messages":"another-private-prompt"}'))
    recorder.close()
    [line] = lines(tmp_path)
    assert not {"body", "body_base64", "forwarded", "forwarded_base64"} & set(line)
    assert line["body_bytes"] == len(body)
    raw = b"".join(p.read_bytes() for p in files(tmp_path))
    assert b"private-prompt" not in raw


def test_no_credential_value_appears_anywhere_in_the_files(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    secrets = {
        "Authorization": "Bearer sk-ant-secret-0001",
        "x-api-key": "secret-0002",
        "X-Goog-Api-Key": "secret-0003",
        "api-key": "secret-0004",
        "Proxy-Authorization": "Basic secret-0005",
        "Cookie": "session=secret-0006",
        "Set-Cookie": "id=secret-0007",
        "X-Refresh-Token": "secret-0008",
        "X-Client-Secret": "secret-0009",
        "X-Auth-Extra": "secret-0010",
        "OpenAI-Project-Key": "secret-0011",
    }
    query = "alt=sse&key=secret-0012&api_key=secret-0013&access_token=secret-0014&ok=a%20b"
    recorder = make(recorders, tmp_path)
    headers = {**secrets, "Anthropic-Version": "2023-06-01"}
    recorder.record(**request(headers=headers, query="?" + query))
    recorder.close()
    raw = b"".join(p.read_bytes() for p in files(tmp_path))
    for number in range(1, 15):
        assert f"secret-{number:04d}".encode() not in raw
    [line] = lines(tmp_path)
    assert line["headers"] == {
        **{name.lower(): REDACTED for name in secrets},
        "anthropic-version": "2023-06-01",
    }
    assert line["query"] == (
        f"alt=sse&key={REDACTED}&api_key={REDACTED}&access_token={REDACTED}&ok=a%20b"
    )


def test_headers_given_as_pairs_join_repeated_names(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path)
    pairs = [("Accept", "a"), ("accept", "b"), ("Cookie", "x=secret"), ("cookie", "y=secret")]
    recorder.record(**request(headers=pairs))
    recorder.close()
    [line] = lines(tmp_path)
    assert line["headers"] == {"accept": "a, b", "cookie": f"{REDACTED}, {REDACTED}"}


def one_line_bytes(directory: Path) -> bytes:
    """The bytes of one record of `request(...)`'s size, written by a throwaway recorder."""
    recorder = Recorder(directory)
    recorder.record(**request(b'{"n":00}'))
    recorder.close()
    return files(directory)[0].read_bytes()


def test_files_rotate_by_size_and_only_the_newest_are_kept(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    one_line = len(one_line_bytes(tmp_path / "probe"))
    recorder = make(recorders, tmp_path, max_bytes=2 * one_line + 10, keep_files=3)
    for n in range(20):
        recorder.record(**request(f'{{"n":{n:02d}}}'.encode()))
    recorder.close()
    kept = files(tmp_path)
    assert len(kept) == 3
    assert all(NAME.match(p.name) for p in kept)
    assert all(p.stat().st_size <= 2 * one_line + 10 for p in kept)
    # Two lines a file: the three newest files hold the last six records, in order.
    assert [json.loads(r["body"])["n"] for r in lines(tmp_path)] == list(range(14, 20))


def test_a_line_larger_than_max_bytes_gets_a_file_of_its_own(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path, max_bytes=100)
    for body in (b'{"a":1}', b'{"big":"' + b"x" * 500 + b'"}', b'{"b":2}'):
        recorder.record(**request(body))
    recorder.close()
    assert [len(p.read_text().splitlines()) for p in files(tmp_path)] == [1, 1, 1]


def test_pruning_counts_older_runs_files_but_leaves_other_files_alone(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    old = tmp_path / "toolslim-capture-20000101T000000Z-0001.jsonl"
    old.write_text("{}\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    recorder = make(recorders, tmp_path, keep_files=1)
    recorder.record(**request())
    recorder.close()
    assert not old.exists()
    assert notes.read_text() == "mine"
    assert len(files(tmp_path)) == 1


def test_a_full_queue_drops_and_counts_instead_of_blocking(
    tmp_path: Path, recorders: list[Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = make(recorders, tmp_path, queue_size=2)
    writing, release = threading.Event(), threading.Event()
    write = capture.capture_line

    def stalled_disk(item: Any, **options: bool) -> bytes:
        writing.set()
        release.wait(30)
        return write(item, **options)

    monkeypatch.setattr(capture, "capture_line", stalled_disk)
    recorder.record(**request(b'{"n":0}'))
    assert writing.wait(10)  # the writer holds record 0 and is stuck on the "disk"
    for n in range(1, 6):  # 1 and 2 fill the queue; 3, 4, 5 must not wait for the disk
        recorder.record(**request(f'{{"n":{n}}}'.encode()))
    assert recorder.dropped == 3
    release.set()
    recorder.close()
    assert [json.loads(r["body"])["n"] for r in lines(tmp_path)] == [0, 1, 2]


def test_bodies_past_the_pending_byte_budget_are_dropped(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path, max_pending_bytes=100)
    recorder.record(**request(b"x" * 200))
    assert recorder.dropped == 1


def test_close_flushes_everything_queued_and_stops_the_writer(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path)
    for n in range(300):
        recorder.record(**request(f'{{"n":{n}}}'.encode()))
    assert writers() == 1
    recorder.close()
    assert [json.loads(r["body"])["n"] for r in lines(tmp_path)] == list(range(300))
    assert recorder.written == 300 and recorder.dropped == 0
    assert writers() == 0  # the writer thread that ran has stopped


def test_record_after_close_is_dropped_not_raised(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path)
    recorder.close()
    recorder.record(**request())
    assert recorder.dropped == 1
    assert files(tmp_path) == []


def test_record_never_raises_on_bad_input(tmp_path: Path, recorders: list[Recorder]) -> None:
    recorder = make(recorders, tmp_path)
    recorder.record(**request(headers=42))
    assert recorder.dropped == 1


def test_a_disk_error_is_counted_and_never_raised(
    tmp_path: Path, recorders: list[Recorder]
) -> None:
    recorder = make(recorders, tmp_path / "gone")
    (tmp_path / "gone").rmdir()  # made by the recorder, empty: no file can be opened in it now
    recorder.record(**request())
    recorder.record(**request())
    recorder.close()
    assert recorder.errors == 2 and recorder.written == 0


def test_closing_a_recorder_that_never_recorded_writes_nothing(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "new")
    recorder.close()
    assert (tmp_path / "new").is_dir()
    assert list((tmp_path / "new").iterdir()) == []


@pytest.mark.parametrize(
    "options", [{"max_bytes": 0}, {"keep_files": 0}, {"queue_size": 0}], ids=str
)
def test_nonsense_limits_fail_at_construction(tmp_path: Path, options: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        Recorder(tmp_path, **options)


def test_every_line_key_is_documented(tmp_path: Path, recorders: list[Recorder]) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "captures.md").read_text()
    recorder = make(recorders, tmp_path)
    recorder.record(**request(b"\xff", forwarded=b"{}"))
    recorder.record(**request(b"{}", forwarded=b"\xff"))
    recorder.close()
    keys = {key for line in lines(tmp_path) for key in line}
    assert {"body", "body_base64", "forwarded", "forwarded_base64"} <= keys
    assert [key for key in sorted(keys) if f"`{key}`" not in docs] == []
