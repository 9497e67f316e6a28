"""exchange through the real proxy: each proxied request counted once, its tokens, its log line
and its capture."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from proxy_harness import (
    ANTHROPIC,
    COMPACT_SCHEMA,
    GEMINI,
    KEY,
    SCHEMA,
    FakeUpstream,
    Proxy,
    assert_components_agree,
    dumps,
    raw_url,
    settings_for,
    stats_of,
    tools_span,
    total_is,
)
from toolslim.core.facts import digest
from toolslim.core.pipeline import Pipeline
from toolslim.observe.exchange import Exchange, Ledger
from toolslim.observe.stats import Stats
from toolslim.proxy.app import FORWARDING
from toolslim.wire.routing import route_request


async def test_stats_count_proxied_requests_only_and_components_always_add_up(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(max_body_bytes=4096)
    for path in ("/healthz", "/readyz", "/stats", "/metrics", "/dashboard"):
        async with client.get(server.make_url(path)) as response:
            assert response.status == 200, path
    batch: list[tuple[str, bytes, dict[str, str]]] = [
        ("/v1/messages", dumps(ANTHROPIC), {}),
        ("/v1/messages", b'{"messages": []}', {}),
        ("/v1/messages", b"not json", {}),
        ("/v1/messages", dumps({**ANTHROPIC, "system": "z" * 5000}), {}),
        ("/v1/messages", b"{}", {"X-Fake": "status:429"}),
        ("/v1/messages", dumps(ANTHROPIC), {"X-Fake": "sse:2:1"}),
    ]
    for path, body, headers in batch:
        async with client.post(server.make_url(path), data=body, headers=headers) as response:
            await response.read()
    async with client.get(server.make_url("/v1/models")) as response:
        await response.read()
    snapshot = await stats_of(client, server, total_is(7))
    assert snapshot["requests"]["total"] == 7
    assert snapshot["requests"]["by_upstream"] == {"anthropic": 6, "openai": 1}
    assert snapshot["requests"]["by_status"]["2xx"] == 6
    assert snapshot["requests"]["by_status"]["4xx"] == 1
    assert_components_agree(snapshot)
    timings = snapshot["timings"]
    assert timings["proxy_overhead_seconds"]["count"] == 7
    assert timings["upstream_ttfb_seconds"]["count"] == 7
    reasons = snapshot["components"]["toolschema"]["skip_reasons"]
    assert reasons == {"no_body": 1, "no_tools": 2, "not_json": 1, "too_large": 1}
    assert snapshot["components"]["toolschema"]["applied"] == 2

    async with client.get(server.make_url("/metrics")) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    assert "toolslim_requests_total" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("toolslim_component_runs_total{")]
    runs = {ln.split('outcome="')[1].split('"')[0]: float(ln.split()[-1]) for ln in lines}
    assert runs == {"applied": 2.0, "skipped": 5.0, "error": 0.0}


async def test_a_response_is_counted_before_any_request_its_client_sends_next(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    """Exchanges are counted together after the loop's turn they end in, never later than
    the next thing a client can ask: /stats right after a response already shows it."""
    server = await proxy()
    for count in range(1, 6):
        async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as reply:
            await reply.read()
        assert (await stats_of(client, server))["requests"]["total"] == count

    async def one(headers: dict[str, str]) -> None:
        async with client.post(
            server.make_url("/v1/messages"), data=dumps(ANTHROPIC), headers=headers
        ) as reply:
            await reply.read()

    await asyncio.gather(*(one({"X-Fake": "sse:2:1"} if i % 2 else {}) for i in range(20)))
    snapshot = await stats_of(client, server)
    assert snapshot["requests"]["total"] == 25
    assert snapshot["timings"]["proxy_overhead_seconds"]["count"] == 25
    assert snapshot["usage"]["responses_with_usage"] + snapshot["usage"]["usage_unavailable"] == 25


async def test_an_exchange_that_fails_to_be_counted_costs_the_rest_of_its_batch_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = Stats(["toolschema"])
    ledger = Ledger(stats, asyncio.get_running_loop(), set())
    route = route_request("/v1/messages", {}, settings_for("http://127.0.0.1:9"))
    report = Pipeline(["toolschema"]).skip(b"", "no_body")
    broken = dataclasses.replace(report, runs=(None,))  # a bug: a run that is not a run
    for path in ("/a", "/bad", "/c"):
        exchange = Exchange(route, "POST", path, 0.0, status=200)
        exchange.report = broken if path == "/bad" else report
        ledger.finish(exchange)
    assert stats.requests == 0  # the batch waits (Ledger.finish)...
    stats.snapshot()  # ...until the counts are read
    assert stats.requests == 2
    assert "toolslim failed to count POST /bad" in caplog.text


@pytest.fixture
def app_lines(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The request lines logged so far, with toolslim's loggers at info."""
    caplog.set_level(logging.INFO, logger="toolslim")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "toolslim.proxy.app"]


