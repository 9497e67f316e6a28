"""PURE. One proxied request's record, and the ledger that counts each record once, with its
catalogue tokens, what is decided per request from its catalogues' facts (drift in its session,
the advisories it carries) and its log line.

Must not import aiohttp or prometheus_client: the shell fills the record in as it goes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import orjson

from toolslim.config.options import DRIFT_MAX_SESSIONS
from toolslim.core import tokens
from toolslim.core.facts import CatalogueFacts
from toolslim.core.lint import Finding
from toolslim.core.pipeline import ComponentRun, RunReport, cached_tokens, count_tokens
from toolslim.core.toolfacts import ToolFacts, tool_facts
from toolslim.observe import advice, capture, drift, health, logs
from toolslim.observe.ledger import who
from toolslim.observe.stats import Stats, Transport
from toolslim.wire.apis import MODEL_CALLS
from toolslim.wire.routing import Route
from toolslim.wire.sse import UsageObserver
from toolslim.wire.usage import Usage, UsageReader

log = logging.getLogger("toolslim.proxy.app")

MAX_COUNTING: Final = 64  # token counts queued at once; beyond, a request is not tokenized
WARNED: Final = 1024  # (advisory, catalogue) pairs remembered as warned about
# Finished exchanges wait this long to be counted together (or until the counts are read,
# Stats.settle): counting is then off the way of the request that follows (at concurrency 1
# it arrives while the last one would be counted), and what repeats in it stays warm. The
# window bounds how many wait, and so the bodies they hold and the pause they cost.
COUNT_AFTER: Final = 0.002

Tokens = Mapping[str, tuple[int, int]]  # component -> (tokens before, tokens after)
Catalogue = tuple[str, bytes]  # (api, identity): what Stats counts a request's catalogues by


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
    cut_by_shutdown: bool = False  # in flight when the shutdown grace ended
    failure: str = ""  # upstream error kind, if any
    capture: capture.Held | None = None  # its capture line, written once its answer is read
    # A WebSocket follow-up without a catalogue: those of the response it continues, still in
    # the model's prompt (ledger.chain); the tool ledger counts them as offered again.
    continued: tuple[CatalogueFacts, ...] = ()
    findings: tuple[Finding, ...] = ()  # lint findings of its catalogues (health.Linter)
    # The start of a 400 answer as it came (and its Content-Encoding): read for the tool it
    # names once the exchange is counted.
    answer: bytes = b""
    answer_encoding: str | None = None


def is_model_call(exchange: Exchange) -> bool:
    """Whether the exchange asked a model for an answer: a `response.create` on a WebSocket,
    or a POST to one of apis.MODEL_CALLS. Only their responses report the usage a provider
    bills (not a probe, /v1/models, a token count, a batch), so only they count as
    usage_unavailable. An upgrade is none: the relay counts its messages."""
    if exchange.transport == "websocket":
        return True
    ends = MODEL_CALLS.get(exchange.route.api)
    if ends is None or exchange.method != "POST":
        return False
    return exchange.route.target.partition("?")[0].endswith(ends)


def record(recorder: capture.Recorder, exchange: Exchange, forwarded: bytes) -> None:
    """Take the request for the capture (non-blocking; it redacts credentials in the headers
    and the query): the body as received and as forwarded. Its line is queued when the
    exchange is counted, with the tool calls of its answer."""
    path, _, query = exchange.route.target.partition("?")
    exchange.capture = recorder.hold(
        method=exchange.method,
        path=path,
        query=query,
        upstream=exchange.route.upstream.name,
        headers=exchange.headers or {},
        body=exchange.body,
        forwarded=forwarded,
    )


class Ledger:
    """Counts finished exchanges into Stats: pipeline and request together (so the totals
    always agree), catalogue tokens when counted (off the loop, on one owned thread), usage,
    and the request's one log line.

    Finished exchanges are counted in batches (COUNT_AFTER), synchronously (a client that
    hangs up at the last byte cannot interrupt it); a snapshot of the stats counts those
    still waiting first, so a request sent after a response reached its client sees that
    response counted.
    """

    def __init__(
        self,
        stats: Stats,
        loop: asyncio.AbstractEventLoop,
        pending: set[asyncio.Future[Any]],
        log_lines: logs.BatchedLines | None = None,
        *,
        drift_sessions: int = DRIFT_MAX_SESSIONS,
        drift_kept_bytes: int = drift.KEPT_BYTES,
        drift_store: drift.Sessions | None = None,
    ) -> None:
        self.stats = stats
        self._loop = loop
        # Token counts still running, awaited by `drain`: the catalogues' (at most
        # MAX_COUNTING) and the tool ledger's per-tool ones (_tool_counts, as many at most).
        self.pending = pending
        self._log_lines = log_lines  # serving: each line goes straight into the batch
        self._finished: list[Exchange] = []
        self._counting: asyncio.TimerHandle | None = None  # set while exchanges wait
        stats.settle_with(self.count_finished)
        # One thread tokenizes: new catalogues are rare in real sessions, and under a flood
        # of them a bounded backlog (MAX_COUNTING) keeps memory flat.
        self._counter = ThreadPoolExecutor(1, thread_name_prefix="toolslim-tokens")
        # The last pipeline summary logged and the runs it says: a session's memo hits
        # report the very same runs, so the text is made once per catalogue.
        self._summary: tuple[tuple[ComponentRun, ...], str] = ((), "-")
        self.drift = drift.Tracker(drift_sessions, drift_kept_bytes, sessions=drift_store)
        stats.track_drift_sessions(self.drift.__len__)
        self._warned: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        self._tool_counts: set[asyncio.Future[ToolFacts]] = set()  # the ledger's, per catalogue
        self.lint = health.Linter(stats.health)

    def start_counting(self, exchange: Exchange, report: RunReport) -> None:
        """Find the request's catalogue tokens: at once when counted before, else on the
        owned thread (unless too many are queued), recorded when done."""
        exchange.counted = cached_tokens(report)
        if exchange.counted is not None:
            return
        if len(self.pending) - len(self._tool_counts) >= MAX_COUNTING:
            self.stats.record_tokens_skipped()
            return
        future = self._loop.run_in_executor(
            self._counter,
            _count,
            dataclasses.replace(report, pieces=()),  # the body is not needed there
        )
        self.pending.add(future)
        exchange.tokens = future

    def pipeline_ran(self, exchange: Exchange, report: RunReport) -> None:
        """What the transform step owes the ledger once the pipeline ran on a request: its
        report, its catalogues linted, which components failed (by the error's type only: a
        message may quote the body), and its catalogue tokens being counted."""
        exchange.report = report
        if report.catalogues:  # before the request is sent: /stats has it before the answer
            try:
                exchange.findings = self.lint.request(
                    exchange.route.api, report.catalogues, exchange.method, exchange.path
                )
            except Exception:  # lint only observes: a bug in it must not cost the request
                log.exception("toolslim lint failed on %s %s", exchange.method, exchange.path)
        for component, message in report.errors:
            kind = message.partition(":")[0]
            log.warning("component %s failed on %s: %s", component, exchange.path, kind)
        if report.applied:
            self.start_counting(exchange, report)

    def finish(self, exchange: Exchange) -> None:
        """Count the exchange with the others of its batch (see COUNT_AFTER)."""
        self._finished.append(exchange)
        if self._counting is None:
            self._counting = self._loop.call_later(COUNT_AFTER, self.count_finished)

    def count_finished(self) -> None:
        """Count every finished exchange not counted yet."""
        if self._counting is not None:
            self._counting.cancel()
            self._counting = None
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
        if exchange.report is None:  # a guard: a flow and a message both fill one in
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
        model_call = is_model_call(exchange)
        owed = observer is not None and model_call  # a response that should have said its usage
        usage = observer.finish() if observer is not None else None
        if exchange.capture is not None:  # the request's capture line, with its answer's calls
            calls = observer.calls if observer is not None and model_call else None
            exchange.capture.answered(calls)
        catalogue = None
        in_prompt = exchange.report.catalogues or exchange.continued
        offered = in_prompt and model_call and 200 <= exchange.status < 300  # not an error
        # What names the session, read from the body once for drift and the tool ledger.
        key = b""
        if exchange.report.catalogues or offered:
            route = exchange.route
            key = drift.session_key(route.target, exchange.headers, exchange.body, route.api)
        if exchange.report.catalogues:
            miss = observer.cache_miss if observer is not None else None
            catalogue = self._decide(
                exchange, exchange.report.catalogues, usage, model_call, key, miss
            )
        if offered:
            self._offered(exchange, in_prompt, usage, observer, key)
        if exchange.tokens is None:
            self._record_tokens(exchange.counted, usage, owed, catalogue)
        else:
            exchange.tokens.add_done_callback(
                lambda done: self._tokens_counted(done, usage, owed, catalogue)
            )
        if exchange.sent:
            stats.observe_overhead(exchange.overhead)
        if exchange.status == 400 and exchange.report.catalogues:
            self._rejected(exchange, exchange.report.catalogues)
        if log.isEnabledFor(logging.INFO):
            self._log(exchange, exchange.report)

    def _decide(
        self,
        exchange: Exchange,
        catalogues: Sequence[CatalogueFacts],
        usage: Usage | None,
        model_call: bool,
        key: bytes,
        miss: tuple[str, int] | None = None,
    ) -> Catalogue:
        """Drift in the request's session and the advisories it carries, from the facts of its
        catalogues (made once per catalogue) and a few headers: memo-hit cost. A model call
        is counted for its catalogue (a token count reads no cache); its tokens are recorded
        with the (api, identity) returned."""
        stats, tracker, api = self.stats, self.drift, exchange.route.api
        identity = drift.identity_of(catalogues)
        if model_call:
            stats.record_catalogue(api, identity, catalogues)
        session = tracker.session_named(key)
        change = tracker.observe(session, api, catalogues, usage, stats.clock())
        if change is not None:
            if miss is not None:
                change = dataclasses.replace(change, cache_miss_reason=miss[0])
            stats.record_catalogue_change(change)
            if log.isEnabledFor(logging.INFO):
                self._info(_change_line(change))
        for name, size in advice.advise(api, exchange.headers, exchange.body, catalogues):
            stats.record_advice(name, size)
            self._warn_once(name, identity, exchange)
        return api, identity

    def _offered(
        self,
        exchange: Exchange,
        catalogues: Sequence[CatalogueFacts],
        usage: Usage | None,
        observer: UsageObserver | UsageReader | None,
        key: bytes,
    ) -> None:
        """The tool ledger's count of one model call: the tools it offered, the calls its
        answer made; a catalogue met for the first time has its tools counted off the loop.
        `key` names its session (drift.session_key)."""
        headers, target, body = exchange.headers or {}, exchange.route.target, exchange.body
        new = self.stats.tools.record(
            client=who.client_of(headers.get("user-agent")),
            api=exchange.route.api,
            model=who.model_of(target, body),
            session=who.session_named(key),
            catalogues=catalogues,
            usage=usage,
            calls=observer.calls if observer is not None else (),
            cache_miss=observer.cache_miss if observer is not None else None,
        )
        for facts in new:
            if len(self._tool_counts) >= MAX_COUNTING:  # a flood of new catalogues: later
                self.stats.tools.forget(facts.digest)
                continue
            future = self._loop.run_in_executor(
                self._counter, tool_facts, facts.forwarded, tokens.count_tokens
            )
            self._tool_counts.add(future)
            self.pending.add(future)  # requests.tokens_pending: `tools` catches up at 0
            future.add_done_callback(functools.partial(self._tools_counted, facts.digest))

    def _tools_counted(self, digest: bytes, done: asyncio.Future[ToolFacts]) -> None:
        self._tool_counts.discard(done)
        self.pending.discard(done)
        if done.cancelled() or done.exception() is not None:
            self.stats.tools.forget(digest)
            return
        self.stats.tools.known(digest, done.result())

    def _rejected(self, exchange: Exchange, catalogues: Sequence[CatalogueFacts]) -> None:
        """An upstream 400 to a request with a catalogue: explained by lint, or not."""
        names = [name for facts in catalogues for name in facts.tools.names]
        where = f"{exchange.method} {exchange.path}"
        try:
            self.lint.answered(
                exchange.route.api,
                exchange.status,
                exchange.findings,
                exchange.answer,
                exchange.answer_encoding,
                names,
                where,
            )
        except Exception:  # the rest of the exchange is still counted
            log.exception("toolslim lint failed to read the 400 to %s", where)

    def _warn_once(self, name: advice.Advice, catalogue: bytes, exchange: Exchange) -> None:
        """One WARNING per advisory and catalogue (of the last WARNED pairs warned about)."""
        key = (name, catalogue)
        if key in self._warned:
            return
        self._warned[key] = None
        if len(self._warned) > WARNED:
            self._warned.popitem(last=False)
        log.warning("advice %s (%s %s): %s", name, exchange.method, exchange.path, advice.FIX[name])

    async def drain(self, timeout: float) -> None:
        """Let the token counts still running land in the stats, then stop the thread."""
        self.count_finished()
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=timeout)
        self._counter.shutdown(wait=False, cancel_futures=True)

    def _tokens_counted(
        self,
        done: asyncio.Future[dict[str, tuple[int, int]]],
        usage: Usage | None,
        owed: bool,
        catalogue: Catalogue | None,
    ) -> None:
        self.pending.discard(done)
        counted = None
        if not done.cancelled():
            if (exc := done.exception()) is not None:
                log.warning("token counting failed: %s", logs.describe(exc))
            else:
                counted = done.result()
        self._record_tokens(counted, usage, owed, catalogue)

    def _record_tokens(
        self,
        counted: Tokens | None,
        usage: Usage | None,
        owed: bool,
        catalogue: Catalogue | None,
    ) -> None:
        """The catalogue tokens of one request, then its usage (whose savings need them): as
        read, or unavailable if the response reached the client from a model call."""
        saved = self.stats.record_tokens(counted, catalogue) if counted else 0
        if usage is not None or owed:
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
        if exchange.cut_by_shutdown:
            message += " shutdown"
        elif exchange.disconnected:
            message += " client_disconnect"
        self._info(message)

    def _info(self, message: str) -> None:
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


def _count(report: RunReport) -> dict[str, tuple[int, int]]:
    """`count_tokens` with the offline tokenizer, on the owned thread."""
    return count_tokens(report, tokens.count_tokens)


def _change_line(change: drift.Change) -> str:
    """A catalogue change's one INFO line; tool and server names are the client's data, so
    they are written as JSON strings (nothing in them can start a new line)."""
    return (
        f"catalogue change session={change.session} api={change.api} kind={change.kind}"
        f" tools={orjson.dumps(change.tools).decode()}"
        f" servers={orjson.dumps(change.servers).decode()}"
        f" cache_write_tokens_after={change.cache_write_tokens_after}"
    )


def _outcome(run: ComponentRun) -> str:
    if run.outcome == "applied":
        return f"{run.component}=applied/-{run.bytes_saved}B"
    return f"{run.component}={run.outcome}/{run.reason}"
