"""The HTTP request path as named phases: read the body, transform it, send it upstream, relay
the response back byte for byte while a copy is observed for usage.

Each phase is one method of `Forwarder`; the record of what happened is an `Exchange`, counted
once by the `Ledger` when the handler ends, whatever way it ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

from aiohttp import ClientError, ClientResponse, ClientSession, StreamReader, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload
from multidict import CIMultiDict
from yarl import URL

from toolslim.config.settings import Settings
from toolslim.core.entry import SkipReason
from toolslim.core.envelope import Piece, joined
from toolslim.core.pipeline import Pipeline
from toolslim.observe import capture
from toolslim.observe.exchange import Exchange, Ledger, record
from toolslim.observe.health import ANSWER_HEAD
from toolslim.observe.stats import Stats
from toolslim.proxy.budget import Budget, BufferBudget
from toolslim.proxy.limits import MAX_BUFFERED_BYTES, ClientLimits
from toolslim.proxy.offload import Offload, transformed
from toolslim.proxy.transform import BUSY, MAX_CATALOGUE_BYTES, Transformed
from toolslim.proxy.watchdog import Patrol, Watchdog
from toolslim.wire.errors import HeadersTimeout, error_body, refusal_body, translate
from toolslim.wire.routing import (
    HOP_BY_HOP,
    REQUEST_REBUILT,
    Route,
    drop_hop_by_hop,
    route_request,
    signed,
)
from toolslim.wire.sse import UsageObserver

log = logging.getLogger("toolslim.proxy.forward")

# A body up to this size goes upstream in one write behind its headers: copying it costs
# less than a send of the headers on their own (and a packet for the upstream to wake for).
ONE_WRITE: Final = 128 * 1024
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


class ClientStalled(Exception):
    """The client sent no byte of its body for `limits.body_idle` seconds."""


@dataclass(slots=True)
class Intake:
    """What one request's body holds while it is read and sent: its bytes in the buffer
    budget, and whether its client stalled while the body streamed through."""

    held: int = 0
    stalled: bool = False


@dataclass(frozen=True, slots=True)
class Forwarder:
    """Everything the request path needs, made once the app runs (see app._serving)."""

    settings: Settings
    pipeline: Pipeline
    stats: Stats
    session: ClientSession
    patrol: Patrol
    ledger: Ledger
    recorder: capture.Recorder | None  # None records nothing
    limits: ClientLimits = field(default_factory=ClientLimits)
    budget: Budget = field(default_factory=lambda: BufferBudget(MAX_BUFFERED_BYTES))
    offload: Offload | None = None  # None transforms every body on the loop
    max_catalogue: int = MAX_CATALOGUE_BYTES

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Forward one request; the proxy never answers 500 for its own failure."""
        received = time.perf_counter()
        target = request.raw_path
        route = route_request(target, request.headers, self.settings)
        path = target.partition("?")[0]
        exchange = Exchange(route, request.method, path, received, headers=request.headers)
        try:
            return await self._forward(request, exchange)
        except asyncio.CancelledError:
            exchange.disconnected = True  # handler_cancellation: the client went away
            raise
        except Exception:
            log.exception("toolslim failed on %s %s", exchange.method, exchange.path)
            exchange.failure = exchange.failure or "internal"
            if exchange.observer is not None:  # headers already sent: cut the stream
                abort(request)
                raise
            exchange.status = 502
            return error_response(route, 502, "toolslim failed to forward this request")
        finally:
            self.ledger.finish(exchange)

    async def _forward(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        headers = drop_hop_by_hop(CIMultiDict(request.headers), REQUEST_REBUILT)
        intake = Intake()
        watchdog = self.patrol.watch()
        try:
            try:
                data = await self.read_body(request, headers, exchange, watchdog, intake)
            except asyncio.CancelledError:
                if not watchdog.expired():
                    raise
                return await self.stalled(request, exchange)
            exchange.overhead = time.perf_counter() - exchange.received
            exchange.sent = True
            try:
                upstream = await self.send(exchange, headers, data, watchdog, intake)
            except ClientStalled:
                return await self.stalled(request, exchange)
            if isinstance(upstream, web.Response):
                return upstream
            try:
                return await self.relay(request, upstream, exchange, watchdog)
            finally:
                upstream.close()  # a no-op after a complete read (the connection is pooled)
        finally:
            self.patrol.release(watchdog)
            self.budget.give(intake.held)

    async def read_body(
        self,
        request: web.Request,
        headers: CIMultiDict[str],
        exchange: Exchange,
        watchdog: Watchdog,
        intake: Intake,
    ) -> Body:
        """Phase 1 and 2: read the body within max_body_bytes and the buffer budget, and
        transform it; a body that is larger, or does not fit the budget, streams through
        untouched."""
        limit = self.settings.max_body_bytes
        pipeline = self.pipeline
        declared = request.content_length
        budget = self.budget
        parts: list[bytes] = []
        unread: SkipReason | None = None
        if declared is not None and declared > limit:
            unread = "too_large"
        elif declared is not None and declared > budget.capacity - budget.held:
            unread = BUSY  # it cannot fit now: not a byte of it is held
        else:
            unread = await self.receive(request.content, watchdog, intake, parts)
        if unread is not None:
            exchange.report = pipeline.skip(b"", unread)
            if declared is not None:
                headers["Content-Length"] = str(declared)
            return self.stream_through(parts, request.content, exchange, intake)
        if intake.held > self.max_catalogue and "Content-Encoding" not in headers:
            # Too large to look at (transform's first check): not even joined.
            exchange.report = pipeline.skip(b"", "too_large")
            payload = Pieces(tuple(parts))
            exchange.bytes_in = exchange.bytes_out = payload.length
            return payload
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        del parts[:]  # the pieces go now: a join of a large body is not to be held twice
        if not body:
            exchange.report = pipeline.skip(body, "no_body")
            return None
        report, forwarded = await self.transform(body, headers, exchange)
        exchange.body = body
        self.ledger.transformed(exchange, report)  # tokens counted off the loop meanwhile
        payload = Pieces(forwarded)
        exchange.bytes_in, exchange.bytes_out = len(body), payload.length
        if self.recorder is not None:
            record(self.recorder, exchange, joined(forwarded))
        return payload

    async def receive(
        self, content: StreamReader, watchdog: Watchdog, intake: Intake, parts: list[bytes]
    ) -> SkipReason | None:
        """Read the body into `parts`: None once it is whole, or why the rest streams through
        (it is longer than max_body_bytes, or its bytes do not fit the buffer budget). A gap
        of `limits.body_idle` between two reads cancels the handler (see `stalled`)."""
        limit = self.settings.max_body_bytes
        idle = self.limits.body_idle
        budget = self.budget
        size = 0
        while True:
            watchdog.waiting(idle)
            chunk = await content.readany()
            watchdog.done()
            if not chunk:
                return None
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                return "too_large"
            # Held as it arrives: a client must send bytes to use the budget up.
            if not budget.take(len(chunk)):
                return BUSY
            intake.held += len(chunk)

    async def stream_through(
        self, parts: list[bytes], content: StreamReader, exchange: Exchange, intake: Intake
    ) -> AsyncIterator[bytes]:
        """A body not transformed: what was read, each piece given back to the budget once
        sent, then the rest as it arrives, untouched. A gap of `limits.body_idle` between
        two reads ends it (the upstream sees the body cut short, the client a 408)."""
        parts.reverse()
        while parts:
            piece = parts.pop()
            given = min(len(piece), intake.held)
            exchange.bytes_in = exchange.bytes_out = exchange.bytes_in + len(piece)
            yield piece
            self.budget.give(given)
            intake.held -= given
        idle = self.limits.body_idle
        while True:
            try:
                async with asyncio.timeout(idle):
                    chunk = await content.readany()
            except TimeoutError:
                intake.stalled = True
                raise ClientStalled from None
            if not chunk:
                return
            exchange.bytes_in = exchange.bytes_out = exchange.bytes_in + len(chunk)
            yield chunk

    async def transform(
        self, body: bytes, headers: CIMultiDict[str], exchange: Exchange
    ) -> Transformed:
        """Phase 2: the body transformed on the loop when that is light work, else on the
        worker thread (untouched, skipped busy, when its queue is full)."""
        if signed(headers):
            return self.pipeline.skip(body, "signed"), (body,)
        limit, api = self.settings.max_body_bytes, exchange.route.api
        return await transformed(
            self.offload, body, headers, self.pipeline, limit, api, self.max_catalogue
        )

    async def stalled(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        """408 and close: the client stopped sending its body (nginx's client_body_timeout)."""
        exchange.status = 408
        self.stats.record_connection_closed("body_timeout")
        response = refusal(408, f"no byte of the request body for {self.limits.body_idle:g} s")
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            pass
        abort(request)  # the rest of the body is never read
        return response

    async def send(
        self,
        exchange: Exchange,
        headers: CIMultiDict[str],
        data: Body,
        watchdog: Watchdog,
        intake: Intake,
    ) -> ClientResponse | web.Response:
        """Phase 3: the upstream's response headers, or the error response to answer with;
        ClientStalled when the client stopped sending the body that streams through."""
        route = exchange.route
        url = URL(route.upstream.url + route.target, encoded=True)
        sent = time.perf_counter()
        try:
            watchdog.waiting(self.settings.timeouts.response_headers)
            upstream = await self.session.request(
                exchange.method,
                url,
                headers=headers,
                data=data,
                allow_redirects=False,
                proxy=route.upstream.proxy,
            )
            watchdog.done()
        except asyncio.CancelledError:
            if not watchdog.expired():
                raise
            return self.failed(exchange, HeadersTimeout())
        except (ClientError, OSError, TimeoutError) as exc:
            if intake.stalled:  # the client's body stopped while it streamed through
                raise ClientStalled from exc
            return self.failed(exchange, exc)
        self.stats.observe_ttfb(time.perf_counter() - sent)
        return upstream

    async def relay(
        self,
        request: web.Request,
        upstream: ClientResponse,
        exchange: Exchange,
        watchdog: Watchdog,
    ) -> web.StreamResponse:
        """Phase 4: status, headers and the exact bytes as they arrive; a copy of each chunk
        is observed for usage."""
        stats = self.stats
        exchange.status = upstream.status
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        response.headers.extend(upstream.headers)
        drop_hop_by_hop(response.headers, HOP_BY_HOP)
        observer = UsageObserver(
            exchange.route.api,
            upstream.headers.get("Content-Type"),
            upstream.headers.get("Content-Encoding"),
            max_decoded=OBSERVED_DECODED,
        )
        try:
            await response.prepare(request)
        except ConnectionError:
            exchange.disconnected = True
            return response
        exchange.observer = observer  # the response reached the client: its usage is counted
        stats.stream_opened()
        idle = self.settings.timeouts.idle_chunk
        # A compressed answer is observed on the worker thread once it is whole: inflating a
        # copy is the one observation whose cost the upstream, not the size, decides.
        elsewhere = self.offload is not None and bool(upstream.headers.get("Content-Encoding"))
        kept: list[bytes] | None = []  # None: no room for the copy, usage is unavailable
        held = 0
        refused = upstream.status == 400  # lint reads the tool a refusal names (health.py)
        if refused:
            exchange.answer_encoding = upstream.headers.get("Content-Encoding")
        try:
            spent = 0.0
            while True:
                try:
                    watchdog.waiting(idle)
                    chunk = await upstream.content.readany()
                    watchdog.done()
                except TimeoutError:
                    return self.cut(request, response, exchange, "timeout")
                except (ClientError, OSError):
                    return self.cut(request, response, exchange, "reset")
                except asyncio.CancelledError:
                    if watchdog.expired():
                        return self.cut(request, response, exchange, "timeout")
                    raise
                if not chunk:
                    break
                got = time.perf_counter()
                try:
                    await response.write(chunk)
                except ConnectionError:
                    exchange.disconnected = True
                    return response
                if refused and len(exchange.answer) < ANSWER_HEAD:
                    exchange.answer += chunk[: ANSWER_HEAD - len(exchange.answer)]
                if not elsewhere:
                    observer.feed(chunk)
                elif kept is not None and self.budget.take(len(chunk)):  # held to the budget
                    kept.append(chunk)
                    held += len(chunk)
                elif kept is not None:
                    self.budget.give(held)
                    held, kept = 0, None
                spent += time.perf_counter() - got
            exchange.overhead += spent
            try:
                await response.write_eof()
            except ConnectionError:
                exchange.disconnected = True
            if kept:
                await self.observe_elsewhere(exchange, observer, kept)
            return response
        finally:
            stats.stream_closed()
            self.budget.give(held)

    async def observe_elsewhere(
        self, exchange: Exchange, observer: UsageObserver, chunks: list[bytes]
    ) -> None:
        """Feed a whole compressed answer's copy to its observer on the worker thread, and
        finish it there: the Ledger's `finish()` then only reads the result."""

        def observe() -> None:
            for chunk in chunks:
                observer.feed(chunk)
            observer.finish()

        assert self.offload is not None
        try:
            await self.offload.run(observe)  # None when the worker is full: usage unavailable
        except asyncio.CancelledError:
            # The client left after the last byte while the worker reads the copy: the
            # Ledger gets an observer of its own, which saw nothing (usage unavailable).
            exchange.observer = UsageObserver(exchange.route.api, None, None)
            raise

    def failed(self, exchange: Exchange, exc: BaseException) -> web.Response:
        """Count an upstream failure before response headers; the error in the API's shape."""
        translated = translate(exc, exchange.route.upstream.name, self.settings.timeouts)
        self.stats.record_upstream_error(translated.kind)
        exchange.failure, exchange.status = translated.kind, translated.status
        return error_response(exchange.route, translated.status, translated.message)

    def cut(
        self,
        request: web.Request,
        response: web.StreamResponse,
        exchange: Exchange,
        failure: str,
    ) -> web.StreamResponse:
        """End the client's stream as abruptly as the upstream's: mid-stream the status is
        sent, and a clean end would pass a truncated body off as complete."""
        exchange.failure = failure
        self.stats.record_upstream_error(failure)
        abort(request)
        return response


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
    """A request body written as the pieces it is made of; a small one behind its headers in
    one write, a large one after them without a copy.

    Written as bytes, a large body would be copied twice on the way out: once to join the
    pieces, once to put the headers in front of it (the client library joins them before
    Python 3.12.9, which has no scatter-gather write). A sized payload also gets its
    Content-Length from the library, at any size.
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
