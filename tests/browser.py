"""Reading the dashboard in a real headless Chromium: a stand-in server of the page and a fixed
/stats snapshot (in a thread of its own: selenium blocks), and the checks that the page shows
the snapshot exactly. The browser itself is tests/system/conftest.py's `driver` fixture."""

from __future__ import annotations

import asyncio
import base64
import math
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp import web

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT_SECONDS = 15


# data-format -> (scale, decimals), as documented in docs/stats.md
FORMATS = {
    "int": (1, 0),
    "ms": (1000, 2),
    "ms0": (1000, 0),
    "dec1": (1, 1),
    "dec2": (1, 2),
    "dec4": (1, 4),
}


def find_executable(*candidates: str) -> str | None:
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def page_stats(driver: Any) -> list[tuple[str, str, str]]:
    """(data-stat, data-format, text) of every number on the page."""
    rows: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('[data-stat]')]"
        ".map(e => [e.dataset.stat, e.dataset.format || 'int', e.textContent.trim()]);"
    )
    return [(path, fmt, text) for path, fmt, text in rows]


def page_texts(driver: Any) -> list[tuple[str, str]]:
    """(data-text, text) of every value on the page that is text (a catalogue's name)."""
    rows: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('[data-text]')]"
        ".map(e => [e.dataset.text, e.textContent.trim()]);"
    )
    return [(path, text) for path, text in rows]


def lookup(snapshot: dict[str, Any], path: str) -> Any:
    """The value at a page's path: segments are keys (percent-escaped) or list indices."""
    value: Any = snapshot
    for segment in path.split("."):
        value = value[int(segment)] if isinstance(value, list) else value[unquote(segment)]
    return value


def escape(key: str) -> str:
    return key.replace("%", "%25").replace(".", "%2E")


def assert_page_matches(driver: Any, snapshot: dict[str, Any]) -> set[str]:
    """Every number on the page equals the snapshot at its data-stat path; returns the paths."""
    shown = page_stats(driver)
    assert shown, "the page shows no data-stat numbers"
    for path, fmt, text in shown:
        value = lookup(snapshot, path)
        if value is None:
            assert text == "—", (path, text)
            continue
        scale, digits = FORMATS[fmt]
        number = float(text.replace(",", ""))
        expected = value * scale
        # the page rounds half away from zero, Python to even: allow half a displayed unit
        assert math.isclose(number, round(expected, digits), abs_tol=0.5 * 10**-digits + 1e-9), (
            path,
            text,
            value,
        )
    for path, text in page_texts(driver):
        value = lookup(snapshot, path)
        assert text == (value if isinstance(value, str) and value else "—"), (path, text)
    return {path for path, _, _ in shown}


def required_paths(snapshot: dict[str, Any]) -> set[str]:
    req = snapshot["requests"]
    paths = {
        "requests.total",
        "requests.active_streams",
        "requests.client_disconnects",
        "requests.bytes_received",
        "requests.bytes_forwarded",
        "memo.hits",
        "memo.misses",
        "memo.size",
        "memo.capacity",
        "usage.responses_with_usage",
        "usage.usage_unavailable",
        "cache.warm_break_even_requests",
        "cache.cold_tokens_saved",
        "cache.warm_tokens_saved",
        "cache.catalogue_tokens",
        "cache.tokens_saved_per_request",
    }
    for key in ("by_upstream", "by_api", "by_status", "upstream_errors"):
        paths |= {f"requests.{key}.{escape(name)}" for name in req[key]}
    paths |= {f"usage.tokens.{kind}" for kind in snapshot["usage"]["tokens"]}
    for histogram in ("proxy_overhead_seconds", "upstream_ttfb_seconds"):
        paths |= {f"timings.{histogram}.{q}" for q in ("p50", "p90", "p99")}
    for name, c in snapshot["components"].items():
        base = f"components.{escape(name)}"
        paths |= {
            f"{base}.{key}"
            for key in (
                "applied",
                "skipped",
                "error",
                "tools_seen",
                "tools_changed",
                "bytes_saved",
                "tokens_saved",
            )
        }
        paths |= {f"{base}.skip_reasons.{escape(r)}" for r in c["skip_reasons"]}
        paths |= {f"{base}.removed.{escape(k)}" for k in c["removed"]}
    return paths


def wait_for_state(driver: Any, state: str) -> None:
    WebDriverWait(driver, WAIT_SECONDS).until(
        lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == state,
        message=f"status never became {state!r}",
    )


def screenshot(driver: Any, path: Path) -> Path:
    """A full-page PNG (beyond the viewport), for a human to look at."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
    )
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 10_000, "the screenshot is suspiciously small"
    return path


DASHBOARD = Path(__file__).resolve().parents[1] / "src" / "toolslim" / "observe" / "dashboard"


# The page must run under a strict policy: no inline script or style, nothing off-origin.
CSP = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"


@dataclass
class StatsServer:
    snapshot: dict[str, Any]
    token: str | None = None
    fail_with: int | None = None
    authorizations: list[str | None] = field(default_factory=list)
    url: str = ""

    async def stats(self, request: web.Request) -> web.Response:
        given = request.headers.get("Authorization")
        self.authorizations.append(given)
        if self.token is not None and given != f"Bearer {self.token}":
            return web.json_response({"error": "admin token required"}, status=401)
        if self.fail_with is not None:
            return web.json_response({"error": "broken"}, status=self.fail_with)
        return web.json_response(self.snapshot)

    @staticmethod
    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(DASHBOARD / "index.html")

    def app(self) -> web.Application:
        @web.middleware
        async def csp(request: web.Request, handler: Any) -> web.StreamResponse:
            response: web.StreamResponse = await handler(request)
            response.headers["Content-Security-Policy"] = CSP
            response.headers["Cache-Control"] = "no-store"
            return response

        app = web.Application(middlewares=[csp])
        app.router.add_get("/stats", self.stats)
        app.router.add_get("/dashboard", self.index)
        app.router.add_static("/dashboard", DASHBOARD)
        return app


@contextmanager
def serve(server: StatsServer) -> Iterator[StatsServer]:
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(server.app(), access_log=None)
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        host, port = runner.addresses[0][:2]
        server.url = f"http://{host}:{port}"
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="dashboard-test-server", daemon=True)
    thread.start()
    assert ready.wait(10), "the stand-in server did not start"
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextmanager
def proxy_in_thread(upstream: web.Application, name: str) -> Iterator[str]:
    """The real proxy before `upstream`, both on 127.0.0.1 in a thread of their own (the
    browser blocks the test's), at the URL yielded; stopped and cleaned up on exit."""
    from proxy_harness import settings_for
    from toolslim.proxy.app import make_app

    loop = asyncio.new_event_loop()
    runners: list[web.AppRunner] = []
    ready = threading.Event()
    url: list[str] = []

    async def start() -> None:
        fake = web.AppRunner(upstream, access_log=None)
        await fake.setup()
        await web.TCPSite(fake, "127.0.0.1", 0).start()
        host, port = fake.addresses[0][:2]
        proxy = web.AppRunner(make_app(settings_for(f"http://{host}:{port}")), access_log=None)
        await proxy.setup()
        await web.TCPSite(proxy, "127.0.0.1", 0).start()
        runners.extend((proxy, fake))
        host, port = proxy.addresses[0][:2]
        url.append(f"http://{host}:{port}")

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        for runner in runners:
            loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    assert ready.wait(10), "the proxy did not start"
    try:
        yield url[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
