"""drift reads a session member's value with one pattern: JSON whitespace, a colon, whitespace
and a whole JSON string. It finds what the plain reading finds (skip the whitespace byte by
byte, check the colon, match the string) on any bytes, first place or last."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from toolslim.observe.drift import last_member_string, member_string, member_string_forward

MEMBER = b'"user_id"'
WS = b" \t\r\n"
STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
PIECES = [MEMBER, b":", b" ", b"\t", b"\r\n", b"\x0c", b'"a"', b'"b\\"c"', b'"', b"\\", b"x", b"1"]


def value_after(body: bytes, at: int) -> bytes | None:
    while at < len(body) and body[at] in WS:
        at += 1
    if body[at : at + 1] != b":":
        return None
    at += 1
    while at < len(body) and body[at] in WS:
        at += 1
    match = STRING.match(body, at)
    return None if match is None else match.group()


def places(body: bytes, start: int) -> list[int]:
    return [at for at in range(start, len(body)) if body.startswith(MEMBER, at)]


def plain_first(body: bytes, start: int) -> bytes | None:
    found = (value_after(body, at + len(MEMBER)) for at in places(body, start))
    return next((value for value in found if value is not None), None)


def plain_last(body: bytes, start: int) -> bytes | None:
    found = (value_after(body, at + len(MEMBER)) for at in reversed(places(body, start)))
    return next((value for value in found if value is not None), None)


@given(st.lists(st.sampled_from(PIECES), max_size=30), st.integers(0, 100))
def test_the_first_and_last_values_are_those_of_the_plain_reading(
    pieces: list[bytes], start: int
) -> None:
    body = b"".join(pieces)
    assert member_string_forward(body, MEMBER, start) == plain_first(body, start)
    assert member_string(body, MEMBER, start) == plain_first(body, start)
    assert last_member_string(body, MEMBER, start) == plain_last(body, start)


def test_whitespace_of_every_json_kind_may_surround_the_colon() -> None:
    body = b'{"user_id" \t\r\n: \n\t"v"}'
    assert member_string(body, MEMBER, 0) == last_member_string(body, MEMBER, 0) == b'"v"'


def test_a_form_feed_is_no_json_whitespace() -> None:
    assert member_string(b'{"user_id"\x0c: "v"}', MEMBER, 0) is None
