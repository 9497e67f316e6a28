"""Hostile and broken clients (issue 16): one bad connection never slows, starves or exposes
anyone else. Real sockets on 127.0.0.1 only, bounded loops, no timing assertions: what is
checked is that other clients get their answers, the bytes and the log lines, and memory.

In-process tests serve the app through its door as `toolslim serve` does; the log, descriptor
and signal tests run the real `toolslim serve` process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from proxy_harness import (
    ANTHROPIC,
    KEY,
    TIMEOUT,
    FakeUpstream,
    closed_port,
    dumps,
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


async def exchange(port: int, request: bytes) -> bytes:
    """The whole answer (until the server closes) to these exact request bytes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before it closed the connection (bounded: 10 s)."""
    return await asyncio.wait_for(reader.read(), 10)


def post(body: bytes = b"", extra: bytes = b"", close: bool = True) -> bytes:
    head = b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nx-api-key: " + KEY.encode() + b"\r\n"
    tail = b"Connection: close\r\n" if close else b""
    return head + extra + b"Content-Length: %d\r\n" % len(body) + tail + b"\r\n" + body


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
            answer = await exchange(port, post(dumps(ANTHROPIC)))
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
        head = post(close=False).replace(b"Content-Length: 0", b"Content-Length: %d" % declared)
        writer.write(head + b"x" * 500)  # then nothing
        answer = await closed_by_server(reader)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        assert b"no byte of the request body for 0.2 s" in answer
        snapshot = await stats(app, port)
        assert snapshot["connections"]["closed"]["body_timeout"] == 1
        # Served on: the next client is answered.
        assert (await exchange(port, post(dumps(ANTHROPIC)))).startswith(b"HTTP/1.1 200")
        assert all(r.body != b"x" * declared for r in upstream.received)


async def test_at_the_limit_with_every_connection_busy_a_new_one_is_refused_with_503(
    upstream: FakeUpstream,
) -> None:
    async with served(limits(upstream.url, max_connections=2)) as (app, port):
        busy = []
        for _ in range(2):  # two requests whose upstream answers late
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(post(dumps(ANTHROPIC), b"X-Fake: slow:3000\r\n"))
            busy.append((reader, writer))
        await until(lambda: len(upstream.received) == 2)
        answer = await exchange(port, post(dumps(ANTHROPIC)))
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
        small = await exchange(port, post(dumps(ANTHROPIC)))
        large = await exchange(port, post(big))
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
            answer = await exchange(port, post(body, extra))
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
        heavy = [
            asyncio.ensure_future(exchange(port, post(members, b"Content-Encoding: gzip\r\n")))
            for _ in range(3)
        ]
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
        assert (await exchange(port, post(body))).startswith(b"HTTP/1.1 200")
        [received] = upstream.received
        assert received.body == body
        snapshot = await stats(app, port)
        assert snapshot["components"]["toolschema"]["skip_reasons"] == {"too_large": 1}


# --- the real process: the log, the descriptors, the signals -------------------------------


class Serve:
    """`python -m toolslim serve` with a config file, its stderr in a file."""

    def __init__(
        self, tmp_path: Path, upstream: FakeUpstream, config: str = "", files: int | None = None
    ) -> None:
        self.port = closed_port()
        path = tmp_path / "toolslim.yaml"
        path.write_text(
            f"listen: {{host: 127.0.0.1, port: {self.port}}}\n"
            f"upstreams: {{anthropic: '{upstream.url}/a', openai: '{upstream.url}/o', "
            f"gemini: '{upstream.url}/g'}}\n" + config
        )
        self.err_path = tmp_path / "stderr.txt"

        def lower_files() -> None:
            if files is not None:
                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (files, hard))

        with open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "toolslim", "serve", "--config", str(path)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                preexec_fn=lower_files,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.url = f"http://127.0.0.1:{self.port}"

    async def ready(self, client: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                async with client.get(f"{self.url}/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                assert self.process.poll() is None, self.log()
                assert time.monotonic() < deadline, self.log()
                await asyncio.sleep(0.05)

    def log(self) -> str:
        return self.err_path.read_text(errors="replace")

    async def exited(self, seconds: float) -> int:
        return await asyncio.wait_for(asyncio.to_thread(self.process.wait), seconds)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


@pytest.fixture
def serve(tmp_path: Path, upstream: FakeUpstream) -> AsyncIterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def start(config: str = "", files: int | None = None) -> Serve:
        process = Serve(tmp_path, upstream, config, files)
        started.append(process)
        return process

    yield start  # type: ignore[misc]
    for process in started:
        process.kill()


SECRET = "sk-ant-SECRET-0123456789"
QUERY_SECRET = "AIzaSECRETQUERY"

MALFORMED = [
    b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nx-api-key: " + SECRET.encode() + b"\x00\r\n\r\n",
    b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nauthorization: Bearer "
    + SECRET.encode()
    + b"\x7f\r\n\r\n",
    b"GET /v1beta/models?key=" + QUERY_SECRET.encode() + b" HTT/1.1\r\nHost: t\r\n\r\n",
    b"GET /v1beta/models?key=" + QUERY_SECRET.encode() + b" HTTP/1.1\r\nHost: t\r\n"
    b"x-goog-api-key: " + SECRET.encode() + b"\x01\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + SECRET.encode() + b"\r\n\r\n",
]


async def test_the_log_never_holds_a_header_value_a_query_or_a_body_and_malformed_is_one_line(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    proxy = serve("log_level: debug\n")
    try:
        await proxy.ready(client)
        for _ in range(20):
            for request in MALFORMED:
                answer = await exchange(proxy.port, request)
                assert answer.startswith(b"HTTP/1.") and b" 400 " in answer[:16], answer[:60]
        # Valid requests carry the same secrets in headers, the query and the body.
        body = dumps(dict(ANTHROPIC, metadata={"user_id": SECRET}))
        for target in ("/v1/messages?key=" + QUERY_SECRET, "/v1beta/models?key=" + QUERY_SECRET):
            headers = {"x-api-key": SECRET, "Authorization": f"Bearer {SECRET}"}
            async with client.post(proxy.url + target, data=body, headers=headers) as response:
                assert response.status == 200
    finally:
        proxy.process.send_signal(signal.SIGTERM)
        assert await proxy.exited(15) == 0
    log = proxy.log()
    for secret in (SECRET, QUERY_SECRET, "key=", "metadata", "Bearer"):
        assert secret not in log, secret
    malformed = [line for line in log.splitlines() if "malformed request" in line]
    assert 1 <= len(malformed) <= 5  # 100 malformed requests in about a second or two
    assert all(len(line) < 200 for line in malformed)
    assert "Traceback" not in log


async def test_at_the_descriptor_limit_slow_clients_cannot_lock_out_a_prompt_one(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    files = 200  # max_connections derives to (200 - 64) // 2 = 68
    proxy = serve(files=files)
    writers = []
    try:
        await proxy.ready(client)
        for _ in range(250):  # more connections than the proxy has descriptors
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: t\r\n")
            writers.append(writer)
        for _ in range(5):
            async with aiohttp.ClientSession(timeout=TIMEOUT) as fresh:
                data = dumps(ANTHROPIC)
                async with fresh.post(f"{proxy.url}/v1/messages", data=data) as response:
                    assert response.status == 200
        async with client.get(f"{proxy.url}/stats") as response:
            connections = (await response.json())["connections"]
        assert connections["max"] == (files - 64) // 2
        assert connections["closed"]["evicted"] >= 250 - connections["max"]
    finally:
        for writer in writers:
            writer.close()
        proxy.kill()
    assert "accept" not in proxy.log()


async def test_sigterm_turns_readyz_503_at_once_serves_for_shutdown_delay_then_cuts_at_grace(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    proxy = serve("shutdown_delay: 1\nshutdown_grace: 1\n")
    await proxy.ready(client)
    headers = {"X-Fake": "hang:60", "x-api-key": KEY}
    async with client.post(f"{proxy.url}/v1/messages", data=dumps(ANTHROPIC), headers=headers) as r:
        assert await r.content.readline() == b"event: ping\n"
        proxy.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        async with aiohttp.ClientSession(timeout=TIMEOUT) as fresh:  # the listener is open
            async with fresh.get(f"{proxy.url}/readyz") as ready:
                assert ready.status == 503
            async with fresh.get(f"{proxy.url}/healthz") as alive:
                assert alive.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await r.read()  # the hanging stream is cut at the grace
    assert await proxy.exited(5) == 0  # delay 1 + grace 1 + at most 1 for the cleanup


async def test_a_second_signal_exits_at_once_with_status_1(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    proxy = serve("shutdown_grace: 60\n")
    await proxy.ready(client)
    headers = {"X-Fake": "hang:60", "x-api-key": KEY}
    async with client.post(f"{proxy.url}/v1/messages", data=dumps(ANTHROPIC), headers=headers) as r:
        assert await r.content.readline() == b"event: ping\n"
        proxy.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        proxy.process.send_signal(signal.SIGINT)
        assert await proxy.exited(10) == 1  # long before the 60 s grace
    assert re.search(r"SIGINT again: exiting at once", proxy.log())


async def test_capture_errors_and_drops_reach_stats_and_metrics(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    folder = tmp_path / "captures"
    settings = dataclasses.replace(settings_for(upstream.url), capture_dir=str(folder))
    async with served(settings) as (app, port):
        folder.rmdir()  # made at start-up, empty: the writer cannot open its file now
        assert (await exchange(port, post(dumps(ANTHROPIC)))).startswith(b"HTTP/1.1 200")
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


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_unfinished_uploads_hold_no_more_memory_than_the_buffer_budget(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    proxy = serve("max_buffered_bytes: 16MiB\nmax_body_bytes: 8MiB\n")
    writers = []
    try:
        await proxy.ready(client)
        before = rss_mib(proxy.process.pid)
        piece = b"x" * (1 << 20)
        for _ in range(20):  # 20 x 7 MiB sent of 7.5 MiB bodies: 140 MiB if each were held
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(post().replace(b"Content-Length: 0", b"Content-Length: 7864320"))
            writers.append(writer)
        for _ in range(7):
            for writer in writers:
                writer.write(piece)
            await asyncio.gather(*(writer.drain() for writer in writers))
        async with client.get(f"{proxy.url}/stats") as response:
            connections = (await response.json())["connections"]
        grown = rss_mib(proxy.process.pid) - before
    finally:
        for writer in writers:
            writer.close()
        proxy.kill()
    assert connections["buffered_bytes"] <= 16 << 20
    assert grown < 16 + 40, grown


async def test_failed_accepts_are_logged_at_most_once_a_second_with_a_count(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    # A limit set above what the descriptors allow: accept() itself fails (EMFILE).
    proxy = serve("max_connections: 1000\n", files=80)
    writers = []
    try:
        await proxy.ready(client)
        for _ in range(150):
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writers.append(writer)
        await asyncio.sleep(2.5)  # asyncio retries the accepts every second meanwhile
    finally:
        for writer in writers:
            writer.close()
        proxy.kill()
    lines = [line for line in proxy.log().splitlines() if "cannot accept" in line]
    assert 1 <= len(lines) <= 5, lines
    assert "[Errno 24] Too many open files" in lines[0]
    assert any("more like it" in line for line in lines[1:]) or len(lines) == 1
