"""Tests for toolslim.envelope: raw bytes in, raw bytes out. Golden bodies, every skip reason,
the bounded memo, the memo-hit byte search proven equal to the full parse, byte stability, and
a hypothesis property that every byte outside the catalogue stays."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden_cases import golden
from toolslim import envelope
from toolslim.envelope import Compacted, DuplicateKey, Entry, Memo, compact, parse_catalogue
from toolslim.pipeline import Pipeline
from toolslim.schema import ToolSchema

STRIP = (ToolSchema().rewrite,)


def cold(body: bytes, rewrites: Any = STRIP, api: str | None = None) -> Compacted:
    return compact(body, Memo(0), rewrites, api)


def reason(body: bytes) -> str | None:
    (run,) = Pipeline(["toolschema"], memo_size=0).run(body).runs
    return run.reason


def entry(raw: bytes) -> Entry:
    return Entry(raw, None, ())


# A catalogue long enough (> 64 bytes) for the memo-hit byte search to index it.
CATALOGUE = (
    b'[{"name":"Read","description":"Read a file","input_schema":{"type":"object",'
    b'"title":"ReadInput","properties":{"file_path":{"type":"string","title":"Path"}},'
    b'"required":["file_path"]}},{"name":"Bash","input_schema":{"type":"object",'
    b'"properties":{"command":{"type":"string","examples":["ls"]}}}}]'
)
COMPACTED = (
    b'[{"description":"Read a file","input_schema":{"properties":{"file_path":'
    b'{"type":"string"}},"required":["file_path"],"type":"object"},"name":"Read"},'
    b'{"input_schema":{"properties":{"command":{"type":"string"}},"type":"object"},'
    b'"name":"Bash"}]'
)


def anthropic(messages: bytes = b"[]", tools: bytes = CATALOGUE) -> bytes:
    return b'{"model":"claude","messages":' + messages + b',"tools":' + tools + b',"stream":true}'


# Golden bodies


@pytest.mark.parametrize("case", golden("bodies.json"))
def test_golden_body_comes_out_byte_for_byte(case: dict[str, Any]) -> None:
    body = case["input"].encode()
    out = cold(body).body
    assert out == case["expected"].encode()
    if case["reason"] is not None:
        assert out is body


@pytest.mark.parametrize("case", golden("bodies.json"))
def test_golden_body_reports_its_skip_reason(case: dict[str, Any]) -> None:
    assert reason(case["input"].encode()) == case["reason"]


@pytest.mark.parametrize("case", golden("bodies.json") + golden("shapes.json"))
def test_golden_body_gives_the_same_bytes_with_a_warm_memo(case: dict[str, Any]) -> None:
    body = case["input"].encode()
    memo = Memo(8)
    first = compact(body, memo, STRIP)
    second = compact(body, memo, STRIP)
    assert second.body == first.body == cold(body).body
    assert [hit for _, hit in second.catalogues] == [True] * len(second.catalogues)


def test_compacted_body_comes_as_views_of_the_input_around_the_memoized_catalogue() -> None:
    tail = b',"metadata":"' + b"m" * 2000 + b'"}'
    body = b'{"model":"m","tools":[{"name":"t","input_schema":{"title":"x"}}]' + tail
    memo = Memo(8)
    for result in (compact(body, memo, STRIP), compact(body, memo, STRIP)):  # miss, then hit
        head, catalogue, rest = result.pieces
        assert isinstance(head, memoryview) and head.obj is body  # not copied
        assert isinstance(rest, memoryview) and rest.obj is body and bytes(rest) == tail
        assert catalogue is result.catalogues[0][0].output  # the memo's own bytes
        assert result.body == b'{"model":"m","tools":[{"input_schema":{},"name":"t"}]' + tail


def test_a_short_rest_of_the_body_goes_joined_to_the_catalogue_built_once() -> None:
    body = b'{"model":"m","tools":[{"name":"t","input_schema":{"title":"x"}}],"stream":true}'
    memo = Memo(8)
    first, second = compact(body, memo, STRIP), compact(body, memo, STRIP)
    head, joined = second.pieces
    assert isinstance(head, memoryview) and head.obj is body
    assert joined == b'[{"input_schema":{},"name":"t"}],"stream":true}'
    assert first.pieces[1] is joined  # the same rest: the same bytes object, no new copy
    other = compact(body.replace(b"true", b"false"), memo, STRIP)
    assert other.body == b'{"model":"m","tools":[{"input_schema":{},"name":"t"}],"stream":false}'


def test_unchanged_body_is_the_one_piece_and_the_same_object() -> None:
    body = b'{"model":"m","messages":[]}'
    result = cold(body)
    assert result.pieces == (body,) and result.pieces[0] is body and result.body is body


# Each skip reason, and never raising


def test_invalid_utf8_is_not_json() -> None:
    body = b'{"tools":[{"name":"\xff\xfe","input_schema":{"title":"x"}}]}'
    result = cold(body)
    assert result.body is body
    assert result.reason == "not_json"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"tools":' + b"[" * 1100 + b"]" * 1100 + b"}", id="body past 1024 levels"),
        pytest.param(
            b'{"tools":[{"name":"a","input_schema":'
            + b'{"not":' * 300
            + b'{"title":"x"}'
            + b"}" * 300
            + b"}]}",
            id="schema 300 subschemas deep",
        ),
        pytest.param(
            b'{"tools":[{"name":"a","input_schema":{"default":'
            + b"[" * 600
            + b"]" * 600
            + b',"title":"x"}}]}',
            id="instance data 600 levels deep",
        ),
        pytest.param(
            b'{"tools":[{"name":"a","input_schema":'
            + b'{"properties":{"a":' * 400
            + b"{}"
            + b"}}" * 400
            + b"}]}",
            id="properties 400 levels deep",
        ),
    ],
)
def test_nesting_deeper_than_the_limit_is_too_deep(body: bytes) -> None:
    report = Pipeline(["toolschema"]).run(body)
    assert report.body is body
    assert [(r.outcome, r.reason) for r in report.runs] == [("skipped", "too_deep")]


def test_a_deep_transcript_does_not_stop_the_catalogue_from_being_compacted() -> None:
    messages = b"[" * 600 + b"]" * 600
    body = b'{"input":' + messages + b',"tools":' + CATALOGUE + b"}"
    assert cold(body).body == b'{"input":' + messages + b',"tools":' + COMPACTED + b"}"


def grow(schema: Any, tool_name: str | None) -> tuple[Any, Counter[str]]:
    """A component whose output is larger than its input."""
    return {**schema, "x-padding": "p" * 100}, Counter()


def test_a_rewrite_that_is_not_smaller_is_not_adopted() -> None:
    body = b'{"tools":[{"name":"a","input_schema":{"type":"object"}}]}'
    result = cold(body, (grow,))
    assert result.body is body
    ((catalogue, _),) = result.catalogues
    assert catalogue.output is None
    assert [(r.outcome, r.reason) for r in catalogue.runs] == [("skipped", "not_smaller")]


def test_a_later_component_that_grows_the_output_stops_adoption_for_all() -> None:
    body = b'{"tools":[{"name":"a","input_schema":{"type":"object","title":"t"}}]}'
    result = cold(body, (ToolSchema().rewrite, grow))
    assert result.body is body
    ((catalogue, _),) = result.catalogues
    assert [r.reason for r in catalogue.runs] == ["not_smaller", "not_smaller"]


def explode(schema: Any, tool_name: str | None) -> tuple[Any, Counter[str]]:
    raise RuntimeError("boom")


def test_a_failing_component_is_skipped_and_the_next_one_still_runs() -> None:
    body = anthropic()
    result = cold(body, (explode, ToolSchema().rewrite))
    assert result.body == anthropic(tools=COMPACTED)
    ((catalogue, _),) = result.catalogues
    assert [(r.outcome, r.reason) for r in catalogue.runs] == [
        ("error", "RuntimeError"),
        ("applied", None),
    ]
    assert catalogue.errors == ((0, "RuntimeError: boom"),)


def test_a_failing_only_component_leaves_the_body_as_it_came() -> None:
    body = anthropic()
    result = cold(body, (explode,))
    assert result.body is body


def test_compact_never_raises_and_says_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("internal")

    monkeypatch.setattr(envelope, "_locate", broken)
    body = anthropic()
    result = cold(body)
    assert result.body is body
    assert result.reason == "error:KeyError"


def test_an_empty_pipeline_changes_nothing() -> None:
    body = anthropic()
    assert Pipeline([]).run(body).body is body


# parse_catalogue


def test_parse_catalogue_keeps_number_spelling_as_fragments() -> None:
    value = parse_catalogue(b"[1.0,1e3,-0,1180591620717411303424,2]")
    assert [orjson.dumps(v) for v in value] == [
        b"1.0",
        b"1e3",
        b"-0",
        b"1180591620717411303424",
        b"2",
    ]


def test_parse_catalogue_takes_the_fast_path_for_exact_bytes() -> None:
    value = parse_catalogue(b'[{"a":1,"b":[true,null,"x"]}]')
    assert value == [{"a": 1, "b": [True, None, "x"]}]


@pytest.mark.parametrize(
    "raw",
    [b'[{"a":1,"a":1}]', b'[{"x":{"k":[],"k":[]}}]', b'[{"a":1,"b":2,"a":3}]'],
)
def test_parse_catalogue_refuses_duplicate_keys(raw: bytes) -> None:
    with pytest.raises(DuplicateKey):
        parse_catalogue(raw)


@pytest.mark.parametrize("raw", [b"[NaN]", b"[Infinity]", b"[-Infinity]"])
def test_parse_catalogue_refuses_non_json_constants(raw: bytes) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_catalogue(raw)


# The memo: a bounded LRU keyed by exact bytes


def test_memo_capacity_is_respected_and_the_oldest_entry_goes_first() -> None:
    memo = Memo(2)
    for raw in (b"[1]", b"[2]", b"[3]"):
        memo.put(Memo.key(raw), entry(raw))
    assert len(memo) == 2
    assert memo.get(Memo.key(b"[1]")) is None
    assert memo.get(Memo.key(b"[2]")) is not None
    assert memo.get(Memo.key(b"[3]")) is not None


def test_memo_get_refreshes_an_entry_so_the_least_recently_used_goes() -> None:
    memo = Memo(2)
    memo.put(Memo.key(b"[1]"), entry(b"[1]"))
    memo.put(Memo.key(b"[2]"), entry(b"[2]"))
    memo.get(Memo.key(b"[1]"))
    memo.put(Memo.key(b"[3]"), entry(b"[3]"))
    assert memo.get(Memo.key(b"[2]")) is None
    assert memo.get(Memo.key(b"[1]")) is not None


def test_memo_match_at_refreshes_an_entry_too() -> None:
    long_a, long_b, long_c = (b"[" + bytes([c]) * 80 + b"]" for c in b"abc")
    memo = Memo(2)
    memo.put(Memo.key(long_a), entry(long_a))
    memo.put(Memo.key(long_b), entry(long_b))
    assert memo.match_at(b"xx" + long_a + b"}", 2) is not None
    memo.put(Memo.key(long_c), entry(long_c))
    assert memo.get(Memo.key(long_b)) is None
    assert memo.match_at(b"xx" + long_b + b"}", 2) is None
    assert memo.match_at(b"xx" + long_a + b"}", 2) is not None


def test_the_memos_recent_entry_is_the_one_used_last_by_any_way_in() -> None:
    long_a, long_b = (b"[" + bytes([c]) * 80 + b"]" for c in b"ab")
    memo = Memo(2)
    assert memo.recent is None
    a, b = entry(long_a), entry(long_b)
    memo.put(Memo.key(long_a), a)
    memo.put(Memo.key(long_b), b)
    assert memo.recent is b
    memo.get(Memo.key(long_a))
    assert memo.recent is a
    memo.match_at(b"xx" + long_b + b"}", 2)
    assert memo.recent is b
    memo.put(Memo.key(b"[3]"), c := entry(b"[3]"))  # evicts a, the least recently used
    assert memo.recent is c and memo.get(Memo.key(long_a)) is None
    memo.clear()
    assert memo.recent is None
    nothing_kept = Memo(0)
    nothing_kept.put(Memo.key(long_a), a)
    assert nothing_kept.recent is None


def test_memo_match_at_needs_every_byte_of_the_catalogue() -> None:
    raw = b"[" + b"a" * 100 + b"]"
    memo = Memo(4)
    memo.put(Memo.key(raw), entry(raw))
    assert memo.match_at(b"{" + raw[:-2] + b"b]}", 1) is None
    assert memo.match_at(b"{" + raw + b"}", 1) is not None


def test_memo_capacity_zero_stores_nothing() -> None:
    memo = Memo(0)
    memo.put(Memo.key(b"[1]"), entry(b"[1]"))
    assert len(memo) == 0
    assert memo.get(Memo.key(b"[1]")) is None
    pipeline = Pipeline(["toolschema"], memo_size=0)
    pipeline.run(anthropic())
    report = pipeline.run(anthropic())
    assert (report.memo_hits, report.memo_misses) == (0, 1)
    assert pipeline.memo_gauges() == (0, 0)


def test_memo_is_keyed_by_the_exact_catalogue_bytes() -> None:
    pipeline = Pipeline(["toolschema"])
    spaced = CATALOGUE.replace(b'"type":"object"', b'"type": "object"')
    assert pipeline.run(anthropic()).memo_misses == 1
    assert pipeline.run(anthropic(tools=spaced)).memo_misses == 1
    assert pipeline.run(anthropic(messages=b'[{"role":"user"}]')).memo_hits == 1
    assert len(pipeline.memo) == 2


def test_memo_clear_empties_both_indexes() -> None:
    memo = Memo(4)
    compact(anthropic(), memo, STRIP)
    memo.clear()
    assert len(memo) == 0
    assert compact(anthropic(), memo, STRIP).catalogues[0][1] is False


# The memo-hit path: proven equal to the full parse


def test_a_memo_hit_is_found_without_the_full_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = Memo(4)
    compact(anthropic(), memo, STRIP)
    bodies = [
        anthropic(messages=b'[{"role":"user","content":"' + b"x" * 5000 + b'"}]'),
        b'{"tools":' + CATALOGUE + b',"messages":[{"role":"user","content":"hi"}]}',
        b'{ "tools" :\n ' + CATALOGUE + b" \n}",
    ]
    expected = [cold(body).body for body in bodies]

    def no_full_parse(*args: Any) -> Any:
        raise AssertionError("took the full path")

    monkeypatch.setattr(envelope, "_locate", no_full_parse)
    for body, out in zip(bodies, expected, strict=True):
        result = compact(body, memo, STRIP)
        assert result.reason is None
        assert [hit for _, hit in result.catalogues] == [True]
        assert result.body == out != body


TOOL_USE = (
    b'{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{"tools":'
)
TRICKY = {
    "catalogue bytes nested under a tools key in a tool_use input": anthropic(
        messages=b"[" + TOOL_USE + CATALOGUE + b"}}]}]"
    ),
    "catalogue bytes nested in a tool_use input after the top-level tools": b'{"tools":'
    + CATALOGUE
    + b',"messages":['
    + TOOL_USE
    + CATALOGUE
    + b"}}]}]}",
    "only a nested catalogue, no top-level tools": b'{"messages":['
    + TOOL_USE
    + CATALOGUE
    + b"}}]}]}",
    "a tools key written inside a string": anthropic(
        messages=b'[{"role":"user","content":"{\\"tools\\":'
        + CATALOGUE.replace(b'"', b'\\"')
        + b'}"}]'
    ),
    "tools spelled with a \\u0073 escape as the only catalogue": b'{"tool\\u0073":'
    + CATALOGUE
    + b"}",
    "tools spelled with an escape after the literal one": anthropic()[:-1]
    + b',"tool\\u0073":[{"name":"x","input_schema":{"title":"x"}}]}',
    "tools spelled with an escape before the literal one": b'{"tool\\u0073":[{"name":"x",'
    b'"input_schema":{"title":"x"}}],"model":"m","tools":' + CATALOGUE + b"}",
    "a second top-level tools key after the catalogue": anthropic()[:-1]
    + b',"tools":[{"name":"x","input_schema":{"title":"y"}}]}',
    "a second top-level tools key before the catalogue": b'{"tools":[{"name":"x",'
    b'"input_schema":{"title":"y"}}],"model":"m","tools":' + CATALOGUE + b"}",
    "the same catalogue twice at the top level": b'{"tools":'
    + CATALOGUE
    + b',"tools":'
    + CATALOGUE
    + b"}",
    "the catalogue inside a nested object at depth two": b'{"x":{"tools":' + CATALOGUE + b"}}",
    "the catalogue as the value of a member of an array item": b'{"x":[{"tools":'
    + CATALOGUE
    + b"}]}",
    "additional_tools items with the catalogue bytes": b'{"model":"gpt","input":['
    b'{"type":"message"},{"type":"additional_tools","tools":' + CATALOGUE + b"}]}",
    "additional_tools and top-level tools with the same bytes": b'{"tools":'
    + CATALOGUE
    + b',"input":[{"type":"additional_tools","tools":'
    + CATALOGUE
    + b"}]}",
    "a tool_search_output carrying the catalogue bytes": b'{"input":[{"type":"tool_search_output",'
    b'"tools":' + CATALOGUE + b'}],"tools":' + CATALOGUE + b"}",
    "a body that is an array holding the catalogue": b'[{"tools":' + CATALOGUE + b"}]",
    "invalid JSON on the short side before the catalogue": b'{"a":,"tools":'
    + CATALOGUE
    + b',"messages":"'
    + b"x" * 2000
    + b'"}',
    "invalid JSON on the short side after the catalogue": b'{"messages":"'
    + b"x" * 2000
    + b'","tools":'
    + CATALOGUE
    + b',"x":}',
    "a byte-order mark on the short side": b'\xef\xbb\xbf{"tools":'
    + CATALOGUE
    + b',"messages":"'
    + b"x" * 2000
    + b'"}',
    "whitespace everywhere": b' \n{ "model" : "m" ,\n "tools" : ' + CATALOGUE + b" \n}\n",
}


@pytest.mark.parametrize("api", [None, "anthropic", "openai-responses"])
@pytest.mark.parametrize("body", TRICKY.values(), ids=TRICKY.keys())
def test_a_warm_memo_gives_the_same_result_as_an_empty_one(body: bytes, api: str | None) -> None:
    memo = Memo(8)
    compact(anthropic(), memo, STRIP)  # warm with the catalogue's exact bytes
    compact(b'{"tools":[{"name":"x","input_schema":{"title":"x"}}]}', memo, STRIP)
    compact(b'{"tools":[{"name":"x","input_schema":{"title":"y"}}]}', memo, STRIP)
    warm = compact(body, memo, STRIP, api)
    empty = cold(body, api=api)
    assert warm.body == empty.body
    assert warm.reason == empty.reason
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in empty.catalogues]
    if empty.body is body:
        assert warm.body is body


def layout_warm_memo() -> Memo:
    """A memo whose most recent entry is CATALOGUE, proven once at the end of a body."""
    memo = Memo(8)
    compact(anthropic(), memo, STRIP)  # a miss: the full parse
    compact(anthropic(messages=b'[{"role":"user"}]'), memo, STRIP)  # a hit: the rest is proven
    (entry,) = memo._entries.values()
    assert entry.layouts == [(b'"tools":', b',"stream":true}')]
    return memo


STREAM_REST = b',"stream":true}'


def turn(n: int, rest: bytes = STREAM_REST) -> bytes:
    """A session's turn: an Anthropic body with an `n`-byte transcript, ending with `rest`."""
    messages = b'[{"role":"user","content":"' + b"x" * n + b'"}]'
    return anthropic(messages=messages)[: -len(STREAM_REST)] + rest


