"""Tests for toolslim.core.catalog: where tool schemas live in each API shape, how a component is
applied to every one of them, and the canonical bytes a rewritten catalogue is written in."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import orjson
import pytest

from golden_cases import golden
from toolslim.core.catalog import (
    count_tools,
    deferred_tools,
    leaf_tools,
    rewrite_catalogue,
    serialize,
)
from toolslim.core.components.toolschema import ToolSchema
from toolslim.core.entry import parse_catalogue
from toolslim.core.pipeline import Pipeline
from toolslim.core.schema import TooDeep


class Recorder:
    """A component that changes nothing and remembers which schemas it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, Any]] = []

    def __call__(self, schema: Any, tool_name: str | None) -> tuple[Any, Counter[str]]:
        self.seen.append((tool_name, schema))
        return schema, Counter()


def mark(schema: Any, tool_name: str | None) -> tuple[Any, Counter[str]]:
    """A component that tags every schema it is given with the tool's name."""
    return {**schema, "x-tool": tool_name}, Counter({"marked": 1})


@pytest.mark.parametrize("case", golden("shapes.json"))
def test_each_api_shape_compacts_only_its_tool_schemas(case: dict[str, Any]) -> None:
    body = case["input"].encode()
    report = Pipeline(["toolschema"]).run(body)
    assert report.body.decode() == case["expected"]
    (run,) = report.runs
    assert run.outcome == "applied"
    assert (run.tools_seen, run.tools_changed) == (case["tools"], case["changed"])


@pytest.mark.parametrize("case", golden("shapes.json"))
def test_each_api_shape_keeps_every_tool_name_and_description(case: dict[str, Any]) -> None:
    def names(value: Any) -> list[Any]:
        if isinstance(value, dict):
            own = [(value.get("name"), value.get("description"))] if "name" in value else []
            schemas = {"input_schema", "parameters", "parametersJsonSchema"}
            return own + [n for k, v in value.items() if k not in schemas for n in names(v)]
        if isinstance(value, list):
            return [n for item in value for n in names(item)]
        return []

    before = orjson.loads(case["input"])
    after = orjson.loads(case["expected"])
    assert names(after) == names(before)


SHAPES = {
    "anthropic": [{"name": "a", "description": "d", "input_schema": {"type": "object"}}],
    "openai chat": [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}
    ],
    "responses": [{"type": "function", "name": "a", "parameters": {"type": "object"}}],
    "responses namespace": [
        {
            "type": "namespace",
            "name": "ns",
            "tools": [{"type": "function", "name": "a", "parameters": {"type": "object"}}],
        }
    ],
    "gemini": [{"functionDeclarations": [{"name": "a", "parameters": {"type": "object"}}]}],
    "gemini json schema": [
        {"functionDeclarations": [{"name": "a", "parametersJsonSchema": {"type": "object"}}]}
    ],
    "gemini snake case": [
        {"function_declarations": [{"name": "a", "parameters_json_schema": {"type": "object"}}]}
    ],
}


@pytest.mark.parametrize("catalogue", SHAPES.values(), ids=SHAPES.keys())
def test_the_component_sees_each_shapes_schema_with_its_tool_name(catalogue: list[Any]) -> None:
    recorder = Recorder()
    out, change = rewrite_catalogue(catalogue, recorder)
    assert recorder.seen == [("a", {"type": "object"})]
    assert out is catalogue
    assert (change.tools_seen, change.tools_changed) == (1, 0)


@pytest.mark.parametrize("catalogue", SHAPES.values(), ids=SHAPES.keys())
def test_a_changed_schema_is_put_back_where_it_was(catalogue: list[Any]) -> None:
    before = copy.deepcopy(catalogue)
    out, change = rewrite_catalogue(catalogue, mark)
    assert catalogue == before  # the input is never mutated
    assert out is not catalogue
    text = json.dumps(out)
    assert text == json.dumps(before).replace('"object"}', '"object", "x-tool": "a"}')
    assert change.removed == Counter({"marked": 1})
    assert (change.tools_seen, change.tools_changed) == (1, 1)


