"""What the HTTP request path is made of: the `Forwarder` (everything a request's `flow.Flow`
needs, made once the app runs), the answers it builds, and the request body written upstream
as the pieces it is made of.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from aiohttp import ClientSession, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_writer import StreamWriter
from aiohttp.payload import Payload

from toolslim.config.settings import Settings
from toolslim.core.envelope import Piece, joined
from toolslim.core.pipeline import Pipeline
from toolslim.observe.exchange import Ledger
from toolslim.observe.stats import Stats
from toolslim.proxy.budget import Budget, BufferBudget
from toolslim.proxy.limits import MAX_BUFFERED_BYTES, ClientLimits
from toolslim.proxy.offload import Offload
from toolslim.proxy.transform import Transform
from toolslim.proxy.watchdog import Watchdogs
from toolslim.wire.errors import error_body, refusal_body
from toolslim.wire.routing import Route

# A body up to this size goes upstream in one write behind its headers: copying it costs
# less than a send of the headers on their own (and a packet for the upstream to wake for).
ONE_WRITE: Final = 128 * 1024
# What the client library's writer sends before it waits for the socket to drain (its own
# `write` limit).
DRAIN_AFTER: Final = 64 * 1024
# A larger one goes in slices of this, each written once the one before has left: the
# transport copies what the socket does not take at once, and one copy of a whole huge body
# would hold the loop (bench/abuse_bench.py).
WRITE_SLICE: Final = 1024 * 1024

# Decoded bytes the usage observer inflates from a compressed response before it gives up
# (usage is then unavailable): it decodes on the loop, so this bounds what a small answer
# that inflates without end costs the other clients. Real answers are far smaller: even a
# long streamed one is a few MB of events.
OBSERVED_DECODED: Final = 4 * 1024 * 1024

Body = Payload | AsyncIterator[bytes] | None


@dataclass(slots=True)
class Forwarder:
    """Everything the request path needs, made once the app runs (see app._serving)."""

    settings: Settings
    pipeline: Pipeline
    stats: Stats
    session: ClientSession
    watchdogs: Watchdogs
    ledger: Ledger
    transform: Transform
    limits: ClientLimits = field(default_factory=ClientLimits)
    budget: Budget = field(default_factory=lambda: BufferBudget(MAX_BUFFERED_BYTES))
    offload: Offload | None = None  # None observes every answer on the loop
    # Set when the shutdown grace is over (app.grace_over): the requests still in flight are
    # cut next, by the shutdown, not by their clients.
    grace_over: bool = False


def error_response(route: Route, status: int, message: str) -> web.Response:
    """An error in the shape of the API the client called."""
    body = error_body(route, status, message)
    return web.Response(status=status, body=body, content_type="application/json")


def refusal(status: int, message: str) -> web.Response:
    body = refusal_body(message)
    return web.Response(status=status, body=body, content_type="application/json")


def abort(request: web.Request) -> None:
    if (transport := request.transport) is not None:
        transport.close()


class Pieces(Payload):
    """A request body written as the pieces it is made of; a small one joined once with its
    headers into one write (`_behind_headers`), a large one after them without a copy.

    Written as bytes, a body would be copied twice on the way out: once to join the pieces,
    once to put the headers in front of it (the client library joins them before Python
    3.12.9, which has no scatter-gather write). A sized payload also gets its Content-Length
    from the library, at any size.
    """

    def __init__(self, pieces: tuple[Piece, ...]) -> None:
        super().__init__(pieces)
        self._pieces = pieces
        self.length: int = sum(map(len, pieces))

    @property
    def size(self) -> int:
        return self.length

    @property
    def autoclose(self) -> bool:
        return True  # in memory: nothing to close

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return joined(self._pieces).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        remaining = self.length if content_length is None else content_length
        if self.length <= ONE_WRITE:
            if remaining == self.length and _behind_headers(writer, self._pieces, self.length):
                if writer.buffer_size > DRAIN_AFTER:
                    writer.buffer_size = 0
                    await writer.drain()
                return
            # The writer puts the headers it holds in front of this chunk: one send.
            await writer.write(joined(self._pieces)[:remaining])
            return
        writer.send_headers()
        for piece in self._pieces:
            end = min(len(piece), remaining)
            view = memoryview(piece)
            for at in range(0, end, WRITE_SLICE):
                await writer.write(view[at : min(at + WRITE_SLICE, end)])
            remaining -= len(piece)


def _behind_headers(writer: AbstractStreamWriter, pieces: tuple[Piece, ...], size: int) -> bool:
    """Whether the pieces (`size` bytes) went out in one send with the headers the writer
    holds, joined once: `write` would join them with the headers after the pieces were joined,
    one more copy of the whole body. Only for aiohttp's own writer in the state its `write`
    would put headers in front (held, unsent, no compression, chunking or per-chunk callbacks,
    room in its declared length); in any other case the caller writes the joined body, as
    before."""
    if len(pieces) < 2 or type(writer) is not StreamWriter:
        return False
    held = getattr(writer, "_headers_buf", None)
    write_lines = getattr(writer, "_writelines", None)
    if (
        not isinstance(held, bytes)
        or write_lines is None
        or getattr(writer, "_headers_written", True)
        or getattr(writer, "_compress", True) is not None
        or getattr(writer, "_on_chunk_sent", True) is not None
        or getattr(writer, "on_body_write", True) is not None
        or writer.chunked
        or (writer.length is not None and writer.length < size)
    ):
        return False
    writer._headers_written = True
    writer._headers_buf = None
    write_lines((held, *pieces))
    if writer.length is not None:
        writer.length -= size
    return True
