"""drift through the real proxy: a scripted session counts each kind of change once with the
cache write that followed; sessions do not mix and stay within drift_max_sessions."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
import pytest

from exposition import metric_samples
from proxy_harness import Proxy, dumps, stats_of, total_is
from sessions import BASH, EDIT, GIT_LOG, READ, SCRIPT, UsageUpstream, anthropic_body
from toolslim.observe.drift import (
    KINDS,
)


@pytest.fixture
async def usage_upstream(aiohttp_server: Any) -> tuple[UsageUpstream, str]:
    fake = UsageUpstream()
    server = await aiohttp_server(fake.app())
    return fake, f"http://127.0.0.1:{server.port}"


async def send(
    client: aiohttp.ClientSession,
    url: Any,
    body: bytes,
    session: str,
    usage: dict[str, int],
    header: str = "X-Claude-Code-Session-Id",
) -> None:
    given = {header: session, "X-Usage": json.dumps(usage), "Content-Type": "application/json"}
    async with client.post(url, data=body, headers=given) as response:
        assert response.status == 200
        await response.read()


async def run_script(
    client: aiohttp.ClientSession, server: Any, session: str = "session-1"
) -> None:
    url = server.make_url("/v1/messages")
    for turn, (catalogue, _, written) in enumerate(SCRIPT):
        usage = {"input_tokens": 3, "output_tokens": 1, "cache_creation_input_tokens": written}
        await send(client, url, anthropic_body(catalogue, turn), session, usage)


async def test_a_scripted_session_counts_each_kind_once_with_the_cache_write_that_followed(
    usage_upstream: tuple[UsageUpstream, str],
    proxy: Proxy,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, base = usage_upstream
    server = await proxy(base)
    with caplog.at_level(logging.INFO, logger="toolslim"):
        await run_script(client, server)
        snapshot = await stats_of(client, server, total_is(len(SCRIPT)))
    drift = snapshot["drift"]
    assert drift["changes"] == dict.fromkeys(KINDS, 1)
    assert drift["cache_write_tokens_after"] == {
        kind: written for _, kind, written in SCRIPT if kind is not None
    }
    assert drift["sessions"] == 1
    recent = drift["recent"]
    assert [event["kind"] for event in recent] == [k for _, k, _ in SCRIPT if k is not None]
    assert len({event["session"] for event in recent}) == 1
    assert "session-1" not in json.dumps(snapshot)
    added = recent[1]
    assert (added["api"], added["tools"], added["servers"]) == (
        "anthropic",
        ["mcp__git__git_log"],
        ["git"],
    )
    assert recent[3]["tools"] == ["Read"] and recent[4]["tools"] == ["Bash", "Shell"]

    async with client.get(server.make_url("/metrics")) as response:
        text = await response.text()
    assert metric_samples(text, "toolslim_catalogue_changes_total") == {
        kind: float(count) for kind, count in drift["changes"].items()
    }
    assert metric_samples(text, "toolslim_catalogue_change_cache_write_tokens_total") == {
        kind: float(tokens) for kind, tokens in drift["cache_write_tokens_after"].items()
    }
    assert "toolslim_drift_sessions 1.0" in text

    lines = [r.getMessage() for r in caplog.records if "catalogue change" in r.getMessage()]
    assert len(lines) == 5
    assert all(f"session={recent[0]['session']}" in line for line in lines)
    assert 'kind=added tools=["mcp__git__git_log"] servers=["git"]' in lines[1]
    assert "session-1" not in caplog.text


async def test_two_sessions_taking_turns_do_not_mix(
    usage_upstream: tuple[UsageUpstream, str], proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    _, base = usage_upstream
    server = await proxy(base)
    url = server.make_url("/v1/messages")
    usage = {"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 700}
    for turn in range(3):  # each session keeps its own catalogue: no change in either
        await send(client, url, anthropic_body([READ, BASH], turn), "one", usage)
        await send(client, url, anthropic_body([BASH, EDIT], turn), "two", usage)
    await send(client, url, anthropic_body([BASH, EDIT, GIT_LOG], 3), "two", usage)
    snapshot = await stats_of(client, server, total_is(7))
    drift = snapshot["drift"]
    assert drift["sessions"] == 2
    assert drift["changes"] == {**dict.fromkeys(KINDS, 0), "added": 1}
    assert [event["tools"] for event in drift["recent"]] == [["mcp__git__git_log"]]


async def test_openai_usage_after_a_change_counts_the_uncached_input_when_cached_tokens_fell(
    usage_upstream: tuple[UsageUpstream, str], proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    _, base = usage_upstream
    server = await proxy(base)
    url = server.make_url("/v1/responses")

    def body(names: Sequence[str]) -> bytes:
        catalogue = [
            {"type": "function", "name": n, "parameters": {"type": "object"}} for n in names
        ]
        return dumps({"model": "gpt-5", "input": [], "tools": catalogue,
                      "prompt_cache_key": "thread-1"})  # fmt: skip

    def usage(total: int, cached: int) -> dict[str, Any]:
        return {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": 2}  # fmt: skip

    for names, total, cached in (
        (["shell", "apply_patch"], 3_000, 0),  # the session's first request
        (["shell", "apply_patch"], 3_100, 3_000),  # the same catalogue: cached
        (["apply_patch", "shell"], 3_500, 200),  # reordered: the cache fell to 200
    ):
        given = {"X-Usage": json.dumps(usage(total, cached))}
        async with client.post(url, data=body(names), headers=given) as response:
            await response.read()
    snapshot = await stats_of(client, server, total_is(3))
    assert snapshot["drift"]["changes"]["order_only"] == 1
    assert snapshot["drift"]["cache_write_tokens_after"]["order_only"] == 3_300


async def test_drift_needs_a_pipeline_an_empty_one_reads_no_body(
    usage_upstream: tuple[UsageUpstream, str], proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    _, base = usage_upstream
    server = await proxy(base, pipeline=())
    url = server.make_url("/v1/messages")
    for turn, catalogue in enumerate(([READ, BASH], [BASH, READ])):
        await send(client, url, anthropic_body(catalogue, turn), "s", {"input_tokens": 1})
    snapshot = await stats_of(client, server, total_is(2))
    assert snapshot["drift"]["changes"] == dict.fromkeys(KINDS, 0)
    assert snapshot["drift"]["sessions"] == 0


async def test_the_proxy_tracks_at_most_the_sessions_drift_max_sessions_allows(
    usage_upstream: tuple[UsageUpstream, str], proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    _, base = usage_upstream
    server = await proxy(base, drift_max_sessions=2)
    url = server.make_url("/v1/messages")
    usage = {"input_tokens": 1, "output_tokens": 1}
    for index in range(4):
        await send(client, url, anthropic_body([READ, BASH], 0), f"session-{index}", usage)
    snapshot = await stats_of(client, server, total_is(4))
    assert snapshot["drift"]["sessions"] == 2
