"""tooldefs: unreachable root definitions go, losslessly; anything unprovable stays as it came."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bodies import DRAFT7, STALE, with_schemas
from golden_cases import (
    GOLDEN,
    golden,
)
from toolslim.core.components import tooldefs as defs
from toolslim.core.components.tooldefs import ToolDefs
from toolslim.core.pipeline import Pipeline
from toolslim.core.schema import MAX_DEPTH, TooDeep

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


@pytest.mark.parametrize("case", golden("tooldefs_*.json"))
def test_golden_case(case: dict[str, Any]) -> None:
    schema = case["input"]
    untouched = copy.deepcopy(schema)
    out, counts = ToolDefs().rewrite(schema, "tool")
    assert out == case["expected"]["schema"]
    assert dict(counts) == case["expected"]["counts"]
    assert schema == untouched  # never mutates its input
    if out == schema:
        assert out is schema  # identity means "no change"
    again, _ = ToolDefs().rewrite(out, "tool")
    assert again is out  # idempotent
    assert orjson.dumps(out) == orjson.dumps(ToolDefs().rewrite(copy.deepcopy(schema), "t")[0])


def test_golden_files_cover_every_unsafe_reason() -> None:
    counted = {
        key
        for path in GOLDEN.glob("tooldefs_*.json")
        for case in json.loads(path.read_text(encoding="utf-8"))
        for key in case["expected"]["counts"]
    }
    reasons = set(defs.UNSAFE_KEYWORDS.values()) | {
        "anchor_ref",
        "embedded_id",
        "invalid_ref",
        "remote_ref",
    }
    assert {defs.UNSAFE + r for r in reasons} <= counted


def test_factory_rejects_any_option_naming_it() -> None:
    with pytest.raises(ValueError, match="tooldefs: unknown option 'keep'"):
        defs.make({"keep": ["A"]})
    assert isinstance(defs.make({}), ToolDefs)


def test_nesting_past_the_limit_raises_too_deep() -> None:
    node: dict[str, Any] = {"$ref": "#/$defs/A"}
    for _ in range(MAX_DEPTH + 1):
        node = {"items": node}
    with pytest.raises(TooDeep):
        ToolDefs().rewrite({"properties": {"a": node}, "$defs": {"A": {}, "B": {}}}, "t")


# --- validation verdicts: identical before and after --------------------------------------

NAMES = ("A", "B", "C", "a/b", "t~x", "p q", "ü", "x~1")
TABLES = ("$defs", "definitions")
KEYS = ("x", "y", "z")


def _reference(table: str, name: str, tail: str, encode: bool) -> dict[str, str]:
    token = name.replace("~", "~0").replace("/", "~1")
    pointer = f"/{table}/{token}{tail}"
    return {"$ref": "#" + (quote(pointer, safe="/~$") if encode else pointer)}


references = st.builds(
    _reference,
    st.sampled_from(TABLES),
    st.sampled_from((*NAMES, "Missing")),
    st.sampled_from(("", "", "", "/properties/x", "/anyOf/0")),
    st.booleans(),
) | st.just({"$ref": "#/$defs"})
leaves = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "minimum": 0},
        {"type": "null"},
        {"const": 1},
        {"enum": ["a", 1]},
        {"type": "object", "required": ["x"]},
        {},
        True,
        False,
    ]
)
nodes = st.recursive(
    leaves | references,
    lambda inner: st.one_of(
        st.builds(
            lambda props: {"type": "object", "properties": props},
            st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
        ),
        st.builds(lambda sub: {"type": "array", "items": sub}, inner),
        st.builds(lambda subs: {"anyOf": subs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda subs: {"allOf": subs}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda sub: {"not": sub}, inner),
        st.builds(lambda sub, ref: {**ref, "properties": {"x": sub}}, inner, references),
    ),
    max_leaves=6,
)


def _root(props: dict[str, Any], dollar: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if dollar:
        schema["$defs"] = dollar
    if old:
        schema["definitions"] = old
    return schema


schemas = st.builds(
    _root,
    st.dictionaries(st.sampled_from(KEYS), nodes, max_size=3),
    st.dictionaries(st.sampled_from(NAMES), nodes, max_size=5),
    st.dictionaries(st.sampled_from(NAMES), nodes, max_size=3),
)
instances = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "a"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)


def verdict(schema: Any, instance: Any) -> bool | str:
    try:
        return bool(Draft202012Validator(schema).is_valid(instance))
    except RecursionError:  # a reachable cycle of bare references: the same before and after
        return "RecursionError"
    except Exception as exc:  # a dangling reference, reached: the same before and after
        return type(exc).__name__


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas, st.lists(instances, min_size=1, max_size=4))
def test_validation_verdicts_are_identical_before_and_after(
    schema: dict[str, Any], batch: list[Any]
) -> None:
    untouched = copy.deepcopy(schema)
    out, counts = ToolDefs().rewrite(schema, "tool")
    assert schema == untouched
    assert not any(key.startswith(defs.UNSAFE) for key in counts)
    for instance in batch:
        assert verdict(out, instance) == verdict(schema, instance)


@settings(max_examples=300, deadline=None)
@given(schemas)
def test_pruning_is_idempotent_deterministic_and_never_mutates(schema: dict[str, Any]) -> None:
    untouched = copy.deepcopy(schema)
    out, counts = ToolDefs().rewrite(schema, "tool")
    assert schema == untouched
    assert (out is schema) == (not counts)
    again, more = ToolDefs().rewrite(out, "tool")
    assert again is out and not more
    assert orjson.dumps(ToolDefs().rewrite(untouched, "tool")[0]) == orjson.dumps(out)
    # Only root definition entries (and emptied tables) go; nothing else changes.
    rest = {k: v for k, v in schema.items() if k not in TABLES}
    assert {k: v for k, v in out.items() if k not in TABLES} == rest
    for table in TABLES:
        kept = out.get(table, {})
        assert all(schema[table][name] == sub for name, sub in kept.items())
        assert counts["definitions"] >= len(schema.get(table, {})) - len(kept) >= 0


# --- end to end through the pipeline ----------------------------------------------------


def _tools(body: bytes) -> list[dict[str, Any]]:
    return [t["input_schema"] for t in orjson.loads(body)["tools"]]


def test_pruning_the_last_reference_lets_toolschema_drop_schema_after_it() -> None:
    body = with_schemas(STALE)
    report = Pipeline(["tooldefs", "toolschema"]).run(body)
    assert _tools(report.body) == [
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    ]
    runs = {run.component: run for run in report.runs}
    assert runs["tooldefs"].outcome == "applied"
    assert runs["tooldefs"].removed == {"definitions": 2}
    assert runs["toolschema"].removed == {"$schema": 1, "title": 1}
    assert runs["tooldefs"].bytes_after == runs["toolschema"].bytes_before


def test_toolschema_alone_or_first_keeps_schema_while_a_reference_is_left() -> None:
    body = with_schemas(STALE)
    for names in (["toolschema"], ["toolschema", "tooldefs"]):
        schema = _tools(Pipeline(names).run(body).body)[0]
        assert schema["$schema"] == DRAFT7
    assert "definitions" not in _tools(Pipeline(["toolschema", "tooldefs"]).run(body).body)[0]


def test_an_unsafe_tool_is_counted_and_its_bytes_go_on_untouched() -> None:
    unsafe = {**STALE, "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    body = with_schemas(unsafe)
    report = Pipeline(["tooldefs"]).run(body)
    assert report.body is body
    (run,) = report.runs
    assert run.outcome == "skipped"
    assert run.removed == {"unsafe:remote_ref": 1}


def test_the_mcp_capture_keeps_every_definition_because_each_is_referenced() -> None:
    body = (CAPTURES / "mcp-fastmcp.anthropic.json").read_bytes()
    report = Pipeline(["tooldefs"]).run(body)
    assert report.body is body
    (run,) = report.runs
    assert (run.outcome, run.reason, run.tools_seen, run.removed) == (
        "skipped",
        "nothing_to_strip",
        16,
        {},
    )


def test_definitions_added_unused_to_the_mcp_capture_are_removed_again() -> None:
    document = orjson.loads((CAPTURES / "mcp-fastmcp.anthropic.json").read_bytes())
    with_defs = [t for t in document["tools"] if "$defs" in t["input_schema"]]
    for tool in with_defs:
        tool["input_schema"]["$defs"]["Unused"] = {"type": "object", "title": "Unused"}
    padded = orjson.dumps(document)
    report = Pipeline(["tooldefs"]).run(padded)
    (run,) = report.runs
    assert run.outcome == "applied"
    assert run.removed == {"definitions": len(with_defs)}
    assert run.tools_changed == len(with_defs)
    original = (CAPTURES / "mcp-fastmcp.anthropic.json").read_bytes()
    assert _tools(report.body) == _tools(original)
