"""drift with workers: `toolslim serve --workers 2` tracks each session once, in the workers'
shared store. Sessions whose requests land on either worker (a new connection each) show the
catalogue changes one process shows for the same traffic, whichever worker answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from proxy_harness import ANTHROPIC, KEY, FakeUpstream, Proxy, dumps, stats_of, total_is
from served import fresh_client, get_json, serve, settled, stop

SESSIONS = 12
TOOLS = ANTHROPIC["tools"]
GIT_LOG = {"name": "mcp__git__git_log", "description": "Show the log.", "input_schema": {}}
# Each session's requests in turn: its catalogue changes once, at the third.
TURNS = [TOOLS, TOOLS, [*TOOLS, GIT_LOG], [*TOOLS, GIT_LOG]]


def drift_of(stats: dict[str, Any]) -> dict[str, Any]:
    """What of /stats drift does not depend on the process's salt or clock."""
    drift = stats["drift"]
    return {
        "sessions": drift["sessions"],
        "changes": drift["changes"],
        "cache_write_tokens_after": drift["cache_write_tokens_after"],
        "recent": sorted((c["kind"], tuple(c["tools"]), c["api"]) for c in drift["recent"]),
    }


def changes_scraped(text: str) -> dict[str, float]:
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "toolslim_catalogue_changes_total"
    }


async def test_sessions_spread_over_two_workers_show_the_changes_of_one_process_asked_of_either(
    upstream: FakeUpstream, proxy: Proxy, tmp_path: Path
) -> None:
    served = await serve(upstream, tmp_path)
    alone = await proxy()
    bases = (served.url, str(alone.make_url("")).rstrip("/"))
    requests = SESSIONS * len(TURNS)
    try:
        async with fresh_client() as client:
            for tools in TURNS:  # the sessions interleaved, turn by turn
                for session in range(SESSIONS):
                    body = dumps({**ANTHROPIC, "tools": tools})
                    headers = {"x-api-key": KEY, "x-claude-code-session-id": f"session-{session}"}
                    for base in bases:
                        async with client.post(
                            f"{base}/v1/messages", data=body, headers=headers
                        ) as response:
                            assert response.status == 200
                            await response.read()
            host = await settled(client, served, total_is(requests))
            one = await stats_of(client, alone, total_is(requests))
            answers: dict[int, dict[str, Any]] = {}
            scrapes: list[dict[str, float]] = []
            for _ in range(40):  # until both workers have answered
                answer = await get_json(client, f"{served.url}/stats")
                answers[answer["workers"]["answered_by"]] = answer
                async with client.get(f"{served.url}/metrics") as response:
                    scrapes.append(changes_scraped(await response.text()))
                if len(answers) == 2:
                    break
    finally:
        stop(served)

    assert one["drift"]["changes"]["added"] == SESSIONS
    assert drift_of(host) == drift_of(one)
    assert sorted(answers) == sorted(w["pid"] for w in host["workers"]["list"])
    assert all(drift_of(answer) == drift_of(one) for answer in answers.values())
    expected = {kind: float(count) for kind, count in one["drift"]["changes"].items()}
    assert all(scrape == expected for scrape in scrapes)
    assert all(w["requests"] > 0 for w in host["workers"]["list"])  # both served some