def forbid_searching(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, any search or parse of a body fails the test."""

    def searched(*args: Any) -> Any:
        raise AssertionError("searched or parsed")

    for name in ("_locate", "_top_level_member", "_key_candidates", "_key_candidates_reversed"):
        monkeypatch.setattr(envelope, name, searched)


def test_a_turn_that_ends_as_the_last_one_is_a_hit_without_a_search_or_a_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = layout_warm_memo()
    bodies = [turn(n) for n in (1, 9)]
    expected = [cold(body).body for body in bodies]
    forbid_searching(monkeypatch)
    for body, out in zip(bodies, expected, strict=True):
        result = compact(body, memo, STRIP)
        assert [hit for _, hit in result.catalogues] == [True]
        assert result.body == out != body


def test_sessions_that_share_a_catalogue_and_take_turns_each_keep_their_fast_hit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each session ends its body its own way (Claude Code's metadata.user_id): the entry
    keeps a few rests, so turns that alternate still hit without a search or a copy."""
    memo = Memo(8)
    rests = [b',"metadata":{"user_id":"session-%d"},"stream":true}' % n for n in range(4)]
    for rest in rests:  # each session's first two turns: a miss or search, then proven
        compact(turn(1, rest), memo, STRIP)
        compact(turn(2, rest), memo, STRIP)
    (entry,) = memo._entries.values()
    assert sorted(rest for _, rest in entry.layouts) == sorted(rests)
    first = {s: compact(turn(3, rests[s]), memo, STRIP).pieces[-1] for s in range(4)}
    expected = {(s, n): cold(turn(n, rests[s])).body for s in range(4) for n in range(4, 12)}
    forbid_searching(monkeypatch)
    for n in range(4, 12):
        for session in (0, 3, 1, 2):
            result = compact(turn(n, rests[session]), memo, STRIP)
            assert [hit for _, hit in result.catalogues] == [True]
            assert result.pieces[-1] is first[session]  # its rest joined once, not per turn
            assert result.body == expected[session, n]


def test_a_session_whose_ending_changes_every_turn_does_not_push_out_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = Memo(8)
    steady = [b',"metadata":{"user_id":"s%d"},"stream":true}' % n for n in range(3)]
    for rest in steady:
        compact(turn(1, rest), memo, STRIP)
        compact(turn(2, rest), memo, STRIP)
    proofs = []
    real = envelope._top_level_member
    monkeypatch.setattr(envelope, "_top_level_member", lambda *a: proofs.append(1) or real(*a))
    for n in range(3, 13):
        compact(turn(n, b',"metadata":{"user_id":"churn%03d"},"stream":true}' % n), memo, STRIP)
        before = len(proofs)
        for rest in steady:
            assert [hit for _, hit in compact(turn(n, rest), memo, STRIP).catalogues] == [True]
        assert len(proofs) == before  # the steady sessions never took the long path


@pytest.mark.parametrize("api", [None, "anthropic", "openai-responses"])
@pytest.mark.parametrize(
    "body",
    [
        *TRICKY.values(),
        anthropic()[:-1] + b',"tools":[]}',  # a later tools key, then the proven rest
        b'{"messages":"\\",\\"tools":' + CATALOGUE + b',"stream":true}',
        # Unclosed (depth 2 at the end) with a head shorter than the rest: the hit path
        # parses the head, and refuses, as the full parse does.
        b'{"a":{"tools":' + CATALOGUE + b',"stream":true}',
        anthropic().replace(b'"tools":', b'"tools" :'),
        anthropic().replace(b'"tools":', b'"toolz":'),  # same length, another member
        anthropic().replace(b',"stream":true}', b',"tools":[9,9]}'),  # same length, later tools
        anthropic(tools=CATALOGUE[:-1] + b',{"name":"x","input_schema":{}}]'),
    ],
)
def test_a_memo_with_a_proven_layout_gives_the_same_result_as_an_empty_one(
    body: bytes, api: str | None
) -> None:
    warm = compact(body, layout_warm_memo(), STRIP, api)
    empty = cold(body, api=api)
    assert warm.body == empty.body
    assert warm.reason == empty.reason
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in empty.catalogues]


