"""The real Codex CLI (pinned in tests/clients/, installed by `.ci/install-clients`) completes a
turn against the fake Responses upstream over its WebSocket, directly and through `toolslim
serve`. Each turn runs in its own loopback-only network namespace (`unshare -n`): the fake,
the proxy and codex see 127.0.0.1 and nothing else. docs/clients.md says what codex sends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fake_responses import (
    RECORDING,
    TEXT,
    Options,
    Received,
    Recording,
    generates,
    make_fake_responses,
)
from realclients import CLIENTS, ROOT, TURN_LIMIT, refusal

CODEX = CLIENTS / "codex"
# What codex prints when its WebSocket did not work out and it uses HTTP instead.
FALLBACK = (
    "Falling back from WebSockets to HTTPS transport",
    "failed to connect to Responses WebSocket",
)


@pytest.fixture
def codex() -> Path:
    """The installed codex launcher; the test is skipped, saying why, when it cannot run."""
    why = refusal(CODEX)
    if why is not None:
        pytest.skip(why)
    return CODEX


@dataclass(frozen=True)
class Turn:
    """What one `codex exec` turn did, as tests/clients/codex_turn.py reported it."""

    returncode: int | None  # None: codex ran out of time and was killed
    stdout: str  # codex's final answer
    stderr: str  # its banner, warnings and errors
    recording: Recording  # what the fake upstream received
    stats: Any  # toolslim's /stats after the turn (None without the proxy)
    proxy_log: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def codex_turn(
    codex: Path, work: Path, *, proxy: bool = False, refuse_upgrade: int | None = None
) -> Turn:
    """Run one turn ("say hi") in a fresh loopback-only namespace and read its report."""
    command = ["timeout", "--kill-after=5", str(TURN_LIMIT), "unshare", "-n", sys.executable]
    command += ["-m", "tests.clients.codex_turn", "--codex", str(codex), "--work", str(work)]
    if proxy:
        command.append("--proxy")
    if refuse_upgrade is not None:
        command += ["--refuse-upgrade", str(refuse_upgrade)]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=TURN_LIMIT + 15, check=False
    )
    report_path = work / "report.json"
    assert report_path.exists(), f"no report (exit {result.returncode}): {result.stderr}"
    report = json.loads(report_path.read_text())
    assert report["error"] is None, f"{report['error']}\n{result.stderr}"
    recording = Recording([Received.from_json(item) for item in report["recording"]])
    run, proxy_report = report["codex"], report["proxy"] or {}
    return Turn(
        run["returncode"],
        run["stdout"],
        run["stderr"],
        recording,
        proxy_report.get("stats"),
        proxy_report.get("log", ""),
    )


def assert_stayed_on_the_websocket(turn: Turn) -> None:
    assert turn.returncode == 0, turn.output
    assert TEXT in turn.stdout, turn.output
    for line in FALLBACK:
        assert line not in turn.output
    prewarm, request = turn.recording.creates("websocket")
    assert not generates(prewarm.body)
    assert generates(request.body)
    assert turn.recording.creates("http") == []


# The fake itself, without codex: what every codex test stands on.

PREWARM = {"type": "response.create", "model": "gpt-fake", "input": [], "generate": False}
REQUEST = {"type": "response.create", "model": "gpt-fake", "input": [], "tools": []}
ANSWER_EVENTS = [
    "response.created",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * 3,
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


async def test_the_fake_answers_each_response_create_on_its_websocket(aiohttp_server: Any) -> None:
    server = await aiohttp_server(make_fake_responses())
    async with aiohttp.ClientSession() as session:
        headers = {"openai-beta": "responses_websockets=2026-02-06"}
        async with session.ws_connect(server.make_url("/v1/responses"), headers=headers) as ws:
            answers = []
            for body in (PREWARM, REQUEST):
                await ws.send_str(json.dumps(body))
                answer = [json.loads((await ws.receive(timeout=5)).data)]
                while answer[-1]["type"] != "response.completed":
                    answer.append(json.loads((await ws.receive(timeout=5)).data))
                answers.append(answer)

    prewarm, answer = answers
    assert [event["type"] for event in prewarm] == ["response.created", "response.completed"]
    assert prewarm[-1]["response"]["output"] == []
    assert [event["type"] for event in answer] == ANSWER_EVENTS
    assert [event["sequence_number"] for event in answer] == list(range(len(ANSWER_EVENTS)))
    assert "".join(e["delta"] for e in answer if e["type"].endswith(".delta")) == TEXT
    usage = answer[-1]["response"]["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] == Options().cached_tokens
    recording = server.app[RECORDING]
    (upgrade,) = recording.upgrades()
    assert upgrade.headers["openai-beta"] == "responses_websockets=2026-02-06"
    assert [item.raw for item in recording.creates("websocket")] == [
        json.dumps(PREWARM).encode(),
        json.dumps(REQUEST).encode(),
    ]


async def test_the_fake_streams_the_same_events_as_sse_on_post(aiohttp_server: Any) -> None:
    server = await aiohttp_server(make_fake_responses())
    body = {key: value for key, value in REQUEST.items() if key != "type"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(server.make_url("/v1/responses"), json=body) as response,
    ):
        assert response.headers["Content-Type"] == "text/event-stream"
        text = await response.text()

    blocks = [block.split("\n") for block in text.split("\n\n") if block]
    assert [lines[0] for lines in blocks] == [f"event: {name}" for name in ANSWER_EVENTS]
    streamed = [json.loads(lines[1].removeprefix("data: ")) for lines in blocks]
    assert [event["sequence_number"] for event in streamed] == list(range(len(ANSWER_EVENTS)))
    completed = streamed[-1]["response"]
    assert completed["output"][0]["content"][0]["text"] == TEXT
    assert completed["usage"]["output_tokens"] == Options().output_tokens
    (request,) = server.app[RECORDING].creates("http")
    assert request.body == body


async def test_the_fake_refuses_upgrades_with_the_status_it_was_given(aiohttp_server: Any) -> None:
    server = await aiohttp_server(make_fake_responses(Options(refuse_upgrade=426)))
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(server.make_url("/v1/responses"))

    assert refused.value.status == 426
    assert [upgrade.status for upgrade in server.app[RECORDING].upgrades()] == [426]


# The real codex.


def test_codex_completes_a_turn_over_the_websocket_of_the_fake_upstream(
    codex: Path, tmp_path: Path
) -> None:
    turn = codex_turn(codex, tmp_path)

    assert_stayed_on_the_websocket(turn)
    (upgrade,) = turn.recording.upgrades()
    assert upgrade.status == 101
    assert upgrade.headers["openai-beta"] == "responses_websockets=2026-02-06"
    assert "permessage-deflate" in upgrade.headers["sec-websocket-extensions"]
    assert upgrade.headers["authorization"].startswith("Bearer sk-fake-")
    request = turn.recording.creates("websocket")[1].body
    assert {"model", "input", "prompt_cache_key"} <= request.keys()


def test_codex_falls_back_to_sse_at_once_when_the_upgrade_is_answered_426(
    codex: Path, tmp_path: Path
) -> None:
    turn = codex_turn(codex, tmp_path, refuse_upgrade=426)

    assert turn.returncode == 0, turn.output
    assert TEXT in turn.stdout, turn.output
    assert [upgrade.status for upgrade in turn.recording.upgrades()] == [426]
    (request,) = turn.recording.creates("http")
    assert generates(request.body)
    assert request.headers["accept"] == "text/event-stream"
    assert turn.recording.creates("websocket") == []


def test_codex_through_toolslim_keeps_its_websocket_and_toolslim_counts_it(
    codex: Path, tmp_path: Path
) -> None:
    turn = codex_turn(codex, tmp_path, proxy=True)

    assert_stayed_on_the_websocket(turn)
    assert turn.stats["requests"]["by_transport"]["websocket"] >= 1, turn.proxy_log


def test_codex_through_toolslim_falls_back_at_once_when_the_upstream_answers_426(
    codex: Path, tmp_path: Path
) -> None:
    turn = codex_turn(codex, tmp_path, proxy=True, refuse_upgrade=426)

    assert turn.returncode == 0, turn.output
    assert TEXT in turn.stdout, turn.output
    assert [upgrade.status for upgrade in turn.recording.upgrades()] == [426]
    assert len(turn.recording.creates("http")) == 1
    assert turn.stats["requests"]["by_transport"]["http"] == 1, turn.proxy_log
