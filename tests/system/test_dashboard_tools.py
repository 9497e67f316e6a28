"""dashboard, "What your tools cost": one row per MCP server from /stats `tools`, its unused tools
under it and the unused_mcp_server banner, in a real headless Chromium; an older /stats without
`tools` still renders. The server is browser.py's stand-in (static files, a fixed /stats)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolslim.observe.stats import Stats

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By

from browser import (
    StatsServer,
    assert_page_matches,
    page_stats,
    screenshot,
    serve,
    wait_for_state,
)
from tools_card import banner_servers, browser_errors, server_rows, unused_under

TIERS = ("read", "write", "uncached", "unknown")


def tiers(read: int, write: int = 0, uncached: int = 0, unknown: int = 0) -> dict[str, int]:
    return dict(zip(TIERS, (read, write, uncached, unknown), strict=True))


def server(
    client: str,
    name: str,
    tools: int,
    tokens: float,
    *,
    calls: int,
    unused_tools: int,
    usd: float,
    today: float,
) -> dict[str, Any]:
    """One `tools.servers` item, in the shape /stats documents (docs/stats.md)."""
    return {
        "client": client,
        "server": name,
        "tools": tools,
        "tokens_per_request": tokens,
        "offered_tokens": tiers(int(tokens * 90), int(tokens * 8), int(tokens * 2)),
        "deferred_tokens": 0,
        "cost": {"equivalents": tokens * 19.2, "usd": usd},
        "cost_today": {"equivalents": tokens * 4.8, "usd": today},
        "calls": calls,
        "unused_tools": unused_tools,
        "unused": unused_tools == tools,
    }


def tool(client: str, name: str, tool_name: str, tokens: int, calls: int = 0) -> dict[str, Any]:
    """One `tools.costliest` / `tools.unused` item."""
    return {
        "client": client,
        "server": name,
        "tool": tool_name,
        "requests": 100,
        "sessions": 4,
        "tokens": tokens,
        "offered_tokens": tiers(tokens * 90, tokens * 8, tokens * 2),
        "deferred": False,
        "cost": {"equivalents": tokens * 19.2, "usd": tokens * 0.0000576},
        "calls": calls,
        "first_offered": "2026-12-04T08:00:00Z",
        "last_offered": "2026-12-04T21:59:00Z",
        "last_called": None if not calls else "2026-12-04T21:30:00Z",
    }


def tools_section() -> dict[str, Any]:
    """A Claude Code user with four MCP servers, one Codex session: two servers never called."""
    unused = [
        tool("claude-cli", "aws-docs", "read_documentation", 702),
        tool("claude-cli", "aws-docs", "search_documentation", 611),
        tool("claude-cli", "aws-docs", "recommend", 480),
        tool("claude-cli", "atlassian", "jira_get_worklog", 512),
        tool("claude-cli", "atlassian", "confluence_get_labels", 388),
        tool("codex", "memory", "open_nodes", 201),
    ]
    return {
        "input_tokens_per_request": 64_250.0,
        "servers": [
            server(
                "claude-cli",
                "atlassian",
                42,
                14_812.4,
                calls=31,
                unused_tools=30,
                usd=3.41,
                today=0.87,
            ),
            server(
                "claude-cli",
                "builtin",
                24,
                12_730.0,
                calls=412,
                unused_tools=0,
                usd=2.93,
                today=0.74,
            ),
            server(
                "claude-cli", "aws-docs", 3, 1_793.0, calls=0, unused_tools=3, usd=0.41, today=0.11
            ),
            server("codex", "memory", 1, 201.0, calls=0, unused_tools=1, usd=0.0036, today=0.0),
        ],
        "costliest": [
            tool("claude-cli", "builtin", "Bash", 2_310, calls=210),
            tool("claude-cli", "atlassian", "jira_create_issue", 1_204, calls=3),
        ],
        "unused": unused,
        "unknown_calls": {"total": 3, "names": {"mcp__gone__lookup": 3}},
        "unpriced": {"requests": 7, "models": {"local-llama-3": 7}},
        "cache_miss_reasons": {"tools_changed": {"requests": 2, "missed_tokens": 58_000}},
    }


UNUSED_FIX = (
    "These MCP servers are offered on every request and never called: turn them off in the "
    "client (Claude Code: claude mcp remove NAME)."
)


def server_advice(row: dict[str, Any]) -> dict[str, Any]:
    """One `advice.unused_mcp_server.servers` item: what the server costs, how to turn it off."""
    return {
        "client": row["client"],
        "server": row["server"],
        "tokens_per_request": row["tokens_per_request"],
        "cost_per_request": {"equivalents": row["tokens_per_request"], "usd": 0.0054},
        "cost_per_day": {"equivalents": row["tokens_per_request"] * 40, "usd": 0.21},
        "fix": f"turn {row['server']} off ({row['client']})",
    }


def with_tools(snapshot: dict[str, Any], *, per_server: bool = True) -> dict[str, Any]:
    """A fresh proxy's snapshot with the tools section and an active unused_mcp_server (with
    its servers, as the ledger renders it, or without, as a bare advisory)."""
    snapshot = copy.deepcopy(snapshot)
    snapshot["tools"] = tools_section()
    advice = {"requests": 120, "bytes": 0, "fix": UNUSED_FIX}
    if per_server:
        unused = [row for row in snapshot["tools"]["servers"] if row["unused"]]
        advice["servers"] = [server_advice(row) for row in unused]
    snapshot["advice"]["unused_mcp_server"] = advice
    return snapshot


@pytest.fixture(scope="module")
def snapshot() -> dict[str, Any]:
    return with_tools(Stats(["toolschema"]).snapshot())


@pytest.fixture
def page(driver: Any, snapshot: dict[str, Any]) -> Iterator[Any]:
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        yield driver
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


# ---- tests


def test_each_server_is_one_row_with_the_numbers_of_its_tools_entry(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    shown = assert_page_matches(page, snapshot)
    tools = snapshot["tools"]
    for i, _ in enumerate(tools["servers"]):
        for key in ("tools", "tokens_per_request", "calls"):
            assert f"tools.servers.{i}.{key}" in shown
        for cost in ("cost", "cost_today"):
            assert f"tools.servers.{i}.{cost}.usd" in shown
            assert f"tools.servers.{i}.{cost}.equivalents" in shown
    assert "tools.input_tokens_per_request" in shown
    rows = server_rows(page)
    assert [(r["client"], r["server"]) for r in rows] == [
        (s["client"], s["server"]) for s in tools["servers"]
    ]  # costliest first, as /stats orders them
    for row, item in zip(rows, tools["servers"], strict=True):
        share = 100 * item["tokens_per_request"] / tools["input_tokens_per_request"]
        assert row["share"] == f"{share:.1f}%"
        assert row["unused"] is item["unused"]
    assert [r["share"] for r in rows[:2]] == ["23.1%", "19.8%"]
    # Cents, and four decimals below a cent: a small server's cost is not shown as nothing.
    assert "$0.87" in rows[0]["text"] and "$0.0036" in rows[3]["text"]
    assert browser_errors(page) == []
    screenshot(page, tmp_path / "dashboard-tools.png")


def test_the_unused_tools_are_listed_under_their_own_server_with_what_each_costs(
    page: Any, snapshot: dict[str, Any]
) -> None:
    assert unused_under(page) == {
        "claude-cli/atlassian": ["jira_get_worklog", "confluence_get_labels", "+28 more"],
        "claude-cli/aws-docs": ["read_documentation", "search_documentation", "recommend"],
        "codex/memory": ["open_nodes"],
    }
    shown = {path for path, _, _ in page_stats(page)}
    assert {f"tools.unused.{j}.tokens" for j in range(6)} <= shown
    builtin = page.find_element(By.CSS_SELECTOR, '#tool-servers tr[data-server="builtin"]')
    assert "unused" not in builtin.get_attribute("class")


def test_the_unused_mcp_server_banner_names_each_unused_server_its_cost_and_its_fix(
    page: Any, snapshot: dict[str, Any]
) -> None:
    banner = page.find_element(By.CSS_SELECTOR, '#advice [data-advice="unused_mcp_server"]')
    assert banner.is_displayed()
    assert UNUSED_FIX in banner.text
    assert banner_servers(page) == ["claude-cli/aws-docs", "codex/memory"]
    for item in snapshot["advice"]["unused_mcp_server"]["servers"]:
        assert item["fix"] in banner.text
    shown = {path for path, _, _ in page_stats(page)}
    for i in (0, 1):
        base = f"advice.unused_mcp_server.servers.{i}"
        assert {f"{base}.tokens_per_request", f"{base}.cost_per_day.usd"} <= shown


def test_a_bare_unused_mcp_server_advisory_lists_the_unused_rows_of_tools(
    driver: Any,
) -> None:
    snapshot = with_tools(Stats(["toolschema"]).snapshot(), per_server=False)
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        assert banner_servers(driver) == ["claude-cli/aws-docs", "codex/memory"]
        shown = assert_page_matches(driver, snapshot)
        assert {"tools.servers.2.cost_today.usd", "tools.servers.3.cost_today.usd"} <= shown


def test_unknown_calls_unpriced_models_and_cache_misses_are_noted_under_the_table(
    page: Any,
) -> None:
    notes = page.find_element(By.ID, "tools-notes").text
    assert "3 calls to tools their request did not offer" in notes
    assert "7 requests of models without a price (local-llama-3)" in notes
    assert "cache misses the provider named: tools_changed 2× (58,000 tokens)" in notes


def test_an_older_stats_without_tools_says_so_and_shows_nothing_else(
    driver: Any,
) -> None:
    snapshot = Stats(["toolschema"]).snapshot()
    snapshot.pop("tools", None)  # as a proxy from before the tool ledger answers
    browser_errors(driver)  # read, so that only this page's count
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        shown = assert_page_matches(driver, snapshot)
        assert not any(path.startswith("tools.") for path in shown)
        text = driver.find_element(By.ID, "tool-servers").text
        assert "has no tools section (an older toolslim)" in text
        assert driver.find_element(By.ID, "tools-input").text == "—"
        assert driver.find_element(By.ID, "tools-notes").text == ""
        assert browser_errors(driver) == []


def test_before_any_tool_is_offered_the_card_says_so(driver: Any) -> None:
    snapshot = Stats(["toolschema"]).snapshot()
    snapshot["tools"] = {
        "input_tokens_per_request": 0.0,
        "servers": [],
        "costliest": [],
        "unused": [],
        "unknown_calls": {"total": 0, "names": {}},
        "unpriced": {"requests": 0, "models": {}},
        "cache_miss_reasons": {},
    }
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        assert_page_matches(driver, snapshot)
        assert driver.find_element(By.ID, "tool-servers").text == (
            "no model call offered a tool yet"
        )
        assert browser_errors(driver) == []


def test_on_a_375_px_screen_each_server_is_a_labelled_block_that_fits(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    page.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 375, "height": 800, "deviceScaleFactor": 2, "mobile": True},
    )
    page.refresh()
    wait_for_state(page, "live")
    sticking_out = page.execute_script(
        "return [...document.querySelectorAll('#tools *')]"
        ".filter(e => e.getClientRects().length)"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)"
        ".map(e => e.tagName + '.' + e.className)"
    )
    assert sticking_out == []
    widths = page.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    label = page.execute_script(
        "const td = document.querySelector('#tool-servers td[data-label]');"
        "return getComputedStyle(td, '::before').content"
    )
    assert label == '"tools"'
    assert_page_matches(page, snapshot)
    screenshot(page, tmp_path / "dashboard-tools-375px.png")