def test_only_the_top_level_catalogue_changes_when_its_bytes_also_appear_nested() -> None:
    body = TRICKY["catalogue bytes nested in a tool_use input after the top-level tools"]
    memo = Memo(4)
    compact(anthropic(), memo, STRIP)
    out = compact(body, memo, STRIP).body
    assert out == b'{"tools":' + COMPACTED + body[len(b'{"tools":') + len(CATALOGUE) :]


def test_codex_additional_tools_are_catalogues_only_where_the_api_allows_them() -> None:
    body = TRICKY["additional_tools items with the catalogue bytes"]
    assert cold(body, api="openai-responses").body == body.replace(CATALOGUE, COMPACTED)
    assert cold(body, api=None).body == body.replace(CATALOGUE, COMPACTED)
    assert cold(body, api="anthropic").reason == "no_tools"


# Byte stability


def test_output_is_identical_across_400_calls_with_the_memo_cleared_and_warm() -> None:
    bodies = [case.values[0]["input"].encode() for case in golden("shapes.json")]
    bodies.append(anthropic())
    expected = [cold(body).body for body in bodies]
    pipeline = Pipeline(["toolschema"], memo_size=4)
    for call in range(400):
        if call % 7 == 0:
            pipeline.memo.clear()
        index = call % len(bodies)
        assert pipeline.run(bodies[index]).body == expected[index]


