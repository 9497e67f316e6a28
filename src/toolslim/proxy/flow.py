"""One HTTP request's flow through the proxy: its state, and the phases that move it, in the
order they run: read the body, transform it, send it upstream, relay the response back byte
for byte while a copy is observed for usage, finish.

The record of what happened is an `Exchange`, counted once by the `Ledger` when the flow
finishes, whatever way it ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import ClientError, ClientResponse, web
from multidict import CIMultiDict
from yarl import URL

from toolslim.core.entry import SkipReason
from toolslim.observe.exchange import Exchange
from toolslim.observe.health import ANSWER_HEAD
from toolslim.proxy.budget import Budget
from toolslim.proxy.forward import (
    OBSERVED_DECODED,
    Body,
    Forwarder,
    Pieces,
    abort,
    error_response,
    refusal,
)
from toolslim.proxy.transform import BUSY
from toolslim.proxy.watchdog import Stalled, Watchdog
from toolslim.wire.errors import HeadersTimeout, translate
from toolslim.wire.routing import HOP_BY_HOP, REQUEST_REBUILT, drop_hop_by_hop, route_request
from toolslim.wire.sse import UsageObserver

log = logging.getLogger("toolslim.proxy.forward")


class Hold:
    """The buffer-budget bytes one request holds (its body as read, the copy of a compressed
    answer kept to observe); whatever is left is given back once, by `release`."""

    __slots__ = ("_budget", "held")

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self.held = 0

    def room(self) -> int:
        """Bytes the budget could take now, over every request."""
        return self._budget.capacity - self._budget.held

    def take(self, size: int) -> bool:
        """Hold `size` bytes more, or nothing and False when they do not fit the budget."""
        if not self._budget.take(size):
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Give back up to `size` of the bytes held (what is held, if less)."""
        size = min(size, self.held)
        if size:
            self._budget.give(size)
            self.held -= size

    def release(self) -> None:
        self.give(self.held)


class Relayed(web.StreamResponse):
    """A relayed response: its headers go out with the first bytes written, so an answer
    that arrived whole with its headers leaves in one write (headers, body and, chunked, the
    last-chunk marker) instead of two or three. `relay` writes the headers on their own at once
    when the upstream's body is not there yet: a client never waits longer for them."""

    # aiohttp's own switch for this (web.Response holds its headers the same way); an
    # aiohttp without it sends the headers at once, as a StreamResponse does.
    _send_headers_immediately = False


@dataclass(slots=True)
class Received:
    """What `Flow.read` read of a body: its pieces, whole when `unread` is None, else why
    the rest is not read here (it streams through untouched)."""

    pieces: list[bytes] = field(default_factory=list)
    unread: SkipReason | None = None


