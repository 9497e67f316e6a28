"""limits with workers: `toolslim serve --workers 2` holds clients to the same limits as one
process. A client silent in its request headers is closed at `timeouts.client_headers` by
whichever worker took it, every open connection is counted in `/stats` `connections`, and
the host's connection limit is `max_connections` shared by the workers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from proxy_harness import FakeUpstream
from served import WORKERS, fresh_client, serve, settled, stop

HEADERS_SECONDS = 1
SILENT = 6  # connections that send part of their request headers, then nothing


async def test_every_worker_counts_its_connections_and_closes_silent_partial_heads(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    served = await serve(
        upstream,
        tmp_path,
        yaml=f"timeouts: {{client_headers: {HEADERS_SECONDS}}}\nmax_connections: 100\n",
    )
    port = int(served.url.rsplit(":", 1)[1])
    streams = []
    try:
        for _ in range(SILENT):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: t")
            await writer.drain()
            streams.append((reader, writer))
        async with fresh_client() as client:
            # The silent ones, and the /stats request asking.
            counted = await settled(client, served, lambda s: s["connections"]["open"] >= SILENT)
            assert counted["connections"]["max"] == 100 // WORKERS * WORKERS
            started = time.monotonic()
            for reader, _ in streams:  # closed by the worker that took it, without an answer
                assert await asyncio.wait_for(reader.read(), 30) == b""
            closed_after = time.monotonic() - started
            stats = await settled(
                client, served, lambda s: s["connections"]["closed"]["headers_timeout"] == SILENT
            )
            assert stats["connections"]["open"] <= 2  # the asking one (and its predecessor's)
    finally:
        for _, writer in streams:
            writer.close()
        stop(served)
    assert closed_after < HEADERS_SECONDS + 10  # generous: the machine may be shared
