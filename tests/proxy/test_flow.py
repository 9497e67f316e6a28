"""flow: one HTTP request's phases, and every way a flow ends counted and named truly (issue 23):
a 408 for a stalled body and an upload its client gave up are requests, and a stream cut when
the shutdown grace ends is the shutdown's doing, not the client's. Real sockets on 127.0.0.1,
bounded waits, no timing assertions."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy_harness import ANTHROPIC, KEY, TIMEOUT, FakeUpstream, dumps, settings_for, stats_of
from toolslim.config.settings import Settings
from toolslim.proxy.app import FORWARDING, grace_over, make_app
from toolslim.proxy.limits import CONNECTION_LIMITS
from toolslim.serve.shutdown import CUT_SECONDS

LEDGER = "toolslim.proxy.app"  # the logger of each request's line


def with_body_idle(base: str, seconds: float) -> Settings:
    settings = settings_for(base)
    timeouts = dataclasses.replace(settings.timeouts, client_body_idle=seconds)
    return dataclasses.replace(settings, timeouts=timeouts)


def head(declared: int) -> bytes:
    return (
        b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nx-api-key: " + KEY.encode() + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % declared
    )


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LEDGER and " api=" in r.getMessage()
    ]


async def test_a_408_for_a_stalled_body_is_a_request_counted_by_status_and_logged(
    aiohttp_server: Any,
    upstream: FakeUpstream,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LEDGER)
    server: TestServer = await aiohttp_server(make_app(with_body_idle(upstream.url, 0.2)))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(head(1000) + b"x" * 100)  # then nothing
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408")
    snapshot = await stats_of(client, server, lambda s: s["requests"]["total"] == 1)
    assert snapshot["requests"]["total"] == 1
    assert snapshot["requests"]["by_status"]["4xx"] == 1
    assert snapshot["connections"]["closed"]["body_timeout"] == 1
    assert snapshot["components"]["toolschema"]["skip_reasons"]["no_body"] == 1
    assert any("status=408" in line for line in lines(caplog))
    assert upstream.received == []  # a body never read whole never went upstream


async def test_an_upload_its_client_gave_up_while_held_is_a_request_and_a_disconnect(
    upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LEDGER)
    app = make_app(settings_for(upstream.url))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=CUT_SECONDS)
    await runner.setup()
    connections = app[CONNECTION_LIMITS]  # served as `toolslim serve` serves it: gauged
    assert runner.server is not None
    await connections.listen(runner.server, "127.0.0.1", 0)
    try:
        port = connections.addresses[0][1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head(100_000) + b"x" * 5000)
        await until(lambda: connections.gauges()["buffered_bytes"] == 5000)
        writer.close()  # gone mid-upload, its bytes held
        await writer.wait_closed()
        stats = app[FORWARDING].stats
        await until(lambda: stats.requests == 1)
        snapshot = stats.snapshot()
    finally:
        connections.close()
        await runner.cleanup()
    assert snapshot["requests"]["total"] == 1
    assert snapshot["requests"]["by_status"]["4xx"] == 1  # 499: the client closed the request
    assert snapshot["requests"]["client_disconnects"] == 1
    assert snapshot["connections"]["buffered_bytes"] == 0  # given back
    assert any("status=499" in line and "client_disconnect" in line for line in lines(caplog))


async def until(check: Callable[[], bool]) -> None:
    """Bounded: 10 s at most."""
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_a_stream_cut_when_the_grace_ends_is_counted_and_logged_as_shutdown(
    aiohttp_server: Any,
    upstream: FakeUpstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LEDGER)
    app = make_app(settings_for(upstream.url))
    # aiohttp cuts the handlers still running this long after cleanup begins.
    server: TestServer = await aiohttp_server(app, shutdown_timeout=0.1)
    stats = app[FORWARDING].stats
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        response = await session.post(
            server.make_url("/v1/messages"),
            data=dumps(ANTHROPIC),
            headers={"x-api-key": KEY, "X-Fake": "hang:30"},
        )
        assert response.status == 200
        assert (await response.content.readline()).startswith(b"event: ping")
        grace_over(app)  # what the process's shutdown calls as the grace ends
        await server.close()
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    assert stats.connections_closed["shutdown"] == 1
    assert stats.client_disconnects == 0
    assert stats.requests == 1
    assert any(line.endswith(" shutdown") for line in lines(caplog))
    assert not any("client_disconnect" in line for line in lines(caplog))


async def test_a_request_s_headers_are_forwarded_from_a_copy_never_changed_in_place(
    proxy: Any, upstream: FakeUpstream, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    sent = {"x-api-key": KEY, "Content-Encoding": "gzip", "Content-Type": "application/json"}
    before = dict(sent)
    async with client.post(
        server.make_url("/v1/messages"), data=gzip.compress(dumps(ANTHROPIC)), headers=sent
    ) as response:
        assert response.status == 200
    assert sent == before
    (received,) = upstream.received
    assert "Content-Encoding" not in received.headers  # compacted: forwarded decoded
