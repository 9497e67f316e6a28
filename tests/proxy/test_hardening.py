"""Hostile and broken clients (issue 16): one bad connection never slows, starves or exposes
anyone else. Real sockets on 127.0.0.1 only, bounded loops, no timing assertions: what is
checked is that other clients get their answers, the bytes and the log lines, and memory.

The app is served through its door in this process, as `toolslim serve` serves it; the real
process (its log, descriptors, signals, memory) is tested in tests/system/test_serve_hardening.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from proxy_harness import (
    ANTHROPIC,
    TIMEOUT,
    FakeUpstream,
    dumps,
    raw_exchange,
    raw_post,
    settings_for,
)
from toolslim.config.settings import Settings
from toolslim.core.pipeline import Pipeline
from toolslim.proxy.app import make_app
from toolslim.proxy.limits import CONNECTION_LIMITS
from toolslim.serve.shutdown import CUT_SECONDS

# --- serving through the door, in this process ---------------------------------------------


@contextlib.asynccontextmanager
async def served(settings: Settings) -> AsyncIterator[tuple[web.Application, int]]:
    """The app served through its door, as `toolslim serve` serves it: (app, port)."""
    app = make_app(settings)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=CUT_SECONDS)
    await runner.setup()
    door = app[CONNECTION_LIMITS]
    assert runner.server is not None
    await door.listen(runner.server, "127.0.0.1", 0)
    try:
        yield app, door.addresses[0][1]
    finally:
        door.close()
        await runner.cleanup()


def limits(base: str, **changes: Any) -> Settings:
    """Settings on `base` with these timeouts (client_headers=..., ...) and other fields."""
    settings = settings_for(base)
    timeouts = {k: changes.pop(k) for k in list(changes) if hasattr(settings.timeouts, k)}
    return dataclasses.replace(
        settings, timeouts=dataclasses.replace(settings.timeouts, **timeouts), **changes
    )


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before it closed the connection (bounded: 10 s)."""
    return await asyncio.wait_for(reader.read(), 10)


async def stats(app: web.Application, port: int) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as session,
        session.get(f"http://127.0.0.1:{port}/stats") as response,
    ):
        snapshot: dict[str, Any] = await response.json()
    return snapshot


