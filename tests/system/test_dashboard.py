"""dashboard: the page shows /stats exactly, in a real headless Chromium, light, dark and narrow.

The server here is a stand-in (static files plus a fixed /stats); the proxy's own wiring is
tested end to end elsewhere, reusing `page_stats` and `assert_page_matches`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeClock, mixed_stats
from toolslim.core.pipeline import skipped_report
from toolslim.observe.stats import Stats

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from browser import (  # noqa: E402  (after selenium's importorskip)
    WAIT_SECONDS,
    StatsServer,
    assert_page_matches,
    page_stats,
    proxy_in_thread,
    required_paths,
    screenshot,
    serve,
    wait_for_state,
)

TOKEN = "s3cret-admin-token"


# ---- a stand-in server, in its own thread (selenium blocks; the event loop must not)


def rich_snapshot() -> dict[str, Any]:
    """The mixed batch, plus an upstream whose name holds a dot (paths must escape it)."""
    stats, _ = mixed_stats()
    stats.record_pipeline(skipped_report(b"{}", ["toolschema"], "no_tools"))
    stats.record_request(
        upstream="azure.eu-1", api="openai-chat", status=200, bytes_in=900, bytes_out=900
    )
    return stats.snapshot()


# ---- reading the page


def browser_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


# ---- fixtures


@pytest.fixture(scope="module")
def snapshot() -> dict[str, Any]:
    return rich_snapshot()


@pytest.fixture(scope="module")
def open_server(snapshot: dict[str, Any]) -> Iterator[StatsServer]:
    with serve(StatsServer(snapshot)) as server:
        yield server


@pytest.fixture(scope="module")
def locked_server(snapshot: dict[str, Any]) -> Iterator[StatsServer]:
    with serve(StatsServer(snapshot, token=TOKEN)) as server:
        yield server


@pytest.fixture
def page(driver: Any, open_server: StatsServer) -> Iterator[Any]:
    driver.get(f"{open_server.url}/dashboard")
    wait_for_state(driver, "live")
    yield driver
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


# ---- tests


def test_every_number_on_the_page_equals_the_snapshot_at_its_data_stat_path(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    shown = assert_page_matches(page, snapshot)
    missing = required_paths(snapshot) - shown
    assert not missing, f"the page does not show: {sorted(missing)}"
    assert page.find_element(By.ID, "status-text").text.startswith("live")
    assert browser_errors(page) == []
    screenshot(page, tmp_path / "dashboard-desktop.png")


@pytest.mark.parametrize("components", [["toolschema"], []], ids=["toolschema", "pass-through"])
def test_a_fresh_proxy_shows_zeros_dashes_and_an_empty_chart(
    driver: Any, components: list[str], tmp_path: Path
) -> None:
    snapshot = Stats(components).snapshot()
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        shown = assert_page_matches(driver, snapshot)
        assert "requests.total" in shown
        assert driver.find_element(By.ID, "status-text").text.startswith("live")
        chart = driver.find_element(By.CSS_SELECTOR, "#chart svg")
        assert chart.get_attribute("data-points") == "0"
        assert "No traffic yet" in chart.text
        assert browser_errors(driver) == []
        screenshot(driver, tmp_path / f"dashboard-empty-{'-'.join(components) or 'none'}.png")


def test_the_chart_draws_every_series_point(page: Any, snapshot: dict[str, Any]) -> None:
    points = snapshot["series"]["points"]
    chart = page.find_element(By.CSS_SELECTOR, "#chart svg")
    assert int(chart.get_attribute("data-points")) == len(points) > 1
    slots = int(chart.get_attribute("data-slots"))
    line = chart.find_element(By.CSS_SELECTOR, "polyline.line").get_attribute("points")
    assert len(line.split()) == slots
    bars = chart.find_elements(By.CSS_SELECTOR, "rect.bar")
    assert len(bars) == sum(1 for p in points if p["requests"])
    dots = chart.find_elements(By.CSS_SELECTOR, "circle.dot")
    assert len(dots) == sum(1 for p in points if p["tokens_saved"])
    assert all(float(bar.get_attribute("height")) > 0 for bar in bars)


def test_a_375_px_wide_screen_has_no_horizontal_overflow(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    page.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 375, "height": 800, "deviceScaleFactor": 2, "mobile": True},
    )
    page.refresh()
    wait_for_state(page, "live")
    assert page.execute_script("return window.innerWidth") == 375
    widths = page.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    sticking_out = page.execute_script(
        "return [...document.querySelectorAll('main *, header *')]"
        ".filter(e => e.getClientRects().length && !e.closest('.sr-only'))"
        ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)"
        ".map(e => e.tagName + '.' + e.className)"
    )
    assert sticking_out == []
    assert_page_matches(page, snapshot)
    screenshot(page, tmp_path / "dashboard-375px.png")


def luminance(css_color: str) -> float:
    channels = css_color[css_color.index("(") + 1 : css_color.index(")")].split(",")
    r, g, b = (int(float(c)) / 255 for c in channels[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_dark_mode_renders_light_text_on_a_dark_background(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    light = page.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert luminance(light) > 0.8
    page.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
    )
    page.refresh()
    wait_for_state(page, "live")
    colors = page.execute_script(
        "const card = document.querySelector('.card');"
        "return [getComputedStyle(document.body).backgroundColor,"
        " getComputedStyle(card).backgroundColor, getComputedStyle(document.body).color]"
    )
    body, card, text = colors
    assert luminance(body) < 0.15, colors
    assert luminance(card) < 0.2, colors
    assert luminance(text) > 0.8, colors
    assert_page_matches(page, snapshot)
    screenshot(page, tmp_path / "dashboard-dark.png")


def test_a_token_protected_stats_shows_the_form_and_the_numbers_once_unlocked(
    driver: Any, locked_server: StatsServer, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    driver.get(f"{locked_server.url}/dashboard")
    driver.execute_script("sessionStorage.clear()")
    driver.refresh()
    wait_for_state(driver, "auth")
    form = driver.find_element(By.ID, "auth")
    assert form.is_displayed()
    assert not driver.find_element(By.ID, "content").is_displayed()
    screenshot(driver, tmp_path / "dashboard-token-form.png")

    driver.find_element(By.ID, "token").send_keys("wrong-token")
    driver.find_element(By.CSS_SELECTOR, "#auth button[type=submit]").click()
    WebDriverWait(driver, WAIT_SECONDS).until(
        lambda d: d.find_element(By.ID, "auth-error").is_displayed(),
        message="a rejected token shows no error",
    )
    assert locked_server.authorizations[-1] == "Bearer wrong-token"

    driver.find_element(By.ID, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "#auth button[type=submit]").click()
    wait_for_state(driver, "live")
    assert not form.is_displayed()
    assert locked_server.authorizations[-1] == f"Bearer {TOKEN}"
    assert driver.execute_script("return sessionStorage.getItem('toolslim.adminToken')") == TOKEN
    assert assert_page_matches(driver, snapshot) >= required_paths(snapshot)


def test_a_token_in_the_url_fragment_is_used_once_and_removed_from_the_address_bar(
    driver: Any, locked_server: StatsServer, snapshot: dict[str, Any]
) -> None:
    driver.get(f"{locked_server.url}/dashboard")
    driver.execute_script("sessionStorage.clear()")
    driver.get("about:blank")  # so the next load is a fresh page, not a fragment change
    driver.get(f"{locked_server.url}/dashboard#token={TOKEN}")
    wait_for_state(driver, "live")
    assert driver.execute_script("return location.hash") == ""
    assert driver.current_url == f"{locked_server.url}/dashboard"
    assert not driver.find_element(By.ID, "auth").is_displayed()
    assert locked_server.authorizations[-1] == f"Bearer {TOKEN}"
    assert_page_matches(driver, snapshot)


def test_a_token_pasted_into_the_fragment_of_an_open_locked_page_unlocks_it(
    driver: Any, locked_server: StatsServer, snapshot: dict[str, Any]
) -> None:
    driver.get(f"{locked_server.url}/dashboard")
    driver.execute_script("sessionStorage.clear()")
    driver.refresh()
    wait_for_state(driver, "auth")
    driver.execute_script(f"location.hash = '#token={TOKEN}'")
    wait_for_state(driver, "live")
    assert driver.execute_script("return location.hash") == ""
    assert not driver.find_element(By.ID, "auth").is_displayed()
    assert_page_matches(driver, snapshot)


def test_the_page_says_error_when_stats_fails_and_loads_nothing_off_origin(
    driver: Any, open_server: StatsServer
) -> None:
    driver.get(f"{open_server.url}/dashboard")
    wait_for_state(driver, "live")
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert resources and all(r.startswith(open_server.url) for r in resources), resources
    open_server.fail_with = 503
    try:
        wait_for_state(driver, "error")
        assert driver.find_element(By.ID, "status-text").text == "error: /stats answered HTTP 503"
        assert driver.find_element(By.ID, "content").get_attribute("class") == "stale"
    finally:
        open_server.fail_with = None
    wait_for_state(driver, "live")


# ---- advisories and catalogue drift


def advice_banners(driver: Any) -> dict[str, str]:
    """advisory name -> the fix its banner shows."""
    rows: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('#advice [data-advice]')]"
        ".map(e => [e.dataset.advice, e.querySelector('.fix').textContent])"
    )
    return dict((name, fix) for name, fix in rows)


def drift_rows(driver: Any) -> list[tuple[str, str]]:
    """(kind, text) of each recent change the drift panel lists, top first."""
    rows: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('#drift-recent [data-drift]')]"
        ".map(e => [e.dataset.drift, e.textContent])"
    )
    return [(kind, text) for kind, text in rows]


def assert_drift_and_advice_shown(driver: Any, snapshot: dict[str, Any]) -> None:
    active = {n: a["fix"] for n, a in snapshot["advice"].items() if a["requests"]}
    assert advice_banners(driver) == active
    shown = drift_rows(driver)
    recent = list(reversed(snapshot["drift"]["recent"]))  # newest first
    assert [kind for kind, _ in shown] == [event["kind"] for event in recent]
    for (_, text), event in zip(shown, recent, strict=True):
        assert event["session"] in text
        for name in event["tools"] + event["servers"]:
            assert name in text
        assert f"{event['cache_write_tokens_after']:,}" in text
    paths = {path for path, _, _ in page_stats(driver)}
    for kind in snapshot["drift"]["changes"]:
        assert f"drift.changes.{kind}" in paths
        assert f"drift.cache_write_tokens_after.{kind}" in paths
    assert "drift.sessions" in paths


def test_each_active_advisory_has_a_banner_with_its_fix_and_the_drift_panel_lists_changes(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    assert_drift_and_advice_shown(page, snapshot)
    assert set(advice_banners(page)) == {"claude_code_tool_search_off", "websocket_disabled"}
    assert page.find_element(By.ID, "advice").is_displayed()
    screenshot(page, tmp_path / "dashboard-advice-drift.png")


def test_without_advisories_or_changes_there_is_no_banner_and_the_panel_says_so(
    driver: Any,
) -> None:
    snapshot = Stats(["toolschema"]).snapshot()
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        assert advice_banners(driver) == {}
        assert not driver.find_element(By.ID, "advice").is_displayed()
        assert drift_rows(driver) == []
        assert "no catalogue changes yet" in driver.find_element(By.ID, "drift-recent").text


def running_proxy() -> Any:
    """The real proxy and an upstream that answers with the usage asked for, in a thread of
    their own (the browser blocks this one), at the URL yielded."""
    from sessions import UsageUpstream

    return proxy_in_thread(UsageUpstream().app(), "dashboard-test-proxy")


def test_stats_metrics_and_the_dashboard_of_the_running_proxy_agree_on_drift_and_advice(
    driver: Any, tmp_path: Path
) -> None:
    import json
    import time
    import urllib.request

    from sessions import SCRIPT, anthropic_body

    with running_proxy() as url:
        for turn, (catalogue, _, written) in enumerate(SCRIPT):
            usage = {"input_tokens": 3, "output_tokens": 1, "cache_creation_input_tokens": written}
            request = urllib.request.Request(
                f"{url}/v1/messages",
                data=anthropic_body(catalogue, turn),
                headers={
                    "X-Claude-Code-Session-Id": "dashboard-session",
                    "User-Agent": "claude-cli/2.1.197 (external, cli)",
                    "X-Usage": json.dumps(usage),
                    "Content-Type": "application/json",
                },
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(f"{url}/stats", timeout=10) as response:
                snapshot = json.load(response)
            counted = snapshot["requests"]["total"] == len(SCRIPT)
            if (
                counted and snapshot["requests"]["tokens_pending"] == 0
            ) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        driver.get(f"{url}/dashboard")
        wait_for_state(driver, "live")
        assert_page_matches(driver, snapshot)
        assert_drift_and_advice_shown(driver, snapshot)
        screenshot(driver, tmp_path / "dashboard-running-proxy.png")
    assert sum(snapshot["drift"]["changes"].values()) == 5
    assert snapshot["advice"]["claude_code_tool_search_off"]["requests"] == 4  # mcp__ from turn 3
    for kind, count in snapshot["drift"]["changes"].items():
        assert f'toolslim_catalogue_changes_total{{kind="{kind}"}} {float(count)}' in metrics
    advice = 'toolslim_advice_requests_total{advice="claude_code_tool_search_off"} 4.0'
    assert advice in metrics


# ---- one 24-hour clock, a chart from the process's start, a break-even that names its catalogue

HHMMSS = re.compile(r"\d\d:\d\d:\d\d")


@contextmanager
def twelve_hour_utc(driver: Any) -> Iterator[None]:
    """The browser in en-US (whose own time format is 12-hour) and UTC, while in the block."""
    driver.execute_cdp_cmd("Emulation.setLocaleOverride", {"locale": "en-US"})
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "UTC"})
    try:
        yield
    finally:
        driver.execute_cdp_cmd("Emulation.setLocaleOverride", {})
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def utc_clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def chart_times(driver: Any) -> list[str]:
    """The chart's time-axis labels, left to right, then the time each bar's title names."""
    found: list[str] = driver.execute_script(
        "const svg = document.querySelector('#chart svg');"
        "return [...svg.querySelectorAll('text.time')].map(e => e.textContent).concat("
        "[...svg.querySelectorAll('rect.bar title')].map(e => e.textContent.split(' · ')[0]));"
    )
    return found


def snapshot_at(started: float, uptime: float) -> dict[str, Any]:
    clock = FakeClock(started)
    stats = Stats(["toolschema"], clock=clock)
    clock.now = started + uptime
    return stats.snapshot()


def test_the_header_clock_and_the_chart_tell_the_same_24_hour_time(
    driver: Any, snapshot: dict[str, Any], open_server: StatsServer
) -> None:
    with twelve_hour_utc(driver):
        driver.get(f"{open_server.url}/dashboard")
        wait_for_state(driver, "live")
        now = snapshot["started_at"] + snapshot["uptime_seconds"]
        own = driver.execute_script(f"return new Date({now * 1000}).toLocaleTimeString()")
        assert own.endswith("PM")  # the browser's own format would say 1:47:45 PM
        header = driver.find_element(By.ID, "status-text").text
        assert header == f"live · updated {utc_clock(now)}" == "live · updated 13:47:45"
        times = chart_times(driver)
        assert times and all(HHMMSS.fullmatch(t) for t in times), times
        interval = snapshot["series"]["interval_seconds"]
        assert times[0] == utc_clock(snapshot["started_at"] // interval * interval)
        assert times[2] == utc_clock(now // interval * interval)  # the last slot is now's
        bars = {utc_clock(p["t"]) for p in snapshot["series"]["points"] if p["requests"]}
        assert set(times[3:]) == bars
        shown = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#drift-recent time")]
        assert shown == [utc_clock(e["time"]) for e in reversed(snapshot["drift"]["recent"])]


@pytest.mark.parametrize(
    ("uptime", "slots"),
    [(0, 1), (95, 10), (7200, 360)],
    ids=["just-started", "started-95-s-ago", "up-for-2-hours"],
)
def test_the_chart_starts_in_the_interval_the_process_started_in(
    driver: Any, uptime: float, slots: int
) -> None:
    started = 1_000_003.0  # 13:46:43 UTC: in the interval that starts at 13:46:40
    snapshot = snapshot_at(started, uptime)
    browser_errors(driver)  # read, so that only this page's count
    with twelve_hour_utc(driver), serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        chart = driver.find_element(By.CSS_SELECTOR, "#chart svg")
        assert int(chart.get_attribute("data-slots")) == slots
        first = started // 10 * 10 if slots < 360 else (started + uptime) // 10 * 10 - 3590
        assert chart_times(driver)[0] == utc_clock(first)
        assert browser_errors(driver) == []


def test_the_break_even_card_names_each_api_s_most_requested_catalogue(
    page: Any, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    by_api = snapshot["cache"]["by_api"]
    busiest = max(by_api, key=lambda api: snapshot["requests"]["by_api"][api])
    top = by_api[busiest][0]
    card = page.find_element(By.CSS_SELECTOR, ".kpi.break-even")
    big = card.find_element(By.ID, "break-even")
    assert big.get_attribute("data-stat") == f"cache.by_api.{busiest}.0.warm_break_even_requests"
    said = card.find_element(By.ID, "break-even-for").text
    assert f"for {busiest}'s most requested catalogue {top['catalogue']}" in said
    assert f"{top['tools']} tools · {top['requests']} calls" in said
    rows = page.find_elements(By.CSS_SELECTOR, "#break-even-by-api tr[data-api]")
    assert [row.get_attribute("data-api") for row in rows] == ["anthropic", "openai-chat"]
    for row in rows:
        api = row.get_attribute("data-api")
        assert by_api[api][0]["catalogue"] in row.text
    shown = assert_page_matches(page, snapshot)
    for api in by_api:
        for key in ("requests", "tools", "catalogue_tokens", "tokens_saved_per_request"):
            assert f"cache.by_api.{api}.0.{key}" in shown
        assert f"cache.by_api.{api}.0.warm_break_even_requests" in shown
    screenshot(page, tmp_path / "dashboard-break-even.png")


def test_before_any_catalogue_the_card_says_it_would_be_the_latest_and_the_table_is_empty(
    driver: Any,
) -> None:
    snapshot = Stats(["toolschema"]).snapshot()
    with serve(StatsServer(snapshot)) as server:
        driver.get(f"{server.url}/dashboard")
        wait_for_state(driver, "live")
        big = driver.find_element(By.ID, "break-even")
        assert big.get_attribute("data-stat") == "cache.warm_break_even_requests"
        assert big.text == "—"
        assert "latest compacted catalogue" in driver.find_element(By.ID, "break-even-for").text
        table = driver.find_element(By.ID, "break-even-by-api").text
        assert table == "no model call carried a catalogue yet"


def test_the_running_proxy_s_dashboard_names_the_catalogue_and_counts_no_probe_as_a_call(
    driver: Any, tmp_path: Path
) -> None:
    import json
    import time
    import urllib.request

    from sessions import BASH, READ, anthropic_body

    usual, other = anthropic_body([READ, BASH], 0), anthropic_body([BASH], 0)
    with running_proxy() as url:
        for method, body in (
            [("HEAD", None), ("HEAD", None)] + [("POST", usual)] * 3 + [("POST", other)]
        ):
            target = f"{url}/v1/messages" if body else f"{url}/"
            request = urllib.request.Request(target, data=body, method=method)
            request.add_header("X-Usage", json.dumps({"input_tokens": 3, "output_tokens": 1}))
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(f"{url}/stats", timeout=10) as response:
                snapshot = json.load(response)
            requests = snapshot["requests"]
            if (requests["total"] == 6 and requests["tokens_pending"] == 0) or (
                time.monotonic() > deadline
            ):
                break
            time.sleep(0.05)
        with twelve_hour_utc(driver):
            driver.get(f"{url}/dashboard")
            wait_for_state(driver, "live")
            assert_page_matches(driver, snapshot)
            said = driver.find_element(By.ID, "break-even-for").text
            header = driver.find_element(By.ID, "status-text").text
            times = chart_times(driver)
            screenshot(driver, tmp_path / "dashboard-running-proxy-break-even.png")
    assert snapshot["usage"] == {
        **snapshot["usage"],
        "usage_unavailable": 0,  # the HEAD probes owed no usage
        "responses_with_usage": 4,
    }
    [top, then] = snapshot["cache"]["by_api"]["anthropic"]
    assert (top["requests"], top["tools"], then["requests"], then["tools"]) == (3, 2, 1, 1)
    assert f"for anthropic's most requested catalogue {top['catalogue']} · 2 tools · 3 calls" in (
        said
    )
    assert HHMMSS.fullmatch(header.removeprefix("live · updated ")), header
    assert times[0] == utc_clock(snapshot["started_at"] // 10 * 10)
