"""/stats, /metrics and the dashboard agree field by field after a mixed batch of real traffic.

The real proxy (`make_app`) and a real recording upstream run on 127.0.0.1 in a background
thread; the batch goes through real sockets; the page is read in headless Chromium.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from browser import assert_page_matches, required_paths, screenshot, wait_for_state
from exposition import expected_samples
from proxy_harness import ANTHROPIC, CANONICAL_TOOLS, FakeUpstream, dumps, settings_for
from toolslim.proxy.app import make_app

MAX_BODY = 4096


class Servers:
    """The upstream and the proxy, served from one event loop in a thread of their own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.upstream = FakeUpstream()
        self.proxy_port = 0
        self.runners: list[web.AppRunner] = []

    async def serve(self, app: web.Application) -> int:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.runners.append(runner)
        return int(runner.addresses[0][1])

    async def start(self) -> None:
        upstream_port = await self.serve(self.upstream.app())
        settings = settings_for(f"http://127.0.0.1:{upstream_port}", max_body_bytes=MAX_BODY)
        self.proxy_port = await self.serve(make_app(settings))

    async def stop(self) -> None:
        for runner in reversed(self.runners):
            await runner.cleanup()


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    servers = Servers()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(servers.loop)
        servers.loop.run_until_complete(servers.start())
        ready.set()
        servers.loop.run_forever()
        servers.loop.run_until_complete(servers.stop())
        servers.loop.close()

    thread = threading.Thread(target=run, name="agreement-servers", daemon=True)
    thread.start()
    assert ready.wait(10), "the proxy and upstream did not start"
    try:
        yield servers
    finally:
        servers.loop.call_soon_threadsafe(servers.loop.stop)
        thread.join(10)


def call(port: int, method: str, path: str, body: bytes | None = None, **headers: str) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        connection.request(method, path, body=body, headers=headers)
        return connection.getresponse().read()
    finally:
        connection.close()


# The mix issue 4 names: compacted, nothing to strip, not JSON, too large, upstream error,
# streamed with usage (and a GET, which has no body).
BATCH: list[tuple[str, str, bytes | None, dict[str, str]]] = [
    ("POST", "/v1/messages", dumps(ANTHROPIC), {}),
    ("POST", "/v1/messages", dumps(ANTHROPIC), {}),  # the same catalogue: a memo hit
    ("POST", "/v1/messages", b'{"tools": ' + CANONICAL_TOOLS + b', "messages": []}', {}),
    ("POST", "/v1/messages", b"this is not json", {}),
    ("POST", "/v1/messages", dumps({**ANTHROPIC, "system": "z" * MAX_BODY}), {}),
    ("POST", "/v1/messages", dumps(ANTHROPIC), {"X-Fake": "status:529"}),
    ("POST", "/v1/messages", dumps(ANTHROPIC), {"X-Fake": "sse:3:1"}),
    ("GET", "/v1/models", None, {"x-api-key": "sk-test"}),
]


@pytest.fixture(scope="module")
def settled(servers: Servers) -> dict[str, Any]:
    """/stats once the batch is counted, tokens included (they are counted off the loop)."""
    for method, path, body, headers in BATCH:
        call(servers.proxy_port, method, path, body, **headers)
    deadline = time.monotonic() + 10
    while True:
        snapshot: dict[str, Any] = json.loads(call(servers.proxy_port, "GET", "/stats"))
        requests = snapshot["requests"]
        if requests["total"] == len(BATCH) and requests["tokens_pending"] == 0:
            return snapshot
        assert time.monotonic() < deadline, snapshot
        time.sleep(0.05)


def test_the_batch_is_counted_as_it_happened(settled: dict[str, Any]) -> None:
    toolschema = settled["components"]["toolschema"]
    assert settled["requests"]["total"] == len(BATCH)
    assert toolschema["applied"] + toolschema["skipped"] + toolschema["error"] == len(BATCH)
    assert toolschema["applied"] == 4  # the compacted bodies, whatever the upstream answered
    assert toolschema["skip_reasons"] == {
        "no_body": 1,
        "nothing_to_strip": 1,
        "not_json": 1,
        "too_large": 1,
    }
    assert settled["requests"]["by_status"]["5xx"] == 1
    assert settled["memo"]["hits"] == 3 and settled["memo"]["misses"] == 2
    assert settled["usage"]["responses_with_usage"] >= 1  # the stream and the JSON answers
    assert toolschema["tokens_saved"] == 4 * settled["cache"]["tokens_saved_per_request"]


def test_metrics_equal_stats_field_by_field(servers: Servers, settled: dict[str, Any]) -> None:
    text = call(servers.proxy_port, "GET", "/metrics").decode()
    scraped = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    expected, _ = expected_samples(settled)
    assert scraped == expected


def test_the_dashboard_shows_exactly_what_stats_says(
    servers: Servers,
    settled: dict[str, Any],
    driver: Any,
    tmp_path: Path,
) -> None:
    driver.get(f"http://127.0.0.1:{servers.proxy_port}/dashboard")
    wait_for_state(driver, "live")
    shown = assert_page_matches(driver, settled)
    assert required_paths(settled) <= shown
    screenshot(driver, tmp_path / "dashboard-after-mixed-batch.png")