async def until(check: Callable[[], Any], seconds: float = 10) -> None:
    """Wait (bounded) until `check()` is true."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


# --- slow and idle connections ---------------------------------------------------------


async def test_slow_clients_at_the_connection_limit_never_lock_out_a_prompt_one(
    upstream: FakeUpstream,
) -> None:
    async with served(limits(upstream.url, max_connections=8)) as (app, port):
        slow = []
        for _ in range(30):  # each sends part of its request headers, then nothing
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: t\r\n")
            slow.append((reader, writer))
        for _ in range(3):
            answer = await raw_exchange(port, raw_post(dumps(ANTHROPIC)))
            assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
        assert len(upstream.received) == 3
        door = app[CONNECTION_LIMITS]
        assert door.open <= 8
        snapshot = await stats(app, port)
        assert snapshot["connections"]["max"] == 8
        assert snapshot["connections"]["closed"]["evicted"] >= 30 - 8
        for _, writer in slow:
            writer.close()


async def test_a_keep_alive_client_between_requests_outlasts_a_flood_of_slow_connections(
    upstream: FakeUpstream,
) -> None:
    async with served(limits(upstream.url, max_connections=10)) as (app, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        request = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
        writer.write(request)
        assert (await asyncio.wait_for(reader.readuntil(b"}"), 10)).startswith(b"HTTP/1.1 200")
        slow = []
        for _ in range(100):  # all newer than the keep-alive one, which is idle meanwhile
            _, slow_writer = await asyncio.open_connection("127.0.0.1", port)
            slow_writer.write(b"POST /v1/messages HTTP/1.1\r\n")
            slow.append(slow_writer)
        await until(lambda: app[CONNECTION_LIMITS].stats.connections_closed["evicted"] >= 90)
        writer.write(request)  # the same connection, still open
        assert (await asyncio.wait_for(reader.readuntil(b"}"), 10)).startswith(b"HTTP/1.1 200")
        writer.close()
        for slow_writer in slow:
            slow_writer.close()


async def test_a_client_that_sends_no_complete_headers_in_time_is_closed(
    upstream: FakeUpstream,
) -> None:
    async with served(limits(upstream.url, client_headers=0.2)) as (app, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: t\r\n")  # never the blank line
        assert await closed_by_server(reader) == b""
        writer.close()
        snapshot = await stats(app, port)
        assert snapshot["connections"]["closed"]["headers_timeout"] == 1
        assert upstream.received == []


async def test_an_idle_keep_alive_connection_is_closed_after_client_keepalive(
    upstream: FakeUpstream,
) -> None:
    async with served(limits(upstream.url, client_keepalive=0.2)) as (app, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"}"), 10)
        assert head.startswith(b"HTTP/1.1 200")
        assert await closed_by_server(reader) == b""
        writer.close()
        snapshot = await stats(app, port)
        assert snapshot["connections"]["closed"]["keepalive_timeout"] == 1


@pytest.mark.parametrize("declared", [1000, 40_000], ids=["buffered", "streamed through"])
async def test_a_client_that_stops_sending_its_body_is_answered_408_and_closed(
    declared: int, upstream: FakeUpstream
) -> None:
    settings = limits(upstream.url, client_body_idle=0.2, max_body_bytes=20_000)
    async with served(settings) as (app, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = raw_post(close=False).replace(b"Content-Length: 0", b"Content-Length: %d" % declared)
        writer.write(head + b"x" * 500)  # then nothing
        answer = await closed_by_server(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        assert b"no byte of the request body for 0.2 s" in answer
        snapshot = await stats(app, port)
        assert snapshot["connections"]["closed"]["body_timeout"] == 1
        # Served on: the next client is answered.
        assert (await raw_exchange(port, raw_post(dumps(ANTHROPIC)))).startswith(b"HTTP/1.1 200")
        assert all(r.body != b"x" * declared for r in upstream.received)


async def test_at_the_limit_with_every_connection_busy_a_new_one_is_refused_with_503(
    upstream: FakeUpstream,
) -> None:
    async with served(limits(upstream.url, max_connections=2)) as (app, port):
        busy = []
        for _ in range(2):  # two requests whose upstream answers late
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw_post(dumps(ANTHROPIC), b"X-Fake: slow:3000\r\n"))
            busy.append((reader, writer))
        await until(lambda: len(upstream.received) == 2)
        answer = await raw_exchange(port, raw_post(dumps(ANTHROPIC)))
        assert answer.startswith(b"HTTP/1.1 503") and b"connection limit" in answer
        for reader, writer in busy:  # the busy ones were never cut
            assert (await closed_by_server(reader)).startswith(b"HTTP/1.1 200")
            writer.close()
        snapshot = await stats(app, port)
        assert snapshot["connections"]["closed"]["refused"] == 1


# --- memory and the event loop ---------------------------------------------------------------


async def test_a_body_that_does_not_fit_the_buffer_budget_streams_through_untouched(
    upstream: FakeUpstream,
) -> None:
    big = dumps(dict(ANTHROPIC, messages=[{"role": "user", "content": "x" * 50_000}]))
    async with served(limits(upstream.url, max_buffered_bytes=20_000)) as (app, port):
        small = await raw_exchange(port, raw_post(dumps(ANTHROPIC)))
        large = await raw_exchange(port, raw_post(big))
        assert small.startswith(b"HTTP/1.1 200") and large.startswith(b"HTTP/1.1 200")
        compacted, untouched = upstream.received
        assert compacted.body == Pipeline(["toolschema"]).run(dumps(ANTHROPIC)).body
        assert untouched.body == big  # byte for byte
        snapshot = await stats(app, port)
        assert snapshot["components"]["toolschema"]["skip_reasons"]["busy"] == 1
        assert snapshot["connections"]["buffered_bytes"] == 0  # given back


async def test_large_and_compressed_bodies_are_compacted_off_the_loop_exactly(
    upstream: FakeUpstream,
) -> None:
    large = dumps(dict(ANTHROPIC, messages=[{"role": "user", "content": "y" * 1_500_000}]))
    members = b"".join(gzip.compress(b" ") for _ in range(20_000)) + gzip.compress(large)
    async with served(settings_for(upstream.url)) as (_, port):
        for body, extra in ((large, b""), (members, b"Content-Encoding: gzip\r\n")):
            answer = await raw_exchange(port, raw_post(body, extra))
            assert answer.startswith(b"HTTP/1.1 200")
        pipeline = Pipeline(["toolschema"])
        expected = [pipeline.run(large).body, pipeline.run(b" " * 20_000 + large).body]
        assert [r.body for r in upstream.received] == expected
        assert "Content-Encoding" not in upstream.received[1].headers


async def test_while_heavy_bodies_are_decoded_every_other_client_is_answered(
    upstream: FakeUpstream,
) -> None:
    members = b"".join(gzip.compress(b" ") for _ in range(100_000)) + gzip.compress(b"{}")
    async with served(settings_for(upstream.url)) as (_, port):
        coded = raw_post(members, b"Content-Encoding: gzip\r\n")
        heavy = [asyncio.ensure_future(raw_exchange(port, coded)) for _ in range(3)]
        answered = 0
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            while not all(task.done() for task in heavy):
                async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                    assert response.status == 200
                    answered += 1
        assert answered > 0
        assert all(answer.startswith(b"HTTP/1.1 200") for answer in await asyncio.gather(*heavy))


async def test_an_answer_that_inflates_without_end_is_relayed_exactly_and_its_usage_unread(
    aiohttp_server: Any,
) -> None:
    bomb = gzip.compress(b" " * (64 << 20), compresslevel=9)  # 64 MiB of spaces, ~64 KB

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        return web.Response(body=bomb, headers=headers)

    bomber = web.Application()
    bomber.router.add_route("*", "/{tail:.*}", answer)
    server = await aiohttp_server(bomber)
    async with served(settings_for(f"http://127.0.0.1:{server.port}")) as (app, port):
        async with aiohttp.ClientSession(timeout=TIMEOUT, auto_decompress=False) as session:
            for _ in range(3):
                url = f"http://127.0.0.1:{port}/v1/messages"
                async with session.post(url, data=dumps(ANTHROPIC)) as response:
                    assert await response.read() == bomb
        await until(lambda: app[CONNECTION_LIMITS].stats.usage_unavailable == 3)
        assert app[CONNECTION_LIMITS].stats.responses_with_usage == 0


async def test_a_body_over_max_catalogue_bytes_is_forwarded_untouched_as_too_large(
    upstream: FakeUpstream,
) -> None:
    body = dumps(ANTHROPIC)
    async with served(limits(upstream.url, max_catalogue_bytes=len(body) - 1)) as (app, port):
        assert (await raw_exchange(port, raw_post(body))).startswith(b"HTTP/1.1 200")
        [received] = upstream.received
        assert received.body == body
        snapshot = await stats(app, port)
        assert snapshot["components"]["toolschema"]["skip_reasons"] == {"too_large": 1}


# --- capture ---------------------------------------------------------------------------------


async def test_capture_errors_and_drops_reach_stats_and_metrics(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    folder = tmp_path / "captures"
    settings = dataclasses.replace(settings_for(upstream.url), capture_dir=str(folder))
    async with served(settings) as (app, port):
        folder.rmdir()  # made at start-up, empty: the writer cannot open its file now
        assert (await raw_exchange(port, raw_post(dumps(ANTHROPIC)))).startswith(b"HTTP/1.1 200")
        deadline = time.monotonic() + 10
        while (capture := (await stats(app, port))["capture"])["errors"] < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert capture == {"enabled": True, "written": 0, "dropped": 0, "errors": 1}
        async with (
            aiohttp.ClientSession(timeout=TIMEOUT) as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
        assert re.search(r"^toolslim_capture_errors_total 1\.0$", text, re.MULTILINE)
        assert re.search(r"^toolslim_capture_dropped_total 0\.0$", text, re.MULTILINE)