# Hypothesis: every byte outside the catalogue stays

KEYS = ["model", "messages", "system", "stream", "metadata", "max_tokens", "x", "tool_choice"]
TRAPS = st.sampled_from(
    [
        '"tools": [1]',
        '{"tools":[]}',
        '"tools":',
        "\\",
        "é",
        "\u2028",
        '"}',
        "tools",
    ]
)
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=5),
        TRAPS,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*KEYS, "tools", "input"]), inner, max_size=3),
    ),
    max_leaves=8,
)
SCHEMA_VALUES = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["string", "object", "integer"]),
            "title": st.text(max_size=3),
            "examples": st.lists(VALUES, max_size=2),
            "description": st.text(max_size=5),
            "default": VALUES,
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(st.sampled_from(["b", "a", "title"]), inner, max_size=3),
            "readOnly": st.booleans(),
        },
    ),
    max_leaves=5,
)
TOOLS = st.lists(
    st.fixed_dictionaries(
        {"name": st.text(min_size=1, max_size=4), "input_schema": SCHEMA_VALUES},
        optional={"description": st.text(max_size=5)},
    ),
    max_size=3,
)


def dumps(value: Any, style: str) -> str:
    if style == "compact":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == "ascii":
        return json.dumps(value)
    return json.dumps(value, indent=2)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, int, int, list[Any]]:
    """A body with the catalogue at a random member position: (body, start, end, tools)."""
    members = draw(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4))
    tools = draw(TOOLS)
    if draw(st.booleans()):  # the same catalogue nested in the conversation, to tempt the memo
        members["messages"] = [{"type": "tool_use", "input": {"tools": tools}}]
    position = draw(st.integers(0, len(members)))
    style = draw(st.sampled_from(["compact", "ascii", "pretty"]))
    space = draw(st.sampled_from(["", " ", "\n  "]))
    parts = [f"{json.dumps(k)}:{space}{dumps(v, style)}" for k, v in members.items()]
    head = "{" + space + f",{space}".join(parts[:position])
    head += f",{space}" if position else ""
    head += f'"tools":{space}'
    catalogue = dumps(tools, style)
    tail = "".join(f",{space}{p}" for p in parts[position:]) + space + "}"
    start = len(head.encode())
    return (head + catalogue + tail).encode(), start, start + len(catalogue.encode()), tools


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_every_byte_outside_the_catalogue_stays(case: tuple[bytes, int, int, list[Any]]) -> None:
    body, start, end, tools = case
    pipeline = Pipeline(["toolschema"], memo_size=0)
    report = pipeline.run(body)
    out = report.body
    if out is not body:
        assert out[:start] == body[:start]
        assert out[len(out) - (len(body) - end) :] == body[end:]
        catalogue = json.loads(out[start : len(out) - (len(body) - end)])  # big ints stay ints
        expected = [
            {**tool, "input_schema": ToolSchema().rewrite(tool["input_schema"], None)[0]}
            for tool in tools
        ]
        assert catalogue == expected
    else:
        assert report.runs[0].outcome == "skipped"
    warm = Pipeline(["toolschema"])
    warm.run(b'{"tools":' + body[start:end] + b"}")  # the memo now holds these exact bytes
    assert warm.run(body).body == out