def test_tools_without_a_schema_pass_through_untouched() -> None:
    catalogue = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "custom", "name": "patch", "format": {"type": "grammar", "definition": "x"}},
        {"type": "web_search"},
        {"googleSearch": {}},
        "not a tool",
        {"name": "odd", "input_schema": "not a schema"},
    ]
    recorder = Recorder()
    out, change = rewrite_catalogue(catalogue, recorder)
    assert out is catalogue
    assert recorder.seen == []
    assert change.tools_seen == 5


def test_a_boolean_tool_schema_is_handed_to_the_component() -> None:
    recorder = Recorder()
    rewrite_catalogue([{"name": "t", "input_schema": True}], recorder)
    assert recorder.seen == [("t", True)]


def test_unchanged_tools_are_shared_in_a_changed_catalogue() -> None:
    keep = {"name": "keep", "input_schema": {"type": "object"}}
    catalogue = [keep, {"name": "strip", "input_schema": {"title": "x"}}]
    out, change = rewrite_catalogue(catalogue, ToolSchema().rewrite)
    assert out[0] is keep
    assert out[1] == {"name": "strip", "input_schema": {}}
    assert (change.tools_seen, change.tools_changed) == (2, 1)
    assert change.removed == Counter({"title": 1})


def test_a_tool_without_a_string_name_is_still_rewritten() -> None:
    recorder = Recorder()
    rewrite_catalogue([{"name": 5, "input_schema": {}}, {"input_schema": {}}], recorder)
    assert [name for name, _ in recorder.seen] == [None, None]


def test_count_tools_counts_leaf_tools_not_groups() -> None:
    catalogue = SHAPES["responses namespace"] + SHAPES["openai chat"] + SHAPES["gemini"]
    assert count_tools(catalogue) == 3
    assert count_tools([]) == 0


def test_leaf_tools_are_the_tools_count_tools_counts_in_document_order() -> None:
    catalogue = [*SHAPES["responses namespace"], *SHAPES["openai chat"], *SHAPES["gemini"]]
    catalogue += ["not a tool", {"type": "web_search"}, {"type": "namespace", "tools": []}]
    leaves = leaf_tools(catalogue)
    expected = [
        catalogue[0]["tools"][0],
        catalogue[1]["function"],
        catalogue[2]["functionDeclarations"][0],
        catalogue[4],
    ]
    assert len(leaves) == len(expected) == count_tools(catalogue)
    assert all(leaf is tool for leaf, tool in zip(leaves, expected, strict=True))


def test_deferred_tools_are_the_leaf_tools_marked_defer_loading_true() -> None:
    search = {"name": "ToolSearch", "input_schema": {"type": "object"}}
    found = {"name": "mcp__s__t", "defer_loading": True, "input_schema": {"type": "object"}}
    member = {"type": "function", "name": "m", "defer_loading": True, "parameters": {}}
    namespace = {"type": "namespace", "name": "crm", "tools": [member, {"name": "n"}]}
    not_true = [{"name": "f", "defer_loading": "true"}, {"name": "g", "defer_loading": 1}]
    catalogue: list[Any] = [search, found, namespace, *not_true, "not a tool"]
    deferred = deferred_tools(catalogue)
    assert len(deferred) == 2
    assert deferred[0] is found and deferred[1] is member
    assert deferred_tools([search]) == []
    # On a namespace it means nothing (OpenAI: it applies to the functions inside).
    assert deferred_tools([{"type": "namespace", "defer_loading": True, "tools": [search]}]) == []


def test_a_group_with_its_own_schema_has_it_rewritten_in_document_order() -> None:
    inner = {"name": "a", "parameters": {"title": "inner"}}
    group = {"name": "ns", "tools": [inner], "parameters": {"title": "group"}}
    recorder = Recorder()
    rewrite_catalogue([group], recorder)
    assert [name for name, _ in recorder.seen] == ["a", "ns"]
    out, change = rewrite_catalogue([group], ToolSchema().rewrite)
    assert out == [{"name": "ns", "tools": [{"name": "a", "parameters": {}}], "parameters": {}}]
    assert (change.tools_seen, change.tools_changed) == (1, 1)  # the group is not a tool
    assert change.removed == Counter({"title": 2})


def test_tool_groups_nested_past_the_limit_are_refused() -> None:
    tool: dict[str, Any] = {"name": "a", "input_schema": {}}
    for _ in range(300):
        tool = {"type": "namespace", "tools": [tool]}
    with pytest.raises(TooDeep):
        rewrite_catalogue([tool], Recorder())


