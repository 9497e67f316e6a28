"""Hostile and broken clients (issue 16) against the real `toolslim serve` process: its log never
quotes a credential, a query or a body; at its descriptor limit slow clients cannot lock out a
prompt one; signals drain then cut; unfinished uploads hold no more memory than the budget."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from common import rss_mb
from proxy_harness import (
    ANTHROPIC,
    KEY,
    TIMEOUT,
    FakeUpstream,
    closed_port,
    dumps,
    raw_exchange,
    raw_post,
    wait_healthy,
)

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
        try:
            await wait_healthy(client, self.url, self.process)
        except aiohttp.ClientConnectionError:
            raise AssertionError(self.log()) from None

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
                answer = await raw_exchange(proxy.port, request)
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


async def test_unfinished_uploads_hold_no_more_memory_than_the_buffer_budget(
    serve: Callable[..., Serve], client: aiohttp.ClientSession
) -> None:
    proxy = serve("max_buffered_bytes: 16MiB\nmax_body_bytes: 8MiB\n")
    writers = []
    try:
        await proxy.ready(client)
        before = rss_mb(proxy.process.pid)
        piece = b"x" * (1 << 20)
        for _ in range(20):  # 20 x 7 MiB sent of 7.5 MiB bodies: 140 MiB if each were held
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(raw_post().replace(b"Content-Length: 0", b"Content-Length: 7864320"))
            writers.append(writer)
        for _ in range(7):
            for writer in writers:
                writer.write(piece)
            await asyncio.gather(*(writer.drain() for writer in writers))
        async with client.get(f"{proxy.url}/stats") as response:
            connections = (await response.json())["connections"]
        grown = rss_mb(proxy.process.pid) - before
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
