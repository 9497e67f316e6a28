"""The only importer of aiohttp: `make_app(settings)` builds the proxy, `serve(settings)` runs it.

Each request is routed by path to a configured upstream; its body goes through the pipeline;
the response is relayed chunk by chunk, untouched; every outcome is counted in one Stats.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import hmac
import importlib
import logging
import os
import re
import signal
import socket
import time
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from aiohttp import (
    ClientConnectorError,
    ClientError,
    ClientResponse,
    ClientSession,
    ClientTimeout,
    ConnectionTimeoutError,
    DummyCookieJar,
    StreamReader,
    TCPConnector,
    web,
)
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload
from aiohttp.typedefs import Handler
from multidict import CIMultiDict
from yarl import URL

from toolslim import capture, logs, metrics, tokens
from toolslim.config import Settings, Upstream
from toolslim.envelope import Piece, joined
from toolslim.pipeline import ComponentRun, Pipeline, RunReport, cached_tokens, count_tokens
from toolslim.sse import Usage, UsageObserver
from toolslim.stats import Stats

log = logging.getLogger(__name__)

DASHBOARD: Final = Path(__file__).with_name("dashboard")
# RFC 9110 section 7.6.1: never forwarded, in either direction (plus whatever Connection lists).
HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
)
# Request headers rebuilt for the upstream: Host and Content-Length by the client library;
# Expect was already answered by this server (it has the whole body).
_REQUEST_REBUILT: Final = HOP_BY_HOP | {"host", "content-length", "expect"}
_FILE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
MAX_COUNTING: Final = 64  # token counts queued at once; beyond, a request is not tokenized
# A body up to this size goes upstream in one write behind its headers: copying it costs
# less than a send (and a packet for the upstream to wake up for) of the headers on their own
# (measured at 80 KB: 4 % less CPU per request for pipeline [], 10 us less system time).
_ONE_WRITE: Final = 128 * 1024
# The longest a wait on the upstream outlasts its limit before it is cut: a quarter of the
# shorter limit, and never more than this (seconds).
_PATROL_PERIOD: Final = 1.0
_CAPTURE_FILES: Final = 8  # capture_max_bytes bounds the directory: 8 files, each 1/8 of it
_CSP: Final = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)


@dataclass(slots=True)
class Lifecycle:
    """Whether the server still takes work (/readyz turns 503 once shutdown starts), and the
    token counts still running: owned here, awaited on cleanup, never fire-and-forget."""

    ready: bool = True
    counting: set[asyncio.Future[dict[str, tuple[int, int]]]] = field(default_factory=set)
    # One thread tokenizes: new catalogues are rare in real sessions, and under a flood of
    # them a bounded backlog (MAX_COUNTING) keeps memory flat instead of queueing forever.
    counter: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="toolslim-tokens")
    )


@dataclass(slots=True)
class Forwarding:
    """The app's state, in one place: the admin handlers read it through app[FORWARDING], the
    forwarding path gets it handed down (request.app and each app[KEY] cost ~1 us, and a
    request made fourteen such lookups)."""

    settings: Settings
    pipeline: Pipeline
    stats: Stats
    lifecycle: Lifecycle
    capture: capture.Recorder | None  # None records nothing
    log_lines: logs.BatchedLines | None  # serving: where each request's line goes directly
    session: ClientSession | None = None  # while the app runs (see _client_session)
    loop: asyncio.AbstractEventLoop | None = None  # likewise
    patrol: _Patrol | None = None  # likewise
    finished: list[_Exchange] = field(default_factory=list)  # to count (see _finish)
    # The last pipeline summary logged, and the runs it says (see _summary).
    summary: tuple[tuple[ComponentRun, ...], str] = ((), "-")


FORWARDING: Final = web.AppKey("forwarding", Forwarding)  # the one home of the app's state
REGISTRY: Final = web.AppKey("registry", metrics.Registry)


def make_app(settings: Settings, log_lines: logs.BatchedLines | None = None) -> web.Application:
    """The proxy application: admin routes, the dashboard, and everything else forwarded.

    `log_lines`, the handler `logs.configure` set up, takes each request's line directly;
    without it the line goes through `logging`.
    """
    # The handlers rely on both: request bodies arrive as sent (a gzip body is forwarded
    # byte-identical unless changed), and a client that goes away cancels its handler at once.
    app = web.Application(
        handler_args={"auto_decompress": False, "handler_cancellation": True},
        middlewares=[_reverse_proxy_only],
    )
    pipeline = Pipeline(
        settings.pipeline, memo_size=settings.memo_size, options=settings.components
    )
    lifecycle = Lifecycle()
    stats = Stats(
        settings.pipeline,
        cache_read_multiplier=settings.cache_read_multiplier,
        cache_write_multiplier=settings.cache_write_multiplier,
        memo_gauges=pipeline.memo_gauges,
        tokens_pending=lambda: len(lifecycle.counting),
    )
    recorder = None
    if settings.capture_dir is not None:
        recorder = capture.Recorder(
            settings.capture_dir,
            max_bytes=max(1, settings.capture_max_bytes // _CAPTURE_FILES),
            keep_files=_CAPTURE_FILES,
        )
        app.on_cleanup.append(_close_capture)
    forwarding = Forwarding(settings, pipeline, stats, lifecycle, recorder, log_lines)
    app[FORWARDING] = forwarding
    app[REGISTRY] = metrics.make_registry(stats)
    app.cleanup_ctx.append(_client_session)
    app.on_cleanup.append(_counted)
    app.on_shutdown.append(_not_ready)
    app.router.add_get("/healthz", _healthz, allow_head=True)
    app.router.add_get("/readyz", _readyz, allow_head=True)
    app.router.add_get("/stats", _stats)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/dashboard", _dashboard)
    app.router.add_get("/dashboard/", _dashboard)
    app.router.add_get("/dashboard/{name}", _dashboard)
    app.router.add_route("*", "/{tail:.*}", functools.partial(_proxy, forwarding))
    return app


def serve(settings: Settings) -> int:
    """Run the proxy until SIGTERM/SIGINT, then drain in-flight requests; the exit status."""
    return asyncio.run(_serve(settings, logs.configure(settings.log_level)))


async def _serve(settings: Settings, log_lines: logs.BatchedLines) -> int:
    runner = web.AppRunner(
        make_app(settings, log_lines),
        handle_signals=False,
        access_log=None,  # one line per request comes from _count instead
        shutdown_timeout=settings.shutdown_grace,
    )
    await runner.setup()
    _tune_gc()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, backlog=1024)
        await site.start()
    except OSError as exc:
        log.error("cannot listen on %s:%s: %s", settings.host, settings.port, exc.strerror)
        await runner.cleanup()
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    addresses = ", ".join(f"http://{a[0]}:{a[1]}" for a in runner.addresses)
    log.info(
        "toolslim listening on %s; pipeline=[%s]; upstreams: %s",
        addresses,
        ",".join(settings.pipeline),
        ", ".join(f"{u.name}={u.url}" for u in settings.upstreams.values()),
    )
    log_lines.flush()
    flushing = asyncio.create_task(_flush_every_second(log_lines))
    try:
        await stop.wait()
        log.info("shutting down: in-flight requests get up to %s s", settings.shutdown_grace)
        log_lines.flush()
        # Stops accepting, runs on_shutdown (/readyz -> 503), waits for handlers up to the
        # grace period, cancels the rest, then closes the upstream session (cleanup_ctx).
        await runner.cleanup()
    finally:
        flushing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flushing
        log_lines.flush()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)
    return 0


async def _flush_every_second(log_lines: logs.BatchedLines) -> None:
    """A quiet server's last log lines go out within about a second."""
    while True:
        await asyncio.sleep(logs.FLUSH_SECONDS)
        log_lines.flush()


