"""Tests for toolslim.core.envelope: raw bytes in, raw bytes out. Golden bodies, every skip reason,
byte stability, and a hypothesis property that every byte outside the catalogue stays. The memo
and its hit proof are in test_memo.py, parse_catalogue in test_entry.py."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from bodies import (
    CATALOGUE,
    COMPACTED,
    STRIP,
    anthropic,
    bodies,
    cold,
)
from golden_cases import golden
from toolslim.core.components.toolschema import ToolSchema
from toolslim.core.entry import Entry, Step
from toolslim.core.envelope import compact
from toolslim.core.memo import Memo
from toolslim.core.pipeline import Pipeline


def reason(body: bytes) -> str | None:
    (run,) = Pipeline(["toolschema"], memo_size=0).run(body).runs
    return run.reason


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
    result = cold(body, (Step.rewriting(grow),))
    assert result.body is body
    ((catalogue, _),) = result.catalogues
    assert catalogue.output is None
    assert [(r.outcome, r.reason) for r in catalogue.runs] == [("skipped", "not_smaller")]


def test_a_later_component_that_grows_the_output_stops_adoption_for_all() -> None:
    body = b'{"tools":[{"name":"a","input_schema":{"type":"object","title":"t"}}]}'
    result = cold(body, (*STRIP, Step.rewriting(grow)))
    assert result.body is body
    ((catalogue, _),) = result.catalogues
    assert [r.reason for r in catalogue.runs] == ["not_smaller", "not_smaller"]


def explode(schema: Any, tool_name: str | None) -> tuple[Any, Counter[str]]:
    raise RuntimeError("boom")


def test_a_failing_component_is_skipped_and_the_next_one_still_runs() -> None:
    body = anthropic()
    result = cold(body, (Step.rewriting(explode), *STRIP))
    assert result.body == anthropic(tools=COMPACTED)
    ((catalogue, _),) = result.catalogues
    assert [(r.outcome, r.reason) for r in catalogue.runs] == [
        ("error", "RuntimeError"),
        ("applied", None),
    ]
    assert catalogue.errors == ((0, "RuntimeError: boom"),)


def test_a_failing_only_component_leaves_the_body_as_it_came() -> None:
    body = anthropic()
    result = cold(body, (Step.rewriting(explode),))
    assert result.body is body


class BrokenMemo(Memo[Entry, Any]):
    """A memo that fails on lookup, as a bug inside compact would."""

    def get(self, key: bytes) -> Entry | None:
        raise KeyError("internal")


def test_compact_never_raises_and_names_the_error_apart_from_skip_reasons() -> None:
    body = anthropic()
    result = compact(body, BrokenMemo(8), STRIP)
    assert result.body is body
    assert result.error == "KeyError"
    assert result.reason is None and result.catalogues == ()


def test_an_empty_pipeline_changes_nothing() -> None:
    body = anthropic()
    assert Pipeline([]).run(body).body is body


def test_codex_additional_tools_are_catalogues_only_where_the_api_allows_them() -> None:
    body = (
        b'{"model":"gpt","input":[{"type":"message"},{"type":"additional_tools","tools":'
        + CATALOGUE
        + b"}]}"
    )
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
