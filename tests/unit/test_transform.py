"""transform: the pipeline's rewrite shared by every transport, the body-size limits, and what
is too heavy for the event loop (it is run again on the worker thread, with the same result)."""

from __future__ import annotations

import base64
import gzip
import json
import random

import pytest

from proxy_harness import ANTHROPIC, dumps
from toolslim.core.pipeline import Pipeline
from toolslim.proxy.transform import ON_LOOP_BYTES, ON_LOOP_CODED, rewrite

LIMIT = 32 * 1024 * 1024


def body_of(size: int, text: str = "x") -> bytes:
    """An Anthropic body of about `size` bytes whose catalogue the compactor changes."""
    padded = dict(ANTHROPIC, messages=[{"role": "user", "content": text * size}])
    return dumps(padded)


def incompressible(size: int) -> bytes:
    return body_of(1, base64.b64encode(random.Random(size).randbytes(size * 3 // 4)).decode())


def test_a_small_body_is_transformed_on_the_loop_as_it_is_elsewhere() -> None:
    body = body_of(1000)
    on_loop = rewrite(body, "", Pipeline(["toolschema"]), LIMIT, "anthropic", on_loop=True)
    elsewhere = rewrite(body, "", Pipeline(["toolschema"]), LIMIT, "anthropic")
    assert on_loop is not None and elsewhere is not None
    assert on_loop[0].applied and b"".join(on_loop[1]) == b"".join(elsewhere[1])


@pytest.mark.parametrize(
    ("body", "coding"),
    [
        (body_of(ON_LOOP_BYTES + 1), ""),  # large as sent
        (gzip.compress(incompressible(ON_LOOP_CODED * 2)), "gzip"),  # large as sent, coded
        (gzip.compress(body_of(ON_LOOP_BYTES * 2)), "gzip"),  # small, but inflates past it
        (b"".join(gzip.compress(b" ") for _ in range(5000)) + gzip.compress(body_of(10)), "gzip"),
    ],
    ids=["large", "large coded", "inflates past the loop's share", "many gzip members"],
)
def test_heavy_work_is_left_for_the_worker_thread_which_gives_the_same_result(
    body: bytes, coding: str
) -> None:
    pipeline = Pipeline(["toolschema"])
    assert rewrite(body, coding, pipeline, LIMIT, "anthropic", on_loop=True) is None
    done = rewrite(body, coding, pipeline, LIMIT, "anthropic")
    assert done is not None
    report, pieces, decoded = done
    assert report.applied  # compacted, and forwarded decoded without its Content-Encoding
    assert decoded
    sent_body = gzip.decompress(body) if coding else body
    assert json.loads(b"".join(pieces))["messages"] == json.loads(sent_body)["messages"]


@pytest.mark.parametrize("coding", ["", "gzip"])
def test_a_body_over_max_catalogue_bytes_is_forwarded_as_sent_skipped_too_large(
    coding: str,
) -> None:
    plain = body_of(5000)
    body = gzip.compress(plain) if coding else plain
    done = rewrite(body, coding, Pipeline(["toolschema"]), LIMIT, "anthropic", len(plain) - 1)
    assert done is not None
    report, pieces, decoded = done
    assert pieces == (body,) and not decoded
    assert [(run.outcome, run.reason) for run in report.runs] == [("skipped", "too_large")]


def test_a_large_body_whose_catalogue_is_known_is_a_memo_hit_on_the_loop() -> None:
    pipeline = Pipeline(["toolschema"])
    pipeline.run(body_of(100), "anthropic")  # the session's catalogue, met in a small body
    large = body_of(ON_LOOP_BYTES + 1)
    on_loop = rewrite(large, "", pipeline, LIMIT, "anthropic", on_loop=True)
    elsewhere = rewrite(large, "", Pipeline(["toolschema"]), LIMIT, "anthropic")
    assert on_loop is not None and elsewhere is not None
    assert on_loop.report.memo_hits == 1 and on_loop.decoded
    assert b"".join(on_loop.pieces) == b"".join(elsewhere.pieces)
    other = body_of(ON_LOOP_BYTES + 1, "z").replace(b'"read_file"', b'"read_files"')
    assert rewrite(other, "", pipeline, LIMIT, "anthropic", on_loop=True) is None  # new: heavy


def test_the_loop_learns_the_catalogues_the_worker_thread_met() -> None:
    worker, loop = Pipeline(["toolschema"]), Pipeline(["toolschema"])
    worker.tell()
    body = body_of(100)
    assert loop.run_hit(body, "anthropic") is None
    expected = worker.run(body, "anthropic")
    loop.learn(worker)
    hit = loop.run_hit(body, "anthropic")
    assert hit is not None and hit.memo_hits == 1
    assert hit.body == expected.body == loop.run(body, "anthropic").body
    assert len(loop.memo) == 1
    loop.learn(worker)  # nothing new since
    assert len(loop.memo) == 1