# Container allocations the young generation takes before a collection. The default, 700,
# is crossed every ~20 requests by the objects of the requests in flight alone, and each
# collection walks them all: ~17 us of CPU per request at 80 KB (measured with gc.callbacks).
# A request's objects are freed by reference counting when it ends, so the net count stays
# far below this; only reference cycles (garbage the collector exists for) add up to it.
_GC_YOUNG_THRESHOLD: Final = 10_000


def _tune_gc() -> None:
    """Collect what start-up left, move every surviving object (modules, the tokenizer, the
    app) out of the collector's sight for good, and raise the young threshold: a full
    collection then costs ~1 ms instead of ~14 ms, and the young one rarely runs."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG_THRESHOLD, middle, old)


async def _client_session(app: web.Application) -> AsyncIterator[None]:
    settings = app[FORWARDING].settings
    connector = TCPConnector(limit=0, limit_per_host=settings.pool_size, ttl_dns_cache=300)
    # sock_connect only: waiting for a pooled connection counts against response_headers,
    # and the idle gap between chunks is enforced per read in _relay (no sock_read here,
    # which would also cut the wait for response headers short).
    timeout = ClientTimeout(total=None, sock_connect=settings.timeouts.connect)
    async with ClientSession(
        connector=connector,
        timeout=timeout,
        auto_decompress=False,
        cookie_jar=DummyCookieJar(),  # one session serves every client: never keep cookies
        skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"),
        trust_env=False,
    ) as session:
        forwarding = app[FORWARDING]
        forwarding.session = session
        forwarding.loop = asyncio.get_running_loop()
        limits = settings.timeouts
        period = min(_PATROL_PERIOD, limits.response_headers / 4, limits.idle_chunk / 4)
        forwarding.patrol = _Patrol(forwarding.loop, period)
        yield
    forwarding.patrol.stop()
    _count_finished(forwarding)


async def _close_capture(app: web.Application) -> None:
    if (recorder := app[FORWARDING].capture) is not None:
        await asyncio.get_running_loop().run_in_executor(None, recorder.close)


async def _counted(app: web.Application) -> None:
    """Let the token counts still running land in the stats before the process ends."""
    lifecycle = app[FORWARDING].lifecycle
    if pending := lifecycle.counting:
        await asyncio.wait(pending, timeout=10)
    lifecycle.counter.shutdown(wait=False, cancel_futures=True)


async def _not_ready(app: web.Application) -> None:
    app[FORWARDING].lifecycle.ready = False


@dataclass(slots=True)  # one per request: not frozen, see pipeline.RunReport
class Route:
    """Where a request goes: the upstream, the target appended to its base URL, the API."""

    upstream: Upstream
    target: str  # raw path and query, prefix stripped
    api: str  # anthropic | openai-chat | openai-responses | gemini | other


def route_request(target: str, headers: Mapping[str, str], settings: Settings) -> Route:
    """Pick the upstream for an origin-form request target (issue 3's routing table)."""
    path = target.partition("?")[0]
    upstreams = settings.upstreams
    first = path[1:].partition("/")[0]
    name: str | None = None
    if first in upstreams:  # /NAME/... picks upstream NAME; the prefix is stripped
        name = first
        target = target[len(first) + 1 :]
        if not target.startswith("/"):
            target = "/" + target
        path = target.partition("?")[0]
    api = _api(path)
    if name is None:
        if first in ("v1beta", "v1alpha"):
            name = "gemini"
        elif api == "anthropic":
            name = "anthropic"
        elif api in ("openai-chat", "openai-responses"):
            name = "openai"
        elif first == "v1":
            anthropic = "anthropic-version" in headers or "x-api-key" in headers
            name = "anthropic" if anthropic else "openai"
        else:
            name = settings.default_upstream
    if name == "gemini":
        # Gemini's OpenAI-compatible endpoint answers in OpenAI's shape (usage, errors).
        api = "openai-chat" if path.endswith("/chat/completions") else "gemini"
    return Route(upstreams[name], target, api)


def _api(path: str) -> str:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path == "/v1/chat/completions":
        return "openai-chat"
    if path.startswith("/v1/responses"):
        return "openai-responses"
    return "other"


@dataclass(slots=True)
class _Exchange:
    """One proxied request's accounting, filled in as it goes and counted once in _count."""

    route: Route
    method: str
    path: str  # without the query string: what the log line shows
    received: float
    report: RunReport | None = None
    tokens: asyncio.Future[dict[str, tuple[int, int]]] | None = None
    counted: Mapping[str, tuple[int, int]] | None = None  # known at once on a counted memo hit
    status: int = 499  # nginx's "client closed request" until a status is known
    bytes_in: int = 0
    bytes_out: int = 0
    sent: bool = False
    overhead: float = 0.0
    observer: UsageObserver | None = None  # set once the response's headers went out
    disconnected: bool = False
    failure: str = ""  # upstream error kind, if any


@web.middleware
async def _reverse_proxy_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse forward-proxy requests before routing sees them: never an open proxy."""
    if request.method == "CONNECT":  # authority-form: matches no route, would be a 404
        return _refusal(405, "toolslim is a reverse proxy: CONNECT is not supported")
    if not request.raw_path.startswith("/"):  # absolute-form: GET http://host/ HTTP/1.1
        return _refusal(400, "toolslim is a reverse proxy: send origin-form paths (/v1/...)")
    return await handler(request)


async def _proxy(forwarding: Forwarding, request: web.Request) -> web.StreamResponse:
    received = time.perf_counter()
    target = request.raw_path
    route = route_request(target, request.headers, forwarding.settings)
    exchange = _Exchange(route, request.method, target.partition("?")[0], received)
    try:
        return await _forward(forwarding, request, exchange)
    except asyncio.CancelledError:
        exchange.disconnected = True  # handler_cancellation: the client went away
        raise
    except Exception:  # the proxy never answers 500 for its own failure
        log.exception("toolslim failed on %s %s", exchange.method, exchange.path)
        exchange.failure = exchange.failure or "internal"
        if exchange.observer is not None:  # headers already sent: cut the stream
            _abort(request)
            raise
        exchange.status = 502
        return _error(exchange.route, 502, "toolslim failed to forward this request")
    finally:
        _finish(forwarding, exchange)


async def _forward(
    forwarding: Forwarding, request: web.Request, exchange: _Exchange
) -> web.StreamResponse:
    settings, pipeline = forwarding.settings, forwarding.pipeline
    headers = _drop_hop_by_hop(CIMultiDict(request.headers), _REQUEST_REBUILT)
    limit = settings.max_body_bytes
    declared = request.content_length
    overflow = declared is not None and declared > limit
    body = b""
    if not overflow:
        body, overflow = await _read_body(request.content, limit)
    data: Payload | AsyncIterator[bytes] | None
    if overflow:
        exchange.report = pipeline.skip(b"", "too_large")
        if declared is not None:
            headers["Content-Length"] = str(declared)
        data = _passthrough(body, request.content, exchange)
    elif not body:
        exchange.report = pipeline.skip(body, "no_body")
        data = None
    else:
        report, forwarded = _transform(body, headers, pipeline, limit, exchange.route.api)
        exchange.report = report
        payload = _Pieces(forwarded)
        exchange.bytes_in, exchange.bytes_out = len(body), payload.length
        for component, message in report.errors:
            log.warning("component %s failed on %s: %s", component, exchange.path, message)
        if report.applied:
            # A catalogue counted before is known at once; a new one is tokenized off the
            # loop while the request goes upstream, and recorded when done (see _count).
            exchange.counted = cached_tokens(report)
            if exchange.counted is None:
                exchange.tokens = _start_counting(forwarding, report)
        if (recorder := forwarding.capture) is not None:
            path, _, query = exchange.route.target.partition("?")
            recorder.record(  # non-blocking; it redacts credentials in headers and query
                method=exchange.method,
                path=path,
                query=query,
                upstream=exchange.route.upstream.name,
                headers=request.headers,
                body=body,
                forwarded=joined(forwarded),
            )
        data = payload
    url = URL(exchange.route.upstream.url + exchange.route.target, encoded=True)
    sent = time.perf_counter()
    exchange.overhead = sent - exchange.received
    exchange.sent = True
    timeouts = settings.timeouts
    assert forwarding.patrol is not None
    watchdog = forwarding.patrol.watch()
    try:
        try:
            watchdog.waiting(timeouts.response_headers)
            assert forwarding.session is not None
            upstream = await forwarding.session.request(
                exchange.method, url, headers=headers, data=data, allow_redirects=False
            )
            watchdog.done()
        except asyncio.CancelledError:
            if not watchdog.expired():
                raise
            return _failed(forwarding, exchange, TimeoutError())
        except (ClientError, OSError, TimeoutError) as exc:
            return _failed(forwarding, exchange, exc)
        forwarding.stats.observe_ttfb(time.perf_counter() - sent)
        try:
            return await _relay(forwarding, request, upstream, exchange, watchdog)
        finally:
            upstream.close()  # a no-op after a complete read (the connection is pooled again)
    finally:
        forwarding.patrol.release(watchdog)


def _failed(forwarding: Forwarding, exchange: _Exchange, exc: BaseException) -> web.Response:
    """Count an upstream failure before response headers; the error in the client's API shape."""
    status, kind, message = _translate(exc, exchange.route.upstream.name, forwarding.settings)
    forwarding.stats.record_upstream_error(kind)
    exchange.failure, exchange.status = kind, status
    return _error(exchange.route, status, message)


def _start_counting(
    forwarding: Forwarding, report: RunReport
) -> asyncio.Future[dict[str, tuple[int, int]]] | None:
    """Tokenize a request's new catalogues on the owned thread, unless too many are queued."""
    lifecycle, stats = forwarding.lifecycle, forwarding.stats
    if len(lifecycle.counting) >= MAX_COUNTING:
        stats.record_tokens_skipped()
        return None
    future = asyncio.get_running_loop().run_in_executor(
        lifecycle.counter,
        count_tokens,
        dataclasses.replace(report, pieces=()),  # the body is not needed there
        tokens.count_tokens,
    )
    lifecycle.counting.add(future)
    return future


def _transform(
    body: bytes, headers: CIMultiDict[str], pipeline: Pipeline, limit: int, api: str
) -> tuple[RunReport, tuple[Piece, ...]]:
    """The pipeline's report on the (decoded) body, and the pieces of the body to forward.

    A changed body goes decoded, without its Content-Encoding; an unchanged one goes as the
    client sent it.
    """
    coding = headers.get("Content-Encoding", "").strip().lower()
    decoded = body
    if coding and coding != "identity":
        decode = _DECODERS.get(coding)
        if decode is None:
            return pipeline.skip(body, "undecodable"), (body,)
        try:
            decoded = decode(body, limit)
        except _TooLarge:
            return pipeline.skip(body, "too_large"), (body,)
        except Exception:
            return pipeline.skip(body, "undecodable"), (body,)
    report = pipeline.run(decoded, api)  # never raises: the runner fails open itself
    if not report.changed(decoded):
        return report, (body,)
    headers.popall("Content-Encoding", None)
    return report, report.pieces


async def _relay(
    forwarding: Forwarding,
    request: web.Request,
    upstream: ClientResponse,
    exchange: _Exchange,
    watchdog: _Watchdog,
) -> web.StreamResponse:
    """Status, headers and the exact bytes as they arrive; a copy of each chunk is observed."""
    stats = forwarding.stats
    exchange.status = upstream.status
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    response.headers.extend(upstream.headers)
    _drop_hop_by_hop(response.headers, HOP_BY_HOP)
    observer = UsageObserver(
        exchange.route.api,
        upstream.headers.get("Content-Type"),
        upstream.headers.get("Content-Encoding"),
    )
    try:
        await response.prepare(request)
    except ConnectionError:
        exchange.disconnected = True
        return response
    exchange.observer = observer  # the response reached the client: its usage is counted
    stats.stream_opened()
    idle = forwarding.settings.timeouts.idle_chunk
    try:
        spent = 0.0
        while True:
            try:
                watchdog.waiting(idle)
                chunk = await upstream.content.readany()
                watchdog.done()
            except TimeoutError:
                return _cut(stats, request, response, exchange, "timeout")
            except (ClientError, OSError):
                return _cut(stats, request, response, exchange, "reset")
            except asyncio.CancelledError:
                if watchdog.expired():
                    return _cut(stats, request, response, exchange, "timeout")
                raise
            if not chunk:
                break
            got = time.perf_counter()
            try:
                await response.write(chunk)
            except ConnectionError:
                exchange.disconnected = True
                return response
            observer.feed(chunk)
            spent += time.perf_counter() - got
        exchange.overhead += spent
        try:
            await response.write_eof()
        except ConnectionError:
            exchange.disconnected = True
        return response
    finally:
        stats.stream_closed()


def _cut(
    stats: Stats,
    request: web.Request,
    response: web.StreamResponse,
    exchange: _Exchange,
    failure: str,
) -> web.StreamResponse:
    """End the client's stream as abruptly as the upstream's: mid-stream the status is sent,
    and a clean end would pass a truncated body off as complete."""
    exchange.failure = failure
    stats.record_upstream_error(failure)
    _abort(request)
    return response


class _Watchdog:
    """Cancels a handler's task once one wait on the upstream outlasts its limit: the wait for
    response headers, then each read of the body. Time spent writing to a slow client never
    counts. A wait costs one clock read; the app's one `_Patrol` does the checking.
    """

    __slots__ = ("_cancelling", "_fired", "_limit", "_since", "_task", "_time")

    def __init__(self, task: asyncio.Task[Any], time: Callable[[], float]) -> None:
        self._task = task
        self._cancelling = task.cancelling()
        self._time = time
        self._since: float | None = None  # when the pending wait began
        self._limit = 0.0
        self._fired = False

    def waiting(self, limit: float) -> None:
        self._since = self._time()
        self._limit = limit

    def done(self) -> None:
        self._since = None

    def check(self, now: float) -> None:
        if self._since is not None and not self._fired and now >= self._since + self._limit:
            self._fired = True
            self._task.cancel()

    def expired(self) -> bool:
        """Whether the CancelledError being handled is this watchdog's own (then it is
        consumed), not the client's going away or a shutdown."""
        return self._fired and self._task.uncancel() <= self._cancelling


class _Patrol:
    """One timer for every request's watchdog: a round every `period` seconds while any is
    watched, so a wait is cut at most `period` after its limit.

    A timer of each request's own, made and cancelled, cost 3 % of the CPU per request at
    60 KB (and an asyncio.timeout around each wait, ~5 us per chunk).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float) -> None:
        self._loop = loop
        self._period = period
        self._watched: set[_Watchdog] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self) -> _Watchdog:
        """A watchdog over the current task, until `release`."""
        task = asyncio.current_task(self._loop)  # given the loop: no getpid system call
        assert task is not None
        watchdog = _Watchdog(task, self._loop.time)
        self._watched.add(watchdog)
        if self._timer is None:
            self._timer = self._loop.call_later(self._period, self._round)
        return watchdog

    def release(self, watchdog: _Watchdog) -> None:
        self._watched.discard(watchdog)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _round(self) -> None:
        self._timer = None  # this round's handle is spent, whatever happens below
        now = self._loop.time()
        for watchdog in list(self._watched):  # a cancelled task may release at once
            watchdog.check(now)
        if self._watched:
            self._timer = self._loop.call_later(self._period, self._round)


def _finish(forwarding: Forwarding, exchange: _Exchange) -> None:
    """Count the exchange right after the event loop's current turn, with every other one
    that ended in it; synchronous, so a client that hangs up at the last byte (cancelling
    the handler) cannot interrupt it.

    Under load several requests end in one turn, and counting them back to back (usage read,
    stats recorded, log line written) keeps that code and its data in the CPU caches: 5 %
    less CPU per request at 60 KB than counting each as its handler ends. A request sent
    after a response reached its client sees it counted: it is read from the socket in a
    later turn, and asyncio runs ready callbacks in order. (A /stats already being served in
    the same turn may see an upstream error, counted at once, before its request.)
    """
    if not forwarding.finished:
        assert forwarding.loop is not None
        forwarding.loop.call_soon(_count_finished, forwarding)
    forwarding.finished.append(exchange)


def _count_finished(forwarding: Forwarding) -> None:
    finished, forwarding.finished = forwarding.finished, []
    for exchange in finished:
        try:
            _count(forwarding, exchange)
        except Exception:  # a bug here must not cost the others in the batch their counts
            log.exception("toolslim failed to count %s %s", exchange.method, exchange.path)


def _count(forwarding: Forwarding, exchange: _Exchange) -> None:
    """Count the exchange once: pipeline + request together, so the totals always agree.
    Tokens still being counted are recorded by `_tokens_counted` when they are done.
    """
    stats = forwarding.stats
    if exchange.disconnected:
        stats.record_client_disconnect()
    if exchange.report is None:  # the client went away before its body was read
        return
    stats.record_pipeline(exchange.report)
    stats.record_request(
        upstream=exchange.route.upstream.name,
        api=exchange.route.api,
        status=exchange.status,
        bytes_in=exchange.bytes_in,
        bytes_out=exchange.bytes_out,
    )
    observer = exchange.observer
    responded = observer is not None
    usage = observer.finish() if observer is not None else None
    if exchange.tokens is None:
        _record_tokens(stats, exchange.counted, usage, responded)
    else:
        exchange.tokens.add_done_callback(
            lambda done: _tokens_counted(forwarding, done, usage, responded)
        )
    if exchange.sent:
        stats.observe_overhead(exchange.overhead)
    if log.isEnabledFor(logging.INFO):
        _log_exchange(forwarding, exchange, exchange.report)


def _log_exchange(forwarding: Forwarding, exchange: _Exchange, report: RunReport) -> None:
    """The request's one line: never a credential, a body or a query string."""
    message = (
        f"{exchange.method} {exchange.path} upstream={exchange.route.upstream.name}"
        f" api={exchange.route.api} status={exchange.status} in={exchange.bytes_in}B"
        f" out={exchange.bytes_out}B"
        f" pipeline={_summary(forwarding, report.runs)}"
        f" overhead_ms={exchange.overhead * 1000:.2f}"
    )
    if exchange.failure:
        message += f" upstream_error={exchange.failure}"
    if exchange.disconnected:
        message += " client_disconnect"
    if (lines := forwarding.log_lines) is not None:  # serving: straight into the batch
        lines.info(log.name, message)
    else:
        log.info("%s", message)


def _tokens_counted(
    forwarding: Forwarding,
    done: asyncio.Future[dict[str, tuple[int, int]]],
    usage: Usage | None,
    responded: bool,
) -> None:
    """Record one request's catalogue tokens (and its usage, which needs them) once counted."""
    forwarding.lifecycle.counting.discard(done)
    counted = None
    if not done.cancelled():
        if (exc := done.exception()) is not None:
            log.warning("token counting failed: %r", exc)
        else:
            counted = done.result()
    _record_tokens(forwarding.stats, counted, usage, responded)


def _record_tokens(
    stats: Stats,
    counted: Mapping[str, tuple[int, int]] | None,
    usage: Usage | None,
    responded: bool,
) -> None:
    """The catalogue tokens of one request, then its usage (whose savings need them) when
    the response reached the client."""
    saved = stats.record_tokens(counted) if counted else 0
    if responded:
        stats.record_usage(usage, saved)


def _summary(forwarding: Forwarding, runs: tuple[ComponentRun, ...]) -> str:
    """What the pipeline did, for the log line. A session's memo hits on bodies with one
    catalogue report the very same runs (kept with the catalogue's memo entry), so the last
    summary is kept and said again; other runs are written out afresh. Written out every
    time it cost ~9 us per request with L1 and L2 flushed (about 3 kept), as at c=1."""
    kept, text = forwarding.summary
    if runs is not kept:
        text = ",".join(_outcome(run) for run in runs) or "-"
        forwarding.summary = (runs, text)
    return text


def _outcome(run: ComponentRun) -> str:
    if run.outcome == "applied":
        return f"{run.component}=applied/-{run.bytes_saved}B"
    return f"{run.component}={run.outcome}/{run.reason}"


def _translate(exc: BaseException, upstream: str, settings: Settings) -> tuple[int, str, str]:
    """The one boundary: (status, error kind, message) for a failure before response headers.

    Messages name the cause, never a URL, an address, a header or a key.
    """
    if isinstance(exc, ConnectionTimeoutError):
        wait = settings.timeouts.connect
        why = f"timed out connecting to the {upstream} upstream ({wait:g} s)"
        return 504, "timeout", f"toolslim {why}"
    if isinstance(exc, TimeoutError):
        wait = settings.timeouts.response_headers
        why = f"sent no response headers within {wait:g} s"
        return 504, "timeout", f"the {upstream} upstream {why}"
    if isinstance(exc, ClientConnectorError):
        # os_error's text may name the address; its errno does not.
        code = exc.os_error.errno
        if isinstance(exc.os_error, socket.gaierror):  # its errno is not an OS errno
            why = "its host name did not resolve"
        else:
            why = os.strerror(code).lower() if code else type(exc.os_error).__name__
        return 502, "connect", f"toolslim could not connect to the {upstream} upstream ({why})"
    why = f"failed before a response ({type(exc).__name__})"
    return 502, "reset", f"the connection to the {upstream} upstream {why}"


def _error(route: Route, status: int, message: str) -> web.Response:
    """An error in the shape of the API the client called."""
    shape = route.api if route.api != "other" else route.upstream.name
    body: dict[str, Any]
    if shape == "anthropic":
        body = {"type": "error", "error": {"type": "api_error", "message": message}}
    elif shape == "gemini":
        grpc = "DEADLINE_EXCEEDED" if status == 504 else "UNAVAILABLE"
        body = {"error": {"code": status, "message": message, "status": grpc}}
    else:
        code = "upstream_timeout" if status == 504 else "upstream_unavailable"
        body = {
            "error": {"message": message, "type": "upstream_error", "param": None, "code": code}
        }
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def _refusal(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def _abort(request: web.Request) -> None:
    if (transport := request.transport) is not None:
        transport.close()


def _drop_hop_by_hop(headers: CIMultiDict[str], drop: frozenset[str]) -> CIMultiDict[str]:
    """Remove, in place, the hop-by-hop headers: `drop`, Proxy-*, and those Connection names."""
    listed = [t.strip() for v in headers.getall("Connection", ()) for t in v.split(",")]
    for name in drop:
        if name in headers:
            del headers[name]
    for name in listed:
        headers.popall(name, None)
    for name in [name for name in headers if name[:6].lower() == "proxy-"]:
        headers.popall(name, None)
    return headers


async def _read_body(content: StreamReader, limit: int) -> tuple[bytes, bool]:
    """The whole body, or its first bytes and True once it is longer than `limit`."""
    parts: list[bytes] = []
    size = 0
    while chunk := await content.readany():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts), True
    return b"".join(parts), False


async def _passthrough(
    head: bytes, content: StreamReader, exchange: _Exchange
) -> AsyncIterator[bytes]:
    """A body too large to transform: what was read, then the rest as it arrives, untouched."""
    if head:
        exchange.bytes_in = exchange.bytes_out = len(head)
        yield head
    async for chunk in content.iter_any():
        exchange.bytes_in = exchange.bytes_out = exchange.bytes_in + len(chunk)
        yield chunk


class _Pieces(Payload):
    """A request body written as the pieces it is made of; a small one behind its headers in
    one write, a large one after them without a copy.

    Written as bytes, a large body would be copied twice on the way out: once to join the
    pieces, once to put the headers in front of it (the client library joins them before
    Python 3.12.9, which has no scatter-gather write). A sized payload also gets its
    Content-Length from the library, at any size.
    """

    _autoclose = True  # in memory: nothing to close

    def __init__(self, pieces: tuple[Piece, ...]) -> None:
        super().__init__(pieces)
        self._pieces = pieces
        self.length: int = sum(map(len, pieces))  # no generator frame: cheaper when cold
        self._size = self.length

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return joined(self._pieces).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        remaining = self.length if content_length is None else content_length
        if self.length <= _ONE_WRITE:
            # The writer puts the headers it holds in front of this chunk: one send.
            await writer.write(joined(self._pieces)[:remaining])
            return
        writer.send_headers()
        for piece in self._pieces:
            if remaining <= 0:
                break
            await writer.write(piece[:remaining])
            remaining -= len(piece)


class _TooLarge(Exception):
    """The decoded body would exceed max_body_bytes."""


def _inflate(wbits: int, members: bool) -> Callable[[bytes, int], bytes]:
    def decode(data: bytes, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            inflater = zlib.decompressobj(wbits)
            part = inflater.decompress(data, limit + 1 - size)
            size += len(part)
            parts.append(part)
            if size > limit or inflater.unconsumed_tail:
                raise _TooLarge
            if not inflater.eof:
                raise ValueError("truncated")
            data = inflater.unused_data
            if not data:
                return b"".join(parts)
            if not members:  # gzip may hold several members (RFC 1952 section 2.2)
                raise ValueError("trailing data")

    return decode


def _deflate(data: bytes, limit: int) -> bytes:
    # "deflate" is zlib-wrapped (RFC 9110 section 8.4.1.2), but some clients send it raw.
    try:
        return _inflate(zlib.MAX_WBITS, False)(data, limit)
    except zlib.error:
        return _inflate(-zlib.MAX_WBITS, False)(data, limit)


def _optional_decoders() -> dict[str, Callable[[bytes, int], bytes]]:
    decoders: dict[str, Callable[[bytes, int], bytes]] = {}
    try:
        brotli: Any = importlib.import_module("brotli")
    except ImportError:
        pass
    else:

        def unbrotli(data: bytes, limit: int) -> bytes:
            decompressor = brotli.Decompressor()
            out: bytes = decompressor.process(data, output_buffer_limit=limit + 1)
            if len(out) > limit or not decompressor.can_accept_more_data():
                raise _TooLarge
            if not decompressor.is_finished():
                raise ValueError("truncated")
            return out

        decoders["br"] = unbrotli
    try:
        zstandard: Any = importlib.import_module("zstandard")
    except ImportError:
        pass
    else:

        def unzstd(data: bytes, limit: int) -> bytes:
            # Bounded first (a small body can expand enormously), then checked frame by
            # frame: the bounded reader accepts a truncated frame without complaint.
            reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
            out: bytes = reader.read(limit + 1)
            if len(out) > limit:
                raise _TooLarge
            while data:
                frame = zstandard.ZstdDecompressor().decompressobj()
                frame.decompress(data)
                if not frame.eof:
                    raise ValueError("truncated")
                data = frame.unused_data
            return out

        decoders["zstd"] = unzstd
    return decoders


_DECODERS: Final[Mapping[str, Callable[[bytes, int], bytes]]] = {
    "gzip": _inflate(16 + zlib.MAX_WBITS, True),
    "x-gzip": _inflate(16 + zlib.MAX_WBITS, True),
    "deflate": _deflate,
    **_optional_decoders(),
}


def _authorized(request: web.Request) -> bool:
    token = request.app[FORWARDING].settings.admin_token
    if token is None:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("utf-8", "surrogateescape"), token.encode()
    )


def _unauthorized() -> web.Response:
    return web.json_response(
        {"error": "this endpoint requires Authorization: Bearer <admin_token>"},
        status=401,
        headers={"WWW-Authenticate": 'Bearer realm="toolslim"'},
    )


def _json(obj: Any) -> str:
    return orjson.dumps(obj).decode()


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"}, dumps=_json)


async def _readyz(request: web.Request) -> web.Response:
    if request.app[FORWARDING].lifecycle.ready:
        return web.json_response({"status": "ready"}, dumps=_json)
    return web.json_response({"status": "shutting_down"}, status=503, dumps=_json)


async def _stats(request: web.Request) -> web.Response:
    if not _authorized(request):
        return _unauthorized()
    snapshot = request.app[FORWARDING].stats.snapshot()
    return web.json_response(snapshot, dumps=_json, headers={"Cache-Control": "no-store"})


async def _metrics(request: web.Request) -> web.Response:
    if not _authorized(request):
        return _unauthorized()
    body = metrics.exposition(request.app[REGISTRY])
    headers = {"Content-Type": metrics.CONTENT_TYPE, "Cache-Control": "no-store"}
    return web.Response(body=body, headers=headers)


async def _dashboard(request: web.Request) -> web.StreamResponse:
    """The static dashboard: public (it holds no data; its script needs the token for /stats)."""
    name = request.match_info.get("name", "index.html")
    path = DASHBOARD / name
    if not _FILE_NAME.fullmatch(name) or not path.is_file():
        raise web.HTTPNotFound()
    headers = {
        "Cache-Control": "no-cache",
        "Content-Security-Policy": _CSP,
        "X-Content-Type-Options": "nosniff",
    }
    return web.FileResponse(path, headers=headers)
