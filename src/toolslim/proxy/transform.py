"""The transform step every transport calls on a request body: the pipeline's rewrite (on the
event loop when light, else on the worker thread), then what is owed to the ledger (its report,
lint, component failures logged, catalogue tokens counted) and the capture.

`rewrite` is the pure part: decode per the Content-Encoding, run the pipeline, choose the
pieces to forward. It changes nothing it is given (the caller drops the Content-Encoding of
its own copy of the headers when the body goes decoded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from toolslim.config.settings import DEFAULTS
from toolslim.core.catalog import Api
from toolslim.core.entry import SkipReason
from toolslim.core.envelope import Piece, joined
from toolslim.core.pipeline import Pipeline, RunReport
from toolslim.observe import capture
from toolslim.observe.exchange import Exchange, Ledger, record
from toolslim.proxy.offload import Offload
from toolslim.wire import codings
from toolslim.wire.routing import signed

KiB: Final = 1024
MiB: Final = 1024 * KiB
# The largest body the event loop decodes and walks itself (its cost grows with its size: a
# full parse, bench/compact_bench.py). A larger one, or a compressed one larger than
# ON_LOOP_CODED (tiny gzip members cost far more per byte to decode), goes to the worker
# thread (offload.Offload), unless its catalogue is a memo hit: found by comparing bytes.
ON_LOOP_BYTES: Final = 1 * MiB
ON_LOOP_CODED: Final = 64 * KiB
# The largest decoded body the pipeline looks at (the `max_catalogue_bytes` setting): its
# parse is one call that holds the interpreter, on whatever thread.
MAX_CATALOGUE_BYTES: Final[int] = DEFAULTS["max_catalogue_bytes"]
# A body the buffer budget or the worker thread could not take: forwarded untouched.
BUSY: Final[SkipReason] = "busy"


class Rewritten(NamedTuple):
    """The pipeline's report on a body, the pieces to forward, and whether they go decoded
    (then without the Content-Encoding the body came with)."""

    report: RunReport
    pieces: tuple[Piece, ...]
    decoded: bool = False


def rewrite(
    body: bytes,
    coding: str,
    pipeline: Pipeline,
    limit: int,
    api: Api,
    max_catalogue: int | None = None,
    on_loop: bool = False,
) -> Rewritten | None:
    """The pipeline's rewrite of a body sent with Content-Encoding `coding` ("" for none).

    A changed body goes decoded; an unchanged one goes as the client sent it. A decoded body
    over `limit` or `max_catalogue` bytes is skipped `too_large`. With `on_loop`, None instead
    of work too heavy for the event loop (see ON_LOOP_BYTES; a large body whose catalogue is
    a memo hit is not): the caller runs it again elsewhere without `on_loop`.
    """
    if not pipeline.components:  # nothing would look at it: not even decoded
        return Rewritten(pipeline.run(body, api), (body,))
    if not coding and max_catalogue is not None and len(body) > max_catalogue:
        return Rewritten(pipeline.skip(body, "too_large"), (body,))
    if on_loop and len(body) > (ON_LOOP_CODED if coding else ON_LOOP_BYTES):
        # A known catalogue is found by comparing bytes, at any size: only the rest is heavy.
        hit = None if coding else pipeline.run_hit(body, api)
        return None if hit is None else _rewritten(body, body, hit)
    decoded = body
    if coding:
        cap = min(limit, ON_LOOP_BYTES) if on_loop else limit
        try:
            decoded = codings.decode(coding, body, cap)
        except codings.TooLarge:
            if cap < limit:
                return None  # may fit the limit: decode it off the loop
            return Rewritten(pipeline.skip(body, "too_large"), (body,))
        except (codings.Unsupported, codings.Undecodable):
            return Rewritten(pipeline.skip(body, "undecodable"), (body,))
    if max_catalogue is not None and len(decoded) > max_catalogue:
        return Rewritten(pipeline.skip(body, "too_large"), (body,))
    report = pipeline.run(decoded, api)  # never raises: the runner fails open itself
    if report.memo_misses:  # a new catalogue: lint it here, off the loop when this is
        for facts in report.catalogues:  # (health.Linter counts them; a memo hit's it knows)
            facts.findings(api)
    return _rewritten(body, decoded, report)


def _rewritten(body: bytes, decoded: bytes, report: RunReport) -> Rewritten:
    """An unchanged body goes as the client sent it, a changed one decoded."""
    if not report.changed(decoded):
        return Rewritten(report, (body,))
    return Rewritten(report, report.pieces, decoded=True)


@dataclass(frozen=True, slots=True)
class Transform:
    """The transform step, made once the app runs and shared by HTTP and WebSocket."""

    pipeline: Pipeline  # the event loop's
    ledger: Ledger
    recorder: capture.Recorder | None  # None records nothing
    limit: int  # max_body_bytes
    max_catalogue: int = MAX_CATALOGUE_BYTES
    offload: Offload | None = None  # None rewrites every body on the loop

    async def __call__(
        self, exchange: Exchange, body: bytes, headers: Mapping[str, str] | None = None
    ) -> Rewritten:
        """Rewrite a request's whole body (`headers`: those it came with, if any), and fill
        its record in: the report, the bytes either way, its catalogue tokens being counted,
        its capture queued. Untouched, skipped busy, when the worker thread is full."""
        if headers is not None and signed(headers):
            done = Rewritten(self.pipeline.skip(body, "signed"), (body,))
        else:
            coding = "" if headers is None else headers.get("Content-Encoding", "")
            done = await self._rewrite(body, coding, exchange.route.api)
        exchange.body = body
        self.ledger.pipeline_ran(exchange, done.report)  # tokens counted off the loop meanwhile
        exchange.bytes_in, exchange.bytes_out = len(body), sum(map(len, done.pieces))
        if self.recorder is not None:
            record(self.recorder, exchange, joined(done.pieces))
        return done

    async def _rewrite(self, body: bytes, coding: str, api: Api) -> Rewritten:
        """On the loop (with the loop's pipeline) when light, else on the worker thread (with
        its own). Without a worker thread (an app served in-process by tests) everything runs
        on the loop."""
        limit, most, offload = self.limit, self.max_catalogue, self.offload
        if offload is not None and len(body) > ON_LOOP_BYTES:
            # What the worker met, known on the loop: the memo hit of a large body needs it.
            self.pipeline.learn(offload.pipeline)
        done = rewrite(body, coding, self.pipeline, limit, api, most, on_loop=offload is not None)
        if done is None and offload is not None:
            done = await offload.run(rewrite, body, coding, offload.pipeline, limit, api, most)
        return done if done is not None else Rewritten(self.pipeline.skip(body, BUSY), (body,))