async def test_one_log_line_per_request_without_credentials_or_bodies(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    app_lines: Callable[[], list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await proxy()
    headers = {"x-api-key": KEY, "Authorization": f"Bearer {KEY}"}
    url = server.make_url(f"/v1/messages?key={KEY}")
    async with client.post(url, data=dumps(ANTHROPIC), headers=headers) as response:
        await response.read()
    await stats_of(client, server, total_is(1))
    [line] = app_lines()
    assert line.startswith("POST /v1/messages upstream=anthropic api=anthropic status=200")
    assert "toolschema=applied/-" in line and "overhead_ms=" in line
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY not in everything and "read README.md" not in everything


async def test_each_log_line_says_what_the_pipeline_did_to_its_own_request(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    app_lines: Callable[[], list[str]],
) -> None:
    """A session's memo hits share one summary; a request in between gets its own."""
    server = await proxy()
    url = server.make_url("/v1/messages")
    bodies = [dumps(ANTHROPIC), b"not json", dumps(ANTHROPIC), dumps(ANTHROPIC), b""]
    for count, body in enumerate(bodies, start=1):
        async with client.post(url, data=body) as response:
            await response.read()
        await stats_of(client, server, total_is(count))
    said = [line.split(" pipeline=")[1].split()[0] for line in app_lines()]
    applied = said[0]
    assert applied.startswith("toolschema=applied/-") and applied.endswith("B")
    assert said == [
        applied,
        "toolschema=skipped/not_json",
        applied,
        applied,
        "toolschema=skipped/no_body",
    ]


async def test_capture_is_off_by_default(proxy: Proxy) -> None:
    server = await proxy()
    assert server.app is not None and server.app[FORWARDING].capture is None
    assert server.app[FORWARDING].stats.requests == 0


async def test_capture_records_each_request_redacted_and_both_bodies(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    server = await proxy(capture_dir=str(tmp_path))
    body = dumps(ANTHROPIC)
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    url = raw_url(server, f"/v1beta/models/m:generateContent?key={KEY}&alt=sse")
    async with client.post(server.make_url("/v1/messages"), data=body, headers=headers) as r:
        await r.read()
    async with client.post(url, data=dumps(GEMINI)) as response:
        await response.read()
    await stats_of(client, server, total_is(2))  # a line is queued when its request is counted
    assert server.app is not None
    recorder = server.app[FORWARDING].capture
    assert recorder is not None
    recorder.close()  # flushes the writer thread
    files = list(tmp_path.glob("toolslim-capture-*.jsonl"))
    raw = b"".join(f.read_bytes() for f in files)
    assert KEY.encode() not in raw
    lines = [json.loads(line) for line in raw.splitlines()]
    assert [line["path"] for line in lines] == [
        "/v1/messages",
        "/v1beta/models/m:generateContent",
    ]
    first = lines[0]
    assert first["headers"]["x-api-key"] == "[redacted]"
    assert first["body"] == body.decode()
    assert json.loads(first["forwarded"])["tools"][0]["input_schema"] == COMPACT_SCHEMA
    assert "alt=sse" in lines[1]["query"] and KEY not in lines[1]["query"]


async def test_a_catalogue_seen_again_is_counted_with_the_same_tokens_saved(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    for count in (1, 2, 3):
        async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as r:
            await r.read()
        snapshot = await stats_of(client, server, total_is(count))
        saved = snapshot["components"]["toolschema"]["tokens_saved"]
        if count == 1:
            first = saved
            assert first > 0
        assert saved == first * count
    memo = snapshot["memo"]
    assert {k: memo[k] for k in ("hits", "misses", "size", "capacity")} == {
        "hits": 2,
        "misses": 1,
        "size": 1,
        "capacity": 64,
    }
    assert 0 < memo["bytes"] <= memo["max_bytes"]


async def test_a_flood_of_new_catalogues_is_tokenized_within_a_bound_and_the_rest_is_said(
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolslim.core import tokens
    from toolslim.observe.exchange import MAX_COUNTING

    gate = threading.Event()  # the token counter is stuck until the flood has been sent

    def slow_count(text: bytes | str) -> int:
        gate.wait(10)
        return len(text)

    monkeypatch.setattr(tokens, "count_tokens", slow_count)
    server = await proxy()
    flood = MAX_COUNTING + 6
    for index in range(flood):
        catalogue = [{"name": f"tool_{index}", "description": "d", "input_schema": SCHEMA}]
        body = dumps({**ANTHROPIC, "tools": catalogue})
        async with client.post(server.make_url("/v1/messages"), data=body) as response:
            await response.read()
    snapshot = await stats_of(client, server, lambda s: s["requests"]["total"] >= flood)
    requests = snapshot["requests"]
    # MAX_COUNTING catalogue token counts wait, and as many of the tool ledger's tool counts.
    assert (requests["tokens_pending"], requests["tokens_skipped"]) == (2 * MAX_COUNTING, 6)
    assert snapshot["components"]["toolschema"]["applied"] == flood  # bytes are all counted
    gate.set()
    snapshot = await stats_of(client, server, total_is(flood))
    assert snapshot["requests"]["tokens_pending"] == 0
    assert snapshot["components"]["toolschema"]["tokens_saved"] > 0


# --- only model calls owe a usage -----------------------------------------------------------


async def test_usage_unavailable_counts_only_model_calls_whose_answer_reported_none(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    no_usage = {"X-Fake": "status:200"}  # an answer with an error body: no usage in it
    # Probes, listings, token counts: their answers report no usage, and owe none.
    for method, path, body in [
        ("HEAD", "/", None),
        ("GET", "/", None),
        ("GET", "/v1/models", None),
        ("GET", "/v1beta/models", None),
        ("POST", "/v1/messages/count_tokens", dumps(ANTHROPIC)),
        ("POST", "/v1beta/models/m:countTokens", dumps(GEMINI)),
    ]:
        async with client.request(
            method, server.make_url(path), data=body, headers=no_usage
        ) as response:
            await response.read()
    # An upgrade the upstream does not take: answered 426, a connection and not a call.
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect(server.make_url("/v1/responses"))
    assert refused.value.status == 426
    snapshot = await stats_of(client, server, total_is(6))
    assert snapshot["usage"]["usage_unavailable"] == 0
    assert snapshot["usage"]["responses_with_usage"] == 0

    # Model calls answered without a usage: each is one.
    for path, status in [
        ("/v1/messages", 529),
        ("/v1/chat/completions", 500),
        ("/v1/responses", 429),
        ("/v1beta/models/m:streamGenerateContent?alt=sse", 503),
    ]:
        headers = {"X-Fake": f"status:{status}"}
        url = raw_url(server, path)
        async with client.post(url, data=dumps(ANTHROPIC), headers=headers) as response:
            assert response.status == status
    async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as response:
        await response.read()  # and one with its usage
    async with client.get(server.make_url("/v1/models")) as response:
        await response.read()  # a usage read from any answer is counted (the fake sends one)
    snapshot = await stats_of(client, server, total_is(12))
    assert snapshot["requests"]["total"] == 12
    assert snapshot["usage"]["usage_unavailable"] == 4
    assert snapshot["usage"]["responses_with_usage"] == 2


# --- the break-even is said for the catalogue each API's requests carry most ----------------


async def test_the_break_even_per_api_is_that_of_its_most_requested_catalogue_end_to_end(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    usual = dumps(ANTHROPIC)
    tools = [{"name": name, "input_schema": SCHEMA} for name in ("read_file", "write_file")]
    other = dumps({**ANTHROPIC, "tools": tools})
    calls = [("/v1/messages", usual)] * 3 + [("/v1/messages", other)]
    calls += [("/v1/messages/count_tokens", other)] * 3  # no model call: not counted for it
    for count, (path, body) in enumerate(calls, start=1):
        async with client.post(server.make_url(path), data=body) as response:
            await response.read()
        snapshot = await stats_of(client, server, total_is(count))
        if count == 1:
            first = snapshot["cache"]
    cache = snapshot["cache"]
    assert cache["catalogue_tokens"] != first["catalogue_tokens"]  # the latest is the other one
    start, end = tools_span(usual)
    [top, then] = cache["by_api"]["anthropic"]
    assert top == {
        "catalogue": digest(usual[start:end]).hex()[:12],
        "tools": 1,
        "bytes": end - start,
        "requests": 3,
        "catalogue_tokens": first["catalogue_tokens"],
        "tokens_saved_per_request": first["tokens_saved_per_request"],
        "warm_break_even_requests": first["warm_break_even_requests"],
    }
    assert (then["tools"], then["requests"]) == (2, 1)
    assert then["catalogue_tokens"] == cache["catalogue_tokens"]
    assert list(cache["by_api"]) == ["anthropic"]


async def test_finished_exchanges_are_counted_soon_without_anyone_reading_the_counts() -> None:
    stats = Stats(["toolschema"])
    ledger = Ledger(stats, asyncio.get_running_loop(), set())
    route = route_request("/v1/messages", {}, settings_for("http://127.0.0.1:9"))
    exchange = Exchange(route, "POST", "/v1/messages", 0.0, status=200)
    exchange.report = Pipeline(["toolschema"]).skip(b"", "no_body")
    ledger.finish(exchange)
    for _ in range(200):  # bounded: 10 s at most
        if stats.requests == 1:
            break
        await asyncio.sleep(0.05)
    assert stats.requests == 1
