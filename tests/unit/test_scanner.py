"""Tests for toolslim.core.scanner: the rule that finds a body's catalogue without parsing the body
agrees with a JSON parser on JSON bodies, and the memo hit agrees with the rule on every body,
valid or broken, whatever the memo holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_envelope import CATALOGUE, COMPACTED, STRIP, anthropic, bodies, cold

from toolslim.core.entry import Entry
from toolslim.core.envelope import compact
from toolslim.core.memo import Memo, memo_hit
from toolslim.core.scanner import (
    CANDIDATES,
    catalogue_member,
    closes_body,
    names_additional_tools,
    skip_value,
    tokens_after,
)

# The rule against a JSON parser, on JSON bodies


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_the_rule_finds_the_last_top_level_tools_member_a_parser_reads(
    case: tuple[bytes, int, int, list[Any]],
) -> None:
    body, start, end, _ = case
    member = catalogue_member(body)
    assert member is not None
    _, value_start, value_end = member
    assert (value_start, value_end) == (start, end)
    assert orjson.loads(body[value_start:value_end]) == orjson.loads(body)["tools"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages":[{"tools":[1]}]}',  # nested only
        b'{"x":{"tools":[1]},"y":1}',
        b'[{"tools":[1]}]',  # a body that is an array
        b'{"a":"\\"tools\\":[1]}"}',  # inside a string
        b'{"tools":[1],"tool\\u0073":[2]}',  # a later member spelled with an escape
        b'{"tools":[1]',  # truncated
        b'{"tools":[1]} x',  # trailing garbage
        b'{"tools":[1],}',  # a trailing comma
        b'{"tools"',
        b'"tools"',
        b"",
    ],
)
def test_the_rule_finds_no_catalogue_where_a_parser_reads_no_top_level_tools(body: bytes) -> None:
    assert catalogue_member(body) is None


def test_of_two_top_level_tools_members_the_rule_takes_the_last() -> None:
    body = b'{"tools":[1],"model":"m","tools":[2]}'
    assert catalogue_member(body) == (25, 33, 36)


def test_the_rule_looks_at_a_bounded_number_of_tokens_from_the_end() -> None:
    def with_tokens(count: int) -> bytes:
        strings = b",".join([b'"tools"'] * count)
        return anthropic()[:-1] + b',"x":[' + strings + b"]}"

    assert catalogue_member(with_tokens(CANDIDATES - 1)) is not None
    assert catalogue_member(with_tokens(CANDIDATES)) is None
    assert tokens_after(with_tokens(CANDIDATES + 5), 0)[0] == CANDIDATES
    for count in (CANDIDATES - 1, CANDIDATES):  # the memo hit keeps to the same bound
        body = with_tokens(count)
        memo = Memo[Entry, Any](8)
        compact(anthropic(), memo, STRIP)
        assert compact(body, memo, STRIP).body == cold(body).body


@pytest.mark.parametrize(("items", "compacted"), [(2, True), (8, False)])
def test_the_rule_looks_at_tokens_within_a_budget_of_bytes_after_them(
    items: int, compacted: bool
) -> None:
    """Tokens far from the end cost a parse of all that follows them each: past two parses of
    the body (and 1 MiB), the rule stops looking, with a warm memo as with an empty one."""
    item = b'{"tools":1,"pad":"' + b"p" * 200_000 + b'"}'
    body = b'{"tools":' + CATALOGUE + b',"messages":[' + b",".join([item] * items) + b"]}"
    memo = Memo[Entry, Any](8)
    compact(anthropic(), memo, STRIP)
    warm, empty = compact(body, memo, STRIP), cold(body)
    assert (warm.body, warm.reason) == (empty.body, empty.reason)
    assert (catalogue_member(body) is not None) is compacted
    assert (empty.body != body) is compacted


def test_skip_value_ends_where_a_parser_ends_a_value() -> None:
    body = b'[{"a":"]\\"}","b":[1,{"c":null}]},-1.5e3,"\\\\"] ,"x":1}'
    assert skip_value(body, 0) == body.index(b" ,")
    assert skip_value(b'"a\\"b",', 0) == 6
    assert skip_value(b"123,", 0) == 3
    with pytest.raises(ValueError):
        skip_value(b"[1,2", 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies(), st.integers(0, 40), st.sampled_from([b"", b"\xff", b"\x01", b"\\x", b"]", b"NaN"]))
def test_skip_value_ends_a_value_where_the_plain_scan_does_with_or_without_the_decoder(
    case: tuple[bytes, int, int, list[Any]], cut: int, noise: bytes
) -> None:
    body, start, end, _ = case
    at = min(start + cut, end - 1)
    broken = body[:at] + noise + body[at:]  # perhaps no longer JSON inside the catalogue
    for candidate in (body, broken):
        try:
            plain: int | str = skip_value(candidate, start)
        except ValueError as exc:
            plain = str(exc)
        try:
            fast: int | str = skip_value(candidate, start, candidate.decode("latin-1"))
        except ValueError as exc:
            fast = str(exc)
        assert fast == plain
    assert skip_value(body, start, body.decode("latin-1")) == end


@pytest.mark.parametrize(
    ("rest", "closes"),
    [
        (b"}", True),
        (b" }\n", True),
        (b',"stream":true}', True),
        (b',"stream":true,"stream":false}', True),  # duplicate keys: JSON, the last wins
        (b',"tools":[]}', False),
        (b',"tool\\u0073":[]}', False),
        (b"}}", False),
        (b",}", False),
        (b"", False),
        (b'},"a":1}', False),
        (b',"a":"\xff"}', False),
    ],
)
def test_a_rest_closes_the_body_only_as_the_end_of_its_top_level_object(
    rest: bytes, closes: bool
) -> None:
    body = b'{"tools":[1]' + rest
    assert closes_body(body, len(b'{"tools":[1]')) is closes


def test_only_additional_tools_spelled_as_codex_spells_it_sends_a_body_to_the_full_parse() -> None:
    item = b'{"type":"additional_tools","tools":' + CATALOGUE + b"}"
    body = b'{"model":"gpt","input":[' + item + b"]}"
    escaped = body.replace(b"additional_tools", b"additional_tool\\u0073")
    assert names_additional_tools(body) and not names_additional_tools(escaped)
    assert cold(body, api="openai-responses").body == body.replace(CATALOGUE, COMPACTED)
    memo = Memo[Entry, Any](8)
    compact(anthropic(), memo, STRIP)
    for api in ("openai-responses", None):  # the escaped item is left as it came, either way
        assert compact(escaped, memo, STRIP, api).body is escaped
        assert cold(escaped, api=api).body is escaped


# The memo hit against the rule, on valid and broken bodies

Cut = tuple[bytes, bytes]  # the body's bytes before the catalogue, and after it
DEFECTS: dict[str, Callable[[bytes, bytes], Cut]] = {
    "none": lambda h, t: (h, t),
    "duplicate keys": lambda h, t: (h[:1] + b'"d":1,"d":2,' + h[1:], t + b""),
    "a byte-order mark": lambda h, t: (b"\xef\xbb\xbf" + h, t),
    "invalid UTF-8 before": lambda h, t: (h[:1] + b'"\xff":0,' + h[1:], t),
    "invalid UTF-8 after": lambda h, t: (h, b',"\xff":0' + t),
    "trailing garbage": lambda h, t: (h, t + b"x"),
    "a second document": lambda h, t: (h, t + b"{}"),
    "tools inside a string": lambda h, t: (h[:1] + b'"s":"\\"tools\\":' + h[1:], t),
    "the catalogue in a nested object": lambda h, t: (h[:1] + b'"n":{' + h[1:], t + b"}"),
    "a later top-level tools member": lambda h, t: (h, b',"tools":[]' + t),
    "a later nested tools member": lambda h, t: (h, b',"m":{"tools":[1]}' + t),
    "no closing brace": lambda h, t: (h, t.rstrip()[:-1]),
}


@st.composite
def broken_bodies(draw: st.DrawFn) -> tuple[bytes, bytes, str]:
    """(A body with one defect or none, perhaps truncated, its catalogue, the defect)."""
    body, start, end, _ = draw(bodies())
    defect = draw(st.sampled_from(sorted(DEFECTS)))
    head, tail = DEFECTS[defect](body[:start], body[end:])
    whole = head + body[start:end] + tail
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(whole)))
        whole, defect = whole[:cut], defect + ", truncated"
    return whole, body[start:end], defect


WARMUPS = ("the catalogue alone", "other catalogues too", "the body's own ending, proven")


def warmed(catalogue: bytes, body: bytes, warmup: str) -> Memo[Entry, Any]:
    memo = Memo[Entry, Any](8)
    compact(b'{"tools":' + catalogue + b"}", memo, STRIP)
    if warmup == WARMUPS[1]:
        compact(anthropic(), memo, STRIP)  # now the most recent: the search finds the other
    elif warmup == WARMUPS[2]:
        key_start = body.rfind(b'"tools"', 0, max(0, body.rfind(catalogue)))
        for pad in (1, 2):
            rest = body[key_start:] if key_start >= 0 else b'"tools":' + catalogue + b"}"
            compact(b'{"pad":"' + b"p" * (len(body) + pad) + b'",' + rest, memo, STRIP)
    return memo


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_bodies(), st.sampled_from(WARMUPS), st.sampled_from([None, "anthropic"]))
def test_a_memo_hit_agrees_with_the_rule_on_every_body(
    case: tuple[bytes, bytes, str], warmup: str, api: str | None
) -> None:
    body, catalogue, defect = case
    memo = warmed(catalogue, body, warmup)
    member = catalogue_member(body)
    found = memo_hit(body, memo, api is None)
    event(f"{defect}: {'memo hit' if found is not None else 'full locate'}")
    if found is not None:
        assert member is not None and found[0] == member[1]
        assert found[1].raw == body[member[1] : member[2]]
    reference = cold(body, api=api)
    warm = compact(body, memo, STRIP, api)
    assert (warm.body, warm.reason) == (reference.body, reference.reason)
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in reference.catalogues]
    if reference.body is body:
        assert warm.body is body


def test_a_turn_whose_head_is_not_json_is_a_memo_hit_compacted_as_without_the_memo() -> None:
    memo = Memo[Entry, Any](8)
    compact(anthropic(), memo, STRIP)
    transcript = b'[{"role":"user","content":"' + b"x" * 100_000 + b'"}]'
    broken_head = b"\xef\xbb\xbf" + anthropic(messages=transcript)
    result = compact(broken_head, memo, STRIP)
    assert [hit for _, hit in result.catalogues] == [True]
    assert result.body == b"\xef\xbb\xbf" + anthropic(messages=transcript, tools=COMPACTED)
    assert result.body == cold(broken_head).body  # the same rule without the memo


def test_a_catalogue_that_is_not_json_skips_the_body_whatever_the_memo_holds() -> None:
    body = b'{"tools":[{"name":"\xff","input_schema":{"title":"x"}}],"stream":true}'
    memo = Memo[Entry, Any](8)
    first, second = compact(body, memo, STRIP), compact(body, memo, STRIP)
    assert first.reason == second.reason == "not_json"
    assert first.body is body and second.body is body


def test_the_catalogue_bytes_anywhere_but_the_rules_place_are_not_compacted() -> None:
    nested = b'{"messages":[{"input":{"tools":' + CATALOGUE + b"}}]}"
    memo = Memo[Entry, Any](8)
    compact(anthropic(), memo, STRIP)
    assert compact(nested, memo, STRIP).body is nested
    assert compact(nested, memo, STRIP).reason == "no_tools"