class Flow:
    """One HTTP request: its route, the headers as forwarded (a copy of the client's), the
    body or its stream, the budget bytes it holds, the watchdog over its waits, its record."""

    __slots__ = ("body", "exchange", "forwarder", "headers", "hold", "request", "watchdog")

    def __init__(self, forwarder: Forwarder, request: web.Request) -> None:
        received = time.perf_counter()
        target = request.raw_path
        route = route_request(target, request.headers, forwarder.settings)
        path = target.partition("?")[0]
        self.forwarder = forwarder
        self.request = request
        self.exchange = Exchange(route, request.method, path, received, headers=request.headers)
        self.headers = drop_hop_by_hop(CIMultiDict(request.headers), REQUEST_REBUILT)
        self.hold = Hold(forwarder.budget)
        self.body: Body = None
        self.watchdog: Watchdog = forwarder.watchdogs.watch()  # released in finish

    async def run(self) -> web.StreamResponse:
        """Every phase in order; the proxy never answers 500 for its own failure."""
        exchange = self.exchange
        try:
            return await self._phases()
        except asyncio.CancelledError:
            if self.forwarder.grace_over:  # the shutdown cuts what is still in flight
                exchange.cut_by_shutdown = True
                self.forwarder.stats.record_connection_closed("shutdown")
            else:  # handler_cancellation: the client went away
                exchange.disconnected = True
            raise
        except Exception:
            log.exception("toolslim failed on %s %s", exchange.method, exchange.path)
            exchange.failure = exchange.failure or "internal"
            if exchange.observer is not None:  # the response is prepared: cut the stream
                abort(self.request)
                raise
            exchange.status = 502
            return error_response(exchange.route, 502, "toolslim failed to forward this request")
        finally:
            self.finish()

    async def _phases(self) -> web.StreamResponse:
        try:
            received = await self.read()
        except Stalled:
            return await self.stalled()
        await self.transform(received)
        exchange = self.exchange
        exchange.overhead = time.perf_counter() - exchange.received
        exchange.sent = True
        try:
            upstream = await self.send()
        except Stalled:  # the client's body stopped while it streamed through
            return await self.stalled()
        if isinstance(upstream, web.Response):
            return upstream
        try:
            return await self.relay(upstream)
        finally:
            upstream.close()  # a no-op after a complete read (the connection is pooled)

    async def read(self) -> Received:
        """Phase 1: the body, read whole within max_body_bytes and the buffer budget, each
        piece held as it arrives (a client must send bytes to use the budget up); or what was
        read before it outgrew either. Stalled after a gap of `limits.body_idle`."""
        limit = self.forwarder.settings.max_body_bytes
        declared = self.request.content_length
        received = Received()
        if declared is not None and declared > limit:
            received.unread = "too_large"
        elif declared is not None and declared > self.hold.room():
            received.unread = BUSY  # it cannot fit now: not a byte of it is held
        else:
            received.unread = await self._receive(received.pieces, limit)
        return received

    async def _receive(self, pieces: list[bytes], limit: int) -> SkipReason | None:
        content, hold = self.request.content, self.hold
        idle = self.forwarder.limits.body_idle
        within = self.watchdog.within
        size = 0
        while True:
            with within(idle):
                chunk = await content.readany()
            if not chunk:
                return None
            pieces.append(chunk)
            size += len(chunk)
            if size > limit:
                return "too_large"
            if not hold.take(len(chunk)):
                return BUSY

    async def transform(self, received: Received) -> None:
        """Phase 2: the body to send. Read whole, it goes through the transform step; else
        what was read goes on untouched, then the rest as it arrives."""
        forwarder, exchange = self.forwarder, self.exchange
        pipeline = forwarder.pipeline
        pieces = received.pieces
        if received.unread is not None:
            exchange.report = pipeline.skip(b"", received.unread)
            if (declared := self.request.content_length) is not None:
                self.headers["Content-Length"] = str(declared)
            self.body = self.stream_through(pieces)
            return
        if sum(map(len, pieces)) > forwarder.transform.max_catalogue and (
            "Content-Encoding" not in self.headers
        ):
            # Too large to look at (the transform's first check): not even joined.
            exchange.report = pipeline.skip(b"", "too_large")
            payload = Pieces(tuple(pieces))
            exchange.bytes_in = exchange.bytes_out = payload.length
            self.body = payload
            return
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        del pieces[:]  # the pieces go now: a join of a large body is not to be held twice
        if not body:
            exchange.report = pipeline.skip(body, "no_body")
            return
        rewritten = await forwarder.transform(exchange, body, self.headers)
        if rewritten.decoded:
            self.headers.popall("Content-Encoding", None)
        self.body = Pieces(rewritten.pieces)

    async def stream_through(self, pieces: list[bytes]) -> AsyncIterator[bytes]:
        """A body not transformed: what was read, each piece given back to the budget once
        sent, then the rest as it arrives, untouched. Run by the client library's task that
        writes the body: a gap of `limits.body_idle` between two reads raises Stalled there
        (the upstream sees the body cut short, the client a 408)."""
        exchange, hold = self.exchange, self.hold
        pieces.reverse()
        while pieces:
            piece = pieces.pop()
            exchange.bytes_in = exchange.bytes_out = exchange.bytes_in + len(piece)
            yield piece
            hold.give(len(piece))
        content = self.request.content
        idle = self.forwarder.limits.body_idle
        watchdogs = self.forwarder.watchdogs
        watchdog = watchdogs.watch()  # over the writing task, not the flow's
        try:
            while True:
                with watchdog.within(idle):
                    chunk = await content.readany()
                if not chunk:
                    return
                exchange.bytes_in = exchange.bytes_out = exchange.bytes_in + len(chunk)
                yield chunk
        finally:
            watchdogs.release(watchdog)

    async def send(self) -> ClientResponse | web.Response:
        """Phase 3: the upstream's response headers, or the error response to answer with;
        Stalled when the client stopped sending the body that streams through."""
        forwarder, exchange = self.forwarder, self.exchange
        route = exchange.route
        url = URL(route.upstream.url + route.target, encoded=True)
        sent = time.perf_counter()
        try:
            with self.watchdog.within(forwarder.settings.timeouts.response_headers):
                upstream = await forwarder.session.request(
                    exchange.method,
                    url,
                    headers=self.headers,
                    data=self.body,
                    allow_redirects=False,
                    proxy=route.upstream.proxy,
                )
        except Stalled:
            return self.failed(HeadersTimeout())
        except (ClientError, OSError, TimeoutError) as exc:
            if _stalled_beneath(exc):
                raise Stalled from exc
            return self.failed(exc)
        forwarder.stats.observe_ttfb(time.perf_counter() - sent)
        return upstream

    async def relay(self, upstream: ClientResponse) -> web.StreamResponse:
        """Phase 4: status, headers and the exact bytes as they arrive; a copy of each chunk
        is observed for usage."""
        forwarder, exchange, request = self.forwarder, self.exchange, self.request
        stats = forwarder.stats
        exchange.status = upstream.status
        response = Relayed(status=upstream.status, reason=upstream.reason)
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
        exchange.observer = observer  # the response is under way to the client: usage counts
        stats.stream_opened()
        idle = forwarder.settings.timeouts.idle_chunk
        # A compressed answer is observed on the worker thread once it is whole: inflating a
        # copy is the one observation whose cost the upstream, not the size, decides.
        on_worker = forwarder.offload is not None and bool(upstream.headers.get("Content-Encoding"))
        kept: list[bytes] | None = []  # None: no room for the copy, usage is unavailable
        kept_size = 0
        hold = self.hold
        refused = upstream.status == 400  # lint reads the tool a refusal names (health.py)
        if refused:
            exchange.answer_encoding = upstream.headers.get("Content-Encoding")
        within = self.watchdog.within
        content = upstream.content
        try:
            spent = 0.0
            try:
                chunk = content.read_nowait()  # what arrived with the headers, if anything
            except (ClientError, OSError):
                return self.cut(response, "reset")
            if not chunk and not content.at_eof():
                try:
                    await response.write(b"")  # the body is not here yet: the headers go now
                except ConnectionError:
                    exchange.disconnected = True
                    return response
            while True:
                if not chunk:
                    try:
                        with within(idle):
                            chunk = await content.readany()
                    except (Stalled, TimeoutError):
                        return self.cut(response, "timeout")
                    except (ClientError, OSError):
                        return self.cut(response, "reset")
                    if not chunk:
                        break
                got = time.perf_counter()
                last = content.at_eof()  # the whole body is read: this chunk ends it
                try:
                    if last:
                        await response.write_eof(chunk)
                    else:
                        await response.write(chunk)
                except ConnectionError:
                    exchange.disconnected = True
                    return response
                if refused and len(exchange.answer) < ANSWER_HEAD:
                    exchange.answer += chunk[: ANSWER_HEAD - len(exchange.answer)]
                if not on_worker:
                    observer.feed(chunk)
                elif kept is not None and hold.take(len(chunk)):  # held to the budget
                    kept.append(chunk)
                    kept_size += len(chunk)
                elif kept is not None:
                    hold.give(kept_size)
                    kept = None
                spent += time.perf_counter() - got
                if last:
                    break
                chunk = b""
            exchange.overhead += spent
            try:
                await response.write_eof()  # a no-op after write_eof(chunk)
            except ConnectionError:
                exchange.disconnected = True
            if kept:
                await self.observe_on_worker(observer, kept)
            return response
        finally:
            stats.stream_closed()

    async def observe_on_worker(self, observer: UsageObserver, chunks: list[bytes]) -> None:
        """Feed a whole compressed answer's copy to its observer on the worker thread, and
        finish it there: the Ledger's `finish()` then only reads the result."""

        def observe() -> None:
            for chunk in chunks:
                observer.feed(chunk)
            observer.finish()

        offload = self.forwarder.offload
        assert offload is not None
        try:
            await offload.run(observe)  # None when the worker is full: usage unavailable
        except asyncio.CancelledError:
            # The client left after the last byte while the worker reads the copy: the
            # Ledger gets an observer of its own, which saw nothing (usage unavailable).
            self.exchange.observer = UsageObserver(self.exchange.route.api, None, None)
            raise

    def finish(self) -> None:
        """Phase 5, whatever way the flow ended: the budget bytes given back, the watchdog
        released, the record counted. A request that ended before its body was read whole
        (a 408, an upload its client gave up) is counted too, its body skipped `no_body`."""
        forwarder, exchange = self.forwarder, self.exchange
        self.hold.release()
        forwarder.watchdogs.release(self.watchdog)
        if exchange.report is None:
            exchange.report = forwarder.pipeline.skip(b"", "no_body")
        forwarder.ledger.finish(exchange)

    async def stalled(self) -> web.StreamResponse:
        """408 and close: the client stopped sending its body (nginx's client_body_timeout)."""
        forwarder, request = self.forwarder, self.request
        self.exchange.status = 408
        forwarder.stats.record_connection_closed("body_timeout")
        idle = forwarder.limits.body_idle
        response = refusal(408, f"no byte of the request body for {idle:g} s")
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            pass
        abort(request)  # the rest of the body is never read
        return response

    def failed(self, exc: BaseException) -> web.Response:
        """Count an upstream failure before response headers; the error in the API's shape."""
        exchange = self.exchange
        timeouts = self.forwarder.settings.timeouts
        translated = translate(exc, exchange.route.upstream.name, timeouts)
        self.forwarder.stats.record_upstream_error(translated.kind)
        exchange.failure, exchange.status = translated.kind, translated.status
        return error_response(exchange.route, translated.status, translated.message)

    def cut(self, response: web.StreamResponse, failure: str) -> web.StreamResponse:
        """End the client's stream as abruptly as the upstream's: mid-stream the status is
        sent, and a clean end would pass a truncated body off as complete."""
        self.exchange.failure = failure
        self.forwarder.stats.record_upstream_error(failure)
        abort(self.request)
        return response


def _stalled_beneath(exc: BaseException) -> bool:
    """Whether the client library's error is the body's Stalled, raised in its writing task
    (stream_through) and handed on as the cause of a connection error."""
    seen: BaseException | None = exc
    for _ in range(4):  # the library wraps it once; bounded all the same
        if seen is None:
            return False
        if isinstance(seen, Stalled):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
