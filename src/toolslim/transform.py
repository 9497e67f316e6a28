"""PURE. The pipeline call shared by every transport: decode the body per its Content-Encoding,
run the pipeline, and choose the pieces to forward.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from multidict import CIMultiDict

from toolslim import codings
from toolslim.catalog import Api
from toolslim.envelope import Piece
from toolslim.pipeline import Pipeline, RunReport


def transform(
    body: bytes, headers: CIMultiDict[str], pipeline: Pipeline, limit: int, api: Api
) -> tuple[RunReport, tuple[Piece, ...]]:
    """The pipeline's report on the (decoded) body, and the pieces of the body to forward.

    A changed body goes decoded, without its Content-Encoding (removed from `headers`); an
    unchanged one goes as the client sent it.
    """
    coding = headers.get("Content-Encoding", "")
    decoded = body
    if coding:
        try:
            decoded = codings.decode(coding, body, limit)
        except codings.TooLarge:
            return pipeline.skip(body, "too_large"), (body,)
        except (codings.Unsupported, codings.Undecodable):
            return pipeline.skip(body, "undecodable"), (body,)
    return message(decoded, body, headers, pipeline, api)


def message(
    decoded: bytes, body: bytes, headers: CIMultiDict[str] | None, pipeline: Pipeline, api: Api
) -> tuple[RunReport, tuple[Piece, ...]]:
    """Run the pipeline on a decoded body; `body` (as received) goes on when nothing changed."""
    report = pipeline.run(decoded, api)  # never raises: the runner fails open itself
    if not report.changed(decoded):
        return report, (body,)
    if headers is not None:
        headers.popall("Content-Encoding", None)
    return report, report.pieces
