"""The dashboard's lint banner, in a real headless Chromium: one per rule that requests broke,
naming the newest finding's tool and server with its fix, and its count from /stats."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolslim.core.facts import CatalogueFacts
from toolslim.observe.health import Linter
from toolslim.observe.stats import Stats

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from browser import StatsServer, page_stats, serve, wait_for_state


def lint_banners(page: Any) -> dict[str, str]:
    """rule -> the text its banner shows."""
    rows: list[list[str]] = page.execute_script(
        "return [...document.querySelectorAll('#advice [data-lint]')]"
        ".map(e => [e.dataset.lint, e.textContent])"
    )
    return dict((rule, text) for rule, text in rows)


def test_a_rule_that_requests_broke_has_a_banner_with_the_tool_its_server_and_the_fix(
    driver: Any,
) -> None:
    stats = Stats(["toolschema"])
    linter = Linter(stats.health)
    tool = {"name": "mcp__ci__get", "input_schema": {"anyOf": [{"type": "object"}]}}
    facts = CatalogueFacts(orjson.dumps([tool]))
    for _ in range(2):
        linter.request("anthropic", [facts], "POST", "/v1/messages")
    snapshot = stats.snapshot()
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        banners = lint_banners(driver)
        shown = {path: text for path, _, text in page_stats(driver)}
    assert set(banners) == {"anthropic_root_combinator"}
    text = banners["anthropic_root_combinator"]
    [finding] = snapshot["lint"]["findings"]
    assert "(rejected)" in text and "mcp__ci__get" in text and "server ci" in text
    assert finding["fix"] in text
    assert shown["lint.rules.anthropic_root_combinator.requests"] == "2"
