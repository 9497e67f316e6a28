"""dashboard against the real proxy's tool ledger: 60 scripted Claude Code requests over 4
sessions, answers calling some tools; the tools card shows /stats `tools` exactly, the unused
tools under their server, and the unused_mcp_server banner names the one server never called."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from aiohttp import web

from browser import assert_page_matches, proxy_in_thread, screenshot, wait_for_state
from tools_card import banner_servers, browser_errors, server_rows, unused_under

OBJECT = {"type": "object", "properties": {"path": {"type": "string", "title": "Path"}}}
CATALOGUE = [
    {"name": name, "description": f"{name}, a tool.", "input_schema": OBJECT}
    for name in (
        "Read",
        "Bash",
        "mcp__git__git_status",
        "mcp__git__git_log",
        "mcp__memory__open_nodes",
        "mcp__memory__search_nodes",
    )
]
# Turn -> the tools its answer calls: Read and git_status now and then, memory never.
CALLS = {0: ["Read"], 7: ["mcp__git__git_status"], 20: ["Read", "Bash"], 41: ["Read"]}
REQUESTS, SESSIONS = 60, 4


async def answer(request: web.Request) -> web.Response:
    await request.read()
    calls = json.loads(request.headers.get("X-Calls", "[]"))
    content: list[dict[str, Any]] = [{"type": "text", "text": "ok"}]
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}
        for i, name in enumerate(calls)
    ]
    usage = {"input_tokens": 40, "output_tokens": 5, "cache_read_input_tokens": 3000}
    return web.json_response(
        {"type": "message", "role": "assistant", "content": content, "usage": usage}
    )


def running_proxy() -> Any:
    """The real proxy before an upstream that calls the tools X-Calls names, in a thread of
    their own (the browser blocks this one), at the URL yielded."""
    fake = web.Application()
    fake.router.add_route("*", "/{tail:.*}", answer)
    return proxy_in_thread(fake, "dashboard-ledger-proxy")


def send_script(url: str) -> dict[str, Any]:
    """The scripted requests, then /stats once every one is counted."""
    for turn in range(REQUESTS):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": f"turn {turn}"}],
            "tools": CATALOGUE,
        }
        request = urllib.request.Request(
            f"{url}/v1/messages",
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "User-Agent": "claude-cli/2.1.197 (external, cli)",
                "X-Claude-Code-Session-Id": f"session-{turn % SESSIONS}",
                "X-Calls": json.dumps(CALLS.get(turn, [])),
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
    deadline = time.monotonic() + 10
    while True:
        with urllib.request.urlopen(f"{url}/stats", timeout=10) as response:
            snapshot: dict[str, Any] = json.load(response)
        counted = snapshot["requests"]["total"] == REQUESTS
        tools = snapshot["tools"]["servers"]
        if (counted and tools and snapshot["requests"]["tokens_pending"] == 0) or (
            time.monotonic() > deadline
        ):
            return snapshot
        time.sleep(0.05)


def test_the_tools_card_of_the_running_proxy_shows_its_ledger_and_the_unused_server(
    driver: Any,
    tmp_path: Path,
) -> None:
    with running_proxy() as url:
        snapshot = send_script(url)
        driver.get(f"{url}/dashboard")
        wait_for_state(driver, "live")
        shown = assert_page_matches(driver, snapshot)
        rows = server_rows(driver)
        under = unused_under(driver)
        banner = banner_servers(driver)
        errors = browser_errors(driver)
        screenshot(driver, tmp_path / "dashboard-ledger.png")
    servers = snapshot["tools"]["servers"]
    assert [(r["client"], r["server"]) for r in rows] == [
        (s["client"], s["server"]) for s in servers
    ]
    assert {s["server"]: s["calls"] for s in servers} == {"builtin": 4, "git": 1, "memory": 0}
    assert [s["server"] for s in servers if s["unused"]] == ["memory"]
    assert banner == ["claude-cli/memory"]
    assert under["claude-cli/memory"] == ["mcp__memory__open_nodes", "mcp__memory__search_nodes"]
    assert under["claude-cli/git"] == ["mcp__git__git_log"]
    assert "claude-cli/builtin" not in under
    for i in range(len(servers)):
        assert f"tools.servers.{i}.tokens_per_request" in shown
    assert errors == []
