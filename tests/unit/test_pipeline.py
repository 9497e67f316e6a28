"""Tests for toolslim.core.pipeline: component names fail at start-up, the runner fails open,
and the RunReport says per component what happened, with tokens counted on canonical bytes."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from toolslim.core import envelope
from toolslim.core.catalog import serialize
from toolslim.core.components.toolschema import ToolSchema
from toolslim.core.entry import Entry, parse_catalogue
from toolslim.core.memo import Memo
from toolslim.core.pipeline import (
    KNOWN,
    MEMO_SIZE,
    PLANNED,
    Component,
    ComponentRun,
    Pipeline,
    RunReport,
    UnknownComponent,
    cached_tokens,
    check_names,
    count_tokens,
    skipped_report,
)
from toolslim.core.tokens import count_tokens as count

SCHEMA = (
    b'{"type":"object","title":"ReadInput","properties":{"file_path":{"type":"string",'
    b'"title":"File Path","description":"Absolute path to the file"}},"required":["file_path"]}'
)
BODY = b'{"model":"m","messages":[],"tools":[{"name":"Read","input_schema":' + SCHEMA + b"}]}"


def run(body: bytes, **kwargs: Any) -> RunReport:
    return Pipeline(["toolschema"], **kwargs).run(body)


# Names


def test_toolschema_is_a_known_component() -> None:
    assert "toolschema" in KNOWN
    component: Component = KNOWN["toolschema"]({})
    assert component.name == "toolschema"
    assert isinstance(component, ToolSchema)


def test_an_unknown_name_fails_naming_it_and_the_known_ones() -> None:
    with pytest.raises(UnknownComponent) as caught:
        Pipeline(["toolschema", "shrink"])
    message = str(caught.value)
    assert "'shrink'" in message
    assert "toolschema" in message


@pytest.mark.parametrize("name", PLANNED)
def test_a_planned_but_unbuilt_name_fails_rather_than_doing_nothing(name: str) -> None:
    with pytest.raises(UnknownComponent, match="not implemented yet"):
        check_names([name])


def test_a_name_given_twice_fails() -> None:
    with pytest.raises(UnknownComponent, match="named twice"):
        check_names(["toolschema", "toolschema"])


def test_the_empty_pipeline_passes_the_body_through() -> None:
    report = Pipeline([]).run(BODY)
    assert report.body is BODY
    assert report.runs == ()
    assert not report.changed(BODY)


# Reports


def test_an_applied_run_reports_tools_removed_keywords_and_bytes() -> None:
    report = run(BODY)
    assert report.changed(BODY)
    (component,) = report.runs
    assert component == ComponentRun(
        "toolschema",
        "applied",
        None,
        tools_seen=1,
        tools_changed=1,
        removed={"title": 2},
        bytes_before=len(BODY) - len(b'{"model":"m","messages":[],"tools":}'),
        bytes_after=len(report.body) - len(b'{"model":"m","messages":[],"tools":}'),
    )
    assert component.bytes_saved == len(BODY) - len(report.body)
    assert (report.memo_hits, report.memo_misses) == (0, 1)
    assert len(report.applied) == 1


def test_a_skipped_body_is_the_very_same_object_with_its_reason() -> None:
    body = b'{"model":"m"}'
    report = run(body)
    assert report.body is body
    assert not report.changed(body)
    assert report.runs == (ComponentRun("toolschema", "skipped", "no_tools"),)
    assert report.applied == ()


def test_the_second_request_with_the_same_catalogue_is_a_memo_hit() -> None:
    pipeline = Pipeline(["toolschema"])
    first = pipeline.run(BODY)
    second = pipeline.run(BODY.replace(b'"messages":[]', b'"messages":[{"role":"user"}]'))
    assert (second.memo_hits, second.memo_misses) == (1, 0)
    assert second.runs == first.runs
    assert pipeline.memo_gauges() == (1, MEMO_SIZE)


def test_runs_are_summed_over_the_catalogues_of_one_request() -> None:
    strip = b'[{"type":"function","name":"a","parameters":' + SCHEMA + b"}]"
    canonical = b'[{"name":"b","parameters":{"type":"object"},"type":"function"}]'
    body = (
        b'{"tools":' + strip + b',"input":[{"type":"additional_tools","tools":' + canonical + b"}]}"
    )
    report = Pipeline(["toolschema"]).run(body, api="openai-responses")
    (component,) = report.runs
    assert component.outcome == "applied"
    assert (component.tools_seen, component.tools_changed) == (2, 1)
    assert component.removed == {"title": 2}
    assert component.bytes_before == len(strip)  # only the catalogue that was adopted
    assert (report.memo_hits, report.memo_misses) == (0, 2)
    assert len(report.applied) == 1


def test_a_catalogue_skip_reason_reaches_the_report() -> None:
    body = b'{"tools":[{"name":"a","input_schema":{"type":"string","type":"number"}}]}'
    assert run(body).runs == (ComponentRun("toolschema", "skipped", "duplicate_keys"),)


class BrokenMemo(Memo[Entry, Any]):
    """A memo that fails on lookup, as a bug inside compact would."""

    def get(self, key: bytes) -> Entry | None:
        raise KeyError("x")


def test_an_error_inside_compact_is_reported_per_component() -> None:
    pipeline = Pipeline(["toolschema"])
    pipeline.memo = BrokenMemo(8)
    report = pipeline.run(BODY)
    assert report.body is BODY
    assert report.runs == (ComponentRun("toolschema", "error", "KeyError"),)
    assert report.errors == (("toolschema", "KeyError"),)


def test_the_runner_itself_failing_still_returns_the_body(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("runner")

    monkeypatch.setattr(envelope, "compact", broken)
    report = run(BODY)
    assert report.body is BODY
    assert report.runs == (ComponentRun("toolschema", "error", "RuntimeError"),)
    assert report.errors == (("toolschema", "RuntimeError: runner"),)


class Exploding:
    """A component that fails on every schema."""

    name = "toolschema"

    def rewrite(self, schema: Any, tool_name: str | None) -> tuple[Any, Counter[str]]:
        raise ValueError("bad schema")


def test_a_component_error_is_logged_once_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KNOWN, "toolschema", lambda options: Exploding())
    pipeline = Pipeline(["toolschema"])
    report = pipeline.run(BODY)
    assert report.body is BODY
    assert report.runs[0].outcome == "error"
    assert report.runs[0].reason == "ValueError"
    assert report.errors == (("toolschema", "ValueError: bad schema"),)


def test_skip_reports_every_component_with_the_reason() -> None:
    report = skipped_report(BODY, ["toolschema"], "too_large")
    assert report.body is BODY
    assert report.runs == (ComponentRun("toolschema", "skipped", "too_large"),)
    assert Pipeline(["toolschema"]).skip(BODY, "too_large") == report


# Tokens


def test_tokens_are_counted_before_and_after_on_canonical_bytes() -> None:
    report = run(BODY)
    tokens = count_tokens(report, count)
    before, after = tokens["toolschema"]
    assert before > after > 0
    head = len(b'{"model":"m","messages":[],"tools":')
    assert before == count(serialize(parse_catalogue(BODY[head:-1])))
    assert after == count(report.body[head:-1])


def test_a_pretty_printed_catalogue_with_nothing_to_strip_saves_zero_tokens() -> None:
    body = b'{"tools": [\n  {\n    "name": "a",\n    "input_schema": {"type": "object"}\n  }\n]}'
    report = run(body)
    (component,) = report.runs
    assert component.outcome == "applied"
    assert component.removed == {}
    assert component.tools_changed == 0
    assert component.bytes_after < component.bytes_before
    before, after = count_tokens(report, count)["toolschema"]
    assert before == after > 0


def test_tokens_are_counted_once_per_catalogue() -> None:
    calls: list[bytes] = []

    def counting(text: bytes) -> int:
        calls.append(text)
        return len(text)

    pipeline = Pipeline(["toolschema"])
    first = count_tokens(pipeline.run(BODY), counting)
    second = count_tokens(pipeline.run(BODY), counting)
    assert first == second
    assert len(calls) == 2  # stage 0 and stage 1 of the one memoized catalogue


def test_cached_tokens_are_none_until_counted_then_the_counted_totals_on_every_hit() -> None:
    pipeline = Pipeline(["toolschema"])
    first = pipeline.run(BODY)
    assert cached_tokens(first) is None
    counted = count_tokens(first, len)
    hits = [pipeline.run(BODY.replace(b'"m"', f'"m{i}"'.encode())) for i in range(3)]
    assert [cached_tokens(hit) for hit in hits] == [counted] * 3
    assert cached_tokens(hits[0]) is cached_tokens(hits[2])  # kept, not rebuilt per request


def test_cached_tokens_of_two_catalogues_add_up_per_component() -> None:
    strip = b'[{"type":"function","name":"a","parameters":' + SCHEMA + b"}]"
    also = strip.replace(b'"a"', b'"b"')
    body = b'{"tools":' + strip + b',"input":[{"type":"additional_tools","tools":' + also + b"}]}"
    pipeline = Pipeline(["toolschema"])
    report = pipeline.run(body, api="openai-responses")
    assert len(report.applied) == 2 and cached_tokens(report) is None
    counted = count_tokens(report, len)
    before, after = counted["toolschema"]
    assert before == 2 * len(strip) and after < before
    assert cached_tokens(pipeline.run(body, api="openai-responses")) == counted


def test_a_skipped_request_counts_no_tokens() -> None:
    assert count_tokens(run(b'{"model":"m"}'), count) == {}


def test_memory_is_bounded_by_the_memo_entries_evicted_ones_are_freed_at_once() -> None:
    """Freed by reference counting alone: an entry in a reference cycle would wait for a full
    collection, and under a flood of new catalogues thousands would pile up meanwhile."""
    import gc
    import weakref

    pipeline = Pipeline(["toolschema"], memo_size=8)
    entries, stages = [], []
    gc.disable()
    try:
        for index in range(100):
            schema = {"type": "object", "title": "T", "properties": {"a": {"title": "A"}}}
            tools = [{"name": f"tool_{index}", "description": "d" * 200, "input_schema": schema}]
            body = json.dumps({"model": "m", "messages": [], "tools": tools}).encode()
            [applied] = pipeline.run(body).applied
            stages.append(weakref.ref(applied.stages))
            pipeline.run(body)  # a hit: the pipeline keeps its report parts per entry
            entries.append(weakref.ref(pipeline.memo.recent))  # type: ignore[arg-type]
        assert sum(1 for entry in entries if entry() is not None) == 8
        assert sum(1 for stage in stages if stage() is not None) == 8
    finally:
        gc.enable()
