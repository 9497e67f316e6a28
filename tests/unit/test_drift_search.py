"""drift's search for a session member from the body's end agrees with the plain forward
search on any bytes: the same string, or none."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolslim.observe.drift import member_string, member_string_forward

MEMBER = b'"user_id"'
PIECES = [
    MEMBER,
    b'"user_id',
    b'user_id"',
    b":",
    b" ",
    b'"a"',
    b'"b\\"c"',
    b'"',
    b"\\",
    b"{",
    b"}",
    b"x",
    b'"user_id""user_id"',
]


@given(st.lists(st.sampled_from(PIECES), max_size=40), st.integers(0, 200))
def test_the_search_from_the_end_finds_what_the_forward_search_finds(
    pieces: list[bytes], start: int
) -> None:
    body = b"".join(pieces)
    assert member_string(body, MEMBER, start) == member_string_forward(body, MEMBER, start)


@given(st.binary(max_size=300), st.integers(0, 300))
def test_both_searches_agree_on_arbitrary_bytes(body: bytes, start: int) -> None:
    for member in (MEMBER, b'""', b'"a"'):
        assert member_string(body, member, start) == member_string_forward(body, member, start)


def test_the_first_member_with_a_string_value_is_taken_not_the_last() -> None:
    body = b'{"tools":[{"user_id":{"type":"string"}}],"metadata":{"user_id":"s1"},"user_id":"s2"}'
    assert member_string(body, MEMBER, 0) == b'"s1"'
    assert member_string(body, MEMBER, 0) == member_string_forward(body, MEMBER, 0)


def test_overlapping_occurrences_are_each_tried() -> None:
    body = b'""": "v"'
    assert member_string(body, b'""', 0) == member_string_forward(body, b'""', 0) == b'"v"'
