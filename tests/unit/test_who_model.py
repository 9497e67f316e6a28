"""The tool ledger reads a request's model as its `model` member pattern reads it, whether the
body starts the compact way SDKs write it (read by byte search) or any other way."""

from __future__ import annotations

import re

import orjson
from hypothesis import given
from hypothesis import strategies as st

from toolslim.observe.ledger import who

# The pattern as documented: `"model"`, a colon, a JSON string of 1 to 200 characters.
MODEL = re.compile(rb'"model"\s*:\s*("(?:[^"\\]|\\.){1,200}")')
PIECES = [b'{"model":"', b'"model"', b":", b" ", b'"', b"\\", b"\\u00e9", b"claude", b"x" * 90]


def plain(body: bytes) -> str | None:
    match = MODEL.search(body, 0, 1024) or MODEL.search(body, max(0, len(body) - 16 * 1024))
    if match is None:
        return None
    try:
        model = orjson.loads(match.group(1))
    except orjson.JSONDecodeError:
        return None
    return model if isinstance(model, str) and model else None


@given(st.lists(st.sampled_from(PIECES), max_size=12), st.binary(max_size=40))
def test_the_model_is_what_the_pattern_reads(pieces: list[bytes], rest: bytes) -> None:
    body = b'{"model":"' + b"".join(pieces) + rest
    assert who.model_of("/v1/messages", body) == plain(body)
    assert who.model_of("/v1/messages", body[1:]) == plain(body[1:])


def test_a_compact_body_names_its_model() -> None:
    body = b'{"model":"claude-sonnet-4-5","messages":[]}'
    assert who.model_of("/v1/messages?beta=true", body) == "claude-sonnet-4-5"


def test_names_of_200_bytes_are_read_and_longer_ones_are_not() -> None:
    for size, expected in ((200, "m" * 200), (201, None)):
        body = b'{"model":"' + b"m" * size + b'","messages":[]}'
        assert who.model_of("/v1/messages", body) == expected == plain(body)


def test_an_escaped_name_is_decoded() -> None:
    body = b'{"model":"caf\\u00e9","messages":[]}'
    assert who.model_of("/v1/messages", body) == "caf\u00e9" == plain(body)
