"""PURE. The pipeline call shared by every transport: decode the body per its Content-Encoding,
run the pipeline, and choose the pieces to forward; and what is too heavy for the event loop.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from typing import Final

from multidict import CIMultiDict

from toolslim.config.settings import DEFAULTS
from toolslim.core.catalog import Api
from toolslim.core.entry import SkipReason
from toolslim.core.envelope import Piece
from toolslim.core.pipeline import Pipeline, RunReport
from toolslim.wire import codings

KiB: Final = 1024
MiB: Final = 1024 * KiB
# The largest body the event loop decodes and walks itself (its cost grows with its size: a
# full parse, bench/compact_bench.py). A larger one, or a compressed one larger than
# ON_LOOP_CODED (tiny gzip members cost far more per byte to decode), goes to the worker
# thread (offload.Offload).
ON_LOOP_BYTES: Final = 1 * MiB
ON_LOOP_CODED: Final = 64 * KiB
# The largest decoded body the pipeline looks at (the `max_catalogue_bytes` setting): its
# parse is one call that holds the interpreter, on whatever thread.
MAX_CATALOGUE_BYTES: Final[int] = DEFAULTS["max_catalogue_bytes"]
# A body the buffer budget or the worker thread could not take: forwarded untouched.
BUSY: Final[SkipReason] = "busy"

Transformed = tuple[RunReport, tuple[Piece, ...]]


def transform(
    body: bytes,
    headers: CIMultiDict[str],
    pipeline: Pipeline,
    limit: int,
    api: Api,
    max_catalogue: int | None = None,
    on_loop: bool = False,
) -> Transformed | None:
    """The pipeline's report on the (decoded) body, and the pieces of the body to forward.

    A changed body goes decoded, without its Content-Encoding (removed from `headers`); an
    unchanged one goes as the client sent it. A decoded body over `limit` or `max_catalogue`
    bytes is skipped `too_large`. With `on_loop`, None instead of work too heavy for the event
    loop (see ON_LOOP_BYTES): the caller runs it again elsewhere without `on_loop`.
    """
    if not pipeline.components:  # nothing would look at it: not even decoded
        return pipeline.run(body, api), (body,)
    coding = headers.get("Content-Encoding", "")
    if not coding and max_catalogue is not None and len(body) > max_catalogue:
        return pipeline.skip(body, "too_large"), (body,)
    if on_loop and len(body) > (ON_LOOP_CODED if coding else ON_LOOP_BYTES):
        return None
    decoded = body
    if coding:
        cap = min(limit, ON_LOOP_BYTES) if on_loop else limit
        try:
            decoded = codings.decode(coding, body, cap)
        except codings.TooLarge:
            if cap < limit:
                return None  # may fit the limit: decode it off the loop
            return pipeline.skip(body, "too_large"), (body,)
        except (codings.Unsupported, codings.Undecodable):
            return pipeline.skip(body, "undecodable"), (body,)
    if max_catalogue is not None and len(decoded) > max_catalogue:
        return pipeline.skip(body, "too_large"), (body,)
    return _message(decoded, body, headers, pipeline, api)


def _message(
    decoded: bytes, body: bytes, headers: CIMultiDict[str] | None, pipeline: Pipeline, api: Api
) -> Transformed:
    """Run the pipeline on a decoded body; `body` (as received) goes on when nothing changed."""
    report = pipeline.run(decoded, api)  # never raises: the runner fails open itself
    if report.memo_misses:  # a new catalogue: lint it here, off the loop when this is
        for facts in report.catalogues:  # (health.Linter counts them; a memo hit's it knows)
            facts.findings(api)
    if not report.changed(decoded):
        return report, (body,)
    if headers is not None:
        headers.popall("Content-Encoding", None)
    return report, report.pieces