# serialize: the canonical bytes


def test_serialize_is_compact_raw_utf8_with_keys_sorted_by_code_point() -> None:
    keys = ["b", "a", "B", "é", "\uffff", "😀", "\ue000", "_", "10", "9", ""]
    catalogue = [{"name": "t", "description": {k: 1 for k in keys}}]
    out = serialize(catalogue)
    assert (
        out
        == (
            '[{"description":{"":1,"10":1,"9":1,"B":1,"_":1,"a":1,"b":1,"é":1,"\ue000":1,'
            '"\uffff":1,"😀":1},"name":"t"}]'
        ).encode()
    )
    assert sorted(keys) == [k for k in json.loads(out)[0]["description"]]


def test_serialize_keeps_the_member_order_of_name_to_schema_maps() -> None:
    schema = {
        "type": "object",
        "properties": {"z": {"type": "string", "b": 1, "a": 2}, "a": {}},
        "patternProperties": {"^z": {}, "^a": {}},
        "$defs": {"z": {}, "a": {"properties": {"y": {}, "x": {}}}},
        "definitions": {"z": {}, "a": {}},
        "dependentSchemas": {"z": {}, "a": {}},
        "dependencies": {"z": ["b", "a"], "a": {"properties": {"y": {}, "x": {}}}},
        "allOf": [{"properties": {"y": {}, "x": {}}}],
        "items": [{"properties": {"y": {}, "x": {}}}],
        "not": {"properties": {"y": {}, "x": {}}},
    }
    out = serialize([{"parameters": schema, "name": "t"}])
    assert out == (
        b'[{"name":"t","parameters":{'
        b'"$defs":{"z":{},"a":{"properties":{"y":{},"x":{}}}},'
        b'"allOf":[{"properties":{"y":{},"x":{}}}],'
        b'"definitions":{"z":{},"a":{}},'
        b'"dependencies":{"a":{"properties":{"y":{},"x":{}}},"z":["b","a"]},'
        b'"dependentSchemas":{"z":{},"a":{}},'
        b'"items":[{"properties":{"y":{},"x":{}}}],'
        b'"not":{"properties":{"y":{},"x":{}}},'
        b'"patternProperties":{"^z":{},"^a":{}},'
        b'"properties":{"z":{"a":2,"b":1,"type":"string"},"a":{}},'
        b'"type":"object"}}]'
    )


def test_serialize_sorts_maps_that_are_not_in_a_schema_position() -> None:
    catalogue = [
        {
            "name": "t",
            "input_schema": {"default": {"properties": {"b": 1, "a": 2}}},
            "meta": {"properties": {"b": 1, "a": 2}},
        }
    ]
    assert serialize(catalogue) == (
        b'[{"input_schema":{"default":{"properties":{"a":2,"b":1}}},'
        b'"meta":{"properties":{"a":2,"b":1}},"name":"t"}]'
    )


def test_serialize_sorts_inside_every_nested_tool_shape() -> None:
    catalogue = [
        {
            "type": "namespace",
            "tools": [{"name": "a", "parameters": {"properties": {"y": {}, "x": {}}, "b": 1}}],
        },
        {"type": "function", "function": {"parameters": {"properties": {"y": {}, "x": {}}}}},
        {"functionDeclarations": [{"parameters": {"properties": {"y": {}, "x": {}}}}]},
    ]
    assert serialize(catalogue) == (
        b'[{"tools":[{"name":"a","parameters":{"b":1,"properties":{"y":{},"x":{}}}}],'
        b'"type":"namespace"},'
        b'{"function":{"parameters":{"properties":{"y":{},"x":{}}}},"type":"function"},'
        b'{"functionDeclarations":[{"parameters":{"properties":{"y":{},"x":{}}}}]}]'
    )


def test_serialize_writes_numbers_in_their_original_spelling() -> None:
    raw = b'[{"input_schema":{"enum":[1.0,1e3,-0,1.50,1180591620717411303424]},"name":"n"}]'
    assert serialize(parse_catalogue(raw)) == raw


def test_serialize_does_not_mutate_the_catalogue() -> None:
    catalogue = [{"name": "t", "input_schema": {"properties": {"b": {}, "a": {}}}}]
    before = copy.deepcopy(catalogue)
    serialize(catalogue)
    assert json.dumps(catalogue) == json.dumps(before)
