"""PURE. One proxied request's record, and the ledger that counts each record once, with its
catalogue tokens and its log line.

Must not import aiohttp or prometheus_client: the shell fills the record in as it goes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Literal

from toolslim import logs, tokens
from toolslim.pipeline import ComponentRun, RunReport, cached_tokens, count_tokens
from toolslim.routing import Route
from toolslim.sse import UsageObserver
from toolslim.stats import Stats
from toolslim.usage import Usage, UsageReader

log = logging.getLogger("toolslim.app")

MAX_COUNTING: Final = 64  # token counts queued at once; beyond, a request is not tokenized

Tokens = Mapping[str, tuple[int, int]]  # component -> (tokens before, tokens after)
Transport = Literal["http", "websocket"]


@dataclass(slots=True)
class Exchange:
    """One proxied request's accounting, filled in as it goes and counted once by the Ledger."""

    route: Route
    method: str
    path: str  # without the query string: what the log line shows
    received: float
    transport: Transport = "http"
    # The request's headers and body as received, for what is decided when it is counted
    # (which session it belongs to); never logged.
    headers: Mapping[str, str] | None = None
    body: bytes = b""
    report: RunReport | None = None
    tokens: asyncio.Future[dict[str, tuple[int, int]]] | None = None
    counted: Tokens | None = None  # known at once on a counted memo hit
    status: int = 499  # nginx's "client closed request" until a status is known
    bytes_in: int = 0
    bytes_out: int = 0
    sent: bool = False
    overhead: float = 0.0
    # Set once the response began reaching the client: an HTTP response's observer, or the
    # reader of a WebSocket response's events.
    observer: UsageObserver | UsageReader | None = None
    disconnected: bool = False
    failure: str = ""  # upstream error kind, if any


class Ledger:
    """Counts finished exchanges into Stats: pipeline and request together (so the totals
    always agree), catalogue tokens when counted (off the loop, on one owned thread), usage,
    and the request's one log line.

    Exchanges that end in one turn of the event loop are counted together right after it:
    synchronous, so a client that hangs up at the last byte cannot interrupt it, and a
    request sent after a response reached its client sees that response counted (it is read
    from the socket in a later turn, and asyncio runs ready callbacks in order).
    """

    def __init__(
        self,
        stats: Stats,
        loop: asyncio.AbstractEventLoop,
        pending: set[asyncio.Future[dict[str, tuple[int, int]]]],
        log_lines: logs.BatchedLines | None = None,
    ) -> None:
        self.stats = stats
        self._loop = loop
        self.pending = pending  # token counts still running, awaited by `drain`
        self._log_lines = log_lines  # serving: each line goes straight into the batch
        self._finished: list[Exchange] = []
        # One thread tokenizes: new catalogues are rare in real sessions, and under a flood
        # of them a bounded backlog (MAX_COUNTING) keeps memory flat.
        self._counter = ThreadPoolExecutor(1, thread_name_prefix="toolslim-tokens")
        # The last pipeline summary logged and the runs it says: a session's memo hits
        # report the very same runs, so the text is made once per catalogue.
        self._summary: tuple[tuple[ComponentRun, ...], str] = ((), "-")

    def start_counting(self, exchange: Exchange, report: RunReport) -> None:
        """Find the request's catalogue tokens: at once when counted before, else on the
        owned thread (unless too many are queued), recorded when done."""
        exchange.counted = cached_tokens(report)
        if exchange.counted is not None:
            return
        if len(self.pending) >= MAX_COUNTING:
            self.stats.record_tokens_skipped()
            return
        future = self._loop.run_in_executor(
            self._counter,
            count_tokens,
            dataclasses.replace(report, pieces=()),  # the body is not needed there
            tokens.count_tokens,
        )
        self.pending.add(future)
        exchange.tokens = future

    def finish(self, exchange: Exchange) -> None:
        """Count the exchange right after the loop's current turn, with the others of it."""
        if not self._finished:
            self._loop.call_soon(self.count_finished)
        self._finished.append(exchange)

    def count_finished(self) -> None:
        finished, self._finished = self._finished, []
        for exchange in finished:
            try:
                self.count(exchange)
            except Exception:  # a bug here must not cost the others in the batch their counts
                log.exception("toolslim failed to count %s %s", exchange.method, exchange.path)

    def count(self, exchange: Exchange) -> None:
        """Count one exchange now (its tokens, if still being counted, when they are done)."""
        stats = self.stats
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
            transport=exchange.transport,
        )
        observer = exchange.observer
        responded = observer is not None
        usage = observer.finish() if observer is not None else None
        if exchange.tokens is None:
            self._record_tokens(exchange.counted, usage, responded)
        else:
            exchange.tokens.add_done_callback(
                lambda done: self._tokens_counted(done, usage, responded)
            )
        if exchange.sent:
            stats.observe_overhead(exchange.overhead)
        if log.isEnabledFor(logging.INFO):
            self._log(exchange, exchange.report)

    async def drain(self, timeout: float) -> None:
        """Let the token counts still running land in the stats, then stop the thread."""
        self.count_finished()
        if self.pending:
            await asyncio.wait(self.pending, timeout=timeout)
        self._counter.shutdown(wait=False, cancel_futures=True)

    def _tokens_counted(
        self,
        done: asyncio.Future[dict[str, tuple[int, int]]],
        usage: Usage | None,
        responded: bool,
    ) -> None:
        self.pending.discard(done)
        counted = None
        if not done.cancelled():
            if (exc := done.exception()) is not None:
                log.warning("token counting failed: %r", exc)
            else:
                counted = done.result()
        self._record_tokens(counted, usage, responded)

    def _record_tokens(self, counted: Tokens | None, usage: Usage | None, responded: bool) -> None:
        """The catalogue tokens of one request, then its usage (whose savings need them) when
        the response reached the client."""
        saved = self.stats.record_tokens(counted) if counted else 0
        if responded:
            self.stats.record_usage(usage, saved)

    def _log(self, exchange: Exchange, report: RunReport) -> None:
        """The request's one line: never a credential, a body or a query string."""
        message = (
            f"{exchange.method} {exchange.path} upstream={exchange.route.upstream.name}"
            f" api={exchange.route.api} status={exchange.status} in={exchange.bytes_in}B"
            f" out={exchange.bytes_out}B"
            f" pipeline={self._summarize(report.runs)}"
            f" overhead_ms={exchange.overhead * 1000:.2f}"
        )
        if exchange.transport != "http":
            message += f" transport={exchange.transport}"
        if exchange.failure:
            message += f" upstream_error={exchange.failure}"
        if exchange.disconnected:
            message += " client_disconnect"
        if (lines := self._log_lines) is not None:
            lines.info(log.name, message)
        else:
            log.info("%s", message)

    def _summarize(self, runs: tuple[ComponentRun, ...]) -> str:
        kept, text = self._summary
        if runs is not kept:
            text = ",".join(_outcome(run) for run in runs) or "-"
            self._summary = (runs, text)
        return text


def _outcome(run: ComponentRun) -> str:
    if run.outcome == "applied":
        return f"{run.component}=applied/-{run.bytes_saved}B"
    return f"{run.component}={run.outcome}/{run.reason}"
