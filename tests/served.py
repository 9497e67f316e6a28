"""`toolslim serve --workers N` as a real process (a gunicorn master and its workers) on a free
port, and the batch of requests of every kind the workers' and Prometheus' tests send it."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from proxy_harness import (
    ANTHROPIC,
    CANONICAL_TOOLS,
    KEY,
    OPENAI_CHAT,
    TIMEOUT,
    FakeUpstream,
    closed_port,
    dumps,
)

WORKERS = 2


# One request of each kind; the batch repeats them. (method, path, body, headers)
KINDS: list[tuple[str, str, bytes | None, dict[str, str]]] = [
    ("POST", "/v1/messages", dumps(ANTHROPIC), {"x-api-key": KEY}),
    ("POST", "/v1/messages", dumps({**ANTHROPIC, "stream": True}), {"X-Fake": "sse:3:0"}),
    ("POST", "/v1/chat/completions", dumps(OPENAI_CHAT), {}),
    ("POST", "/v1/messages", b'{"tools": ' + CANONICAL_TOOLS + b', "messages": []}', {}),
    ("POST", "/v1/messages", b"this is not json", {}),
    ("GET", "/v1/models", None, {"x-api-key": KEY}),
    ("POST", "/v1/messages", dumps(ANTHROPIC), {"X-Fake": "status:529"}),
]


ROUNDS = 43  # 301 requests


@dataclass
class Served:
    """A `toolslim serve` process (the gunicorn master) and where it listens."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def fresh_client() -> aiohttp.ClientSession:
    """A client that opens a connection per request, so that any worker may accept each."""
    connector = aiohttp.TCPConnector(force_close=True)
    return aiohttp.ClientSession(timeout=TIMEOUT, connector=connector, auto_decompress=False)


async def get_json(client: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with client.get(url) as response:
        assert response.status == 200, await response.text()
        body: dict[str, Any] = await response.json()
        return body


async def settled(
    client: aiohttp.ClientSession, served: Served, until: Any, seconds: float = 10
) -> dict[str, Any]:
    """/stats once `until` holds for it, asked again and again (any worker may answer)."""
    deadline = time.monotonic() + seconds
    while True:
        stats = await get_json(client, f"{served.url}/stats")
        if until(stats):
            return stats
        assert time.monotonic() < deadline, stats
        await asyncio.sleep(0.05)


def workers_up(count: int) -> Any:
    return lambda stats: stats["workers"]["count"] == count


async def serve(
    upstream: FakeUpstream,
    folder: Path,
    workers: int = WORKERS,
    *flags: str,
    yaml: str = "shutdown_grace: 10\n",
) -> Served:
    """Start `toolslim serve --workers N [flags]` on a free port, with the YAML lines
    `yaml`; return once every worker answers."""
    port = closed_port()
    config = folder / "toolslim.yaml"
    base = upstream.url
    config.write_text(
        f"listen: {{host: 127.0.0.1, port: {port}}}\n"
        f"upstreams: {{anthropic: '{base}/a', openai: '{base}/o', gemini: '{base}/g'}}\n"
        "log_level: warning\n" + yaml
    )
    temporary = folder / "tmp"  # where the master makes the workers' shared directory
    temporary.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSLIM_")}
    env["TMPDIR"] = str(temporary)
    log = folder / "serve.log"
    command = [sys.executable, "-m", "toolslim", "serve", "--config", str(config)]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--workers", str(workers), *flags],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
    served = Served(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 30
    async with fresh_client() as client:
        while True:
            assert process.poll() is None, served.text()
            try:
                if workers_up(workers)(await get_json(client, f"{served.url}/stats")):
                    return served
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, served.text()
            await asyncio.sleep(0.1)


def stop(served: Served) -> int:
    """SIGTERM the master; its exit status (killed after 30 s)."""
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGTERM)
    try:
        return served.process.wait(30)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait(5)
        raise


async def send_batch(client: aiohttp.ClientSession, *bases: str) -> int:
    """The batch, each request to every base, 16 at a time; the request body bytes sent."""
    gate = asyncio.Semaphore(16)
    sent = 0

    async def one(method: str, path: str, body: bytes | None, headers: dict[str, str]) -> None:
        nonlocal sent
        async with gate:
            for base in bases:
                async with client.request(method, base + path, data=body, headers=headers) as r:
                    await r.read()
                sent += len(body or b"")

    await asyncio.gather(*(one(*kind) for kind in itertools.chain(*[KINDS] * ROUNDS)))
    return sent // len(bases)
