"""Tests for toolslim.core.schema: golden cases per rule of issue 2, and hypothesis properties that
the positional annotation stripper is lossless (jsonschema verdicts), idempotent, deterministic,
pure, and removes only annotation keys in schema positions."""

from __future__ import annotations

import copy
import json
import warnings
from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from golden_cases import golden
from toolslim.core.components.toolschema import ToolSchema
from toolslim.core.pipeline import Pipeline
from toolslim.core.schema import (
    TooDeep,
    decode_pointer,
    dialect,
    put_subschema,
    subschemas_of,
    survey,
)

# The spec's tables, written out again here from issue 2 so the tests do not trust the module's.
ANNOTATIONS = {
    "title",
    "examples",
    "example",
    "readOnly",
    "writeOnly",
    "deprecated",
    "$comment",
    "markdownDescription",
}
MAYBE_REMOVED = ANNOTATIONS | {"$id", "$schema"}
MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
SINGLE = {
    "items",
    "additionalItems",
    "additionalProperties",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
}
LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
REFERENCES = {"$ref", "$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor"}


def ordered(value: Any) -> str:
    """JSON text that keeps key order, so two values compare order-sensitively."""
    return json.dumps(value, ensure_ascii=False)


def strip(schema: Any) -> tuple[Any, Counter[str]]:
    return ToolSchema().rewrite(schema, "tool")


def schema_children(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Pairs (before, after) of the subschemas the spec says a walker may enter."""
    pairs = []
    for key, value in after.items():
        old = before[key]
        if key in MAPS and isinstance(old, dict):
            assert list(value) == list(old), f"members of {key} renamed or reordered"
            pairs += [(old[name], value[name]) for name in old]
        elif (key in LISTS or key == "items") and isinstance(old, list):
            assert len(value) == len(old)
            pairs += list(zip(old, value, strict=True))
        elif key in SINGLE:
            pairs.append((old, value))
        elif key == "dependencies" and isinstance(old, dict):
            assert list(value) == list(old)
            for name in old:
                if isinstance(old[name], dict):
                    pairs.append((old[name], value[name]))
                else:
                    assert ordered(value[name]) == ordered(old[name])
        else:  # instance data and unknown keywords: exactly as given
            assert ordered(value) == ordered(old), f"{key} changed"
    return pairs


def positional_removals(before: Any, after: Any, root: bool = True) -> Counter[str]:
    """Keys removed, by name, after checking that only schema-position annotations went (and
    `$schema` only from the root: below it, it declares an embedded dialect)."""
    removed: Counter[str] = Counter()
    if not isinstance(before, dict):
        assert ordered(after) == ordered(before)
        return removed
    assert isinstance(after, dict)
    gone = [key for key in before if key not in after]
    allowed = MAYBE_REMOVED if root else MAYBE_REMOVED - {"$schema"}
    assert set(gone) <= allowed, f"removed {set(gone) - allowed}"
    assert list(after) == [key for key in before if key in after], "key order changed"
    removed.update(gone)
    for old, new in schema_children(before, after):
        removed += positional_removals(old, new, root=False)
    return removed


def schema_positions(schema: Any) -> list[dict[str, Any]]:
    """Every schema object reachable through schema positions, root first."""
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for _, sub in schema_children(schema, schema):
        found += schema_positions(sub)
    return found


# Golden cases


@pytest.mark.parametrize(
    "case",
    golden("annotations.json") + golden("references.json") + golden("dialects.json"),
)
def test_golden_schema_comes_out_as_expected(case: dict[str, Any]) -> None:
    out, removed = strip(case["input"])
    assert ordered(out) == ordered(case["expected"])
    assert removed == positional_removals(case["input"], out)
    if out == case["input"]:
        assert out is case["input"]


@pytest.mark.parametrize(
    "case",
    golden("annotations.json") + golden("references.json") + golden("dialects.json"),
)
def test_golden_schema_in_a_request_body_gives_the_same_schema(case: dict[str, Any]) -> None:
    tool = {"name": "t", "input_schema": case["input"]}
    body = orjson.dumps({"model": "m", "tools": [tool]})
    report = Pipeline(["toolschema"]).run(body)
    assert orjson.loads(report.body)["tools"][0]["input_schema"] == case["expected"]
    if case["expected"] == case["input"]:
        assert report.runs[0].reason == "nothing_to_strip"


def test_nothing_to_strip_returns_the_very_same_object() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "default": {"title": 1}}}}
    out, removed = strip(schema)
    assert out is schema
    assert not removed


def test_unchanged_subschemas_are_shared_not_copied() -> None:
    keep = {"type": "string", "enum": ["a"]}
    schema = {"title": "t", "properties": {"a": keep, "b": {"title": "b"}}, "items": keep}
    out, _ = strip(schema)
    assert out["properties"]["a"] is keep
    assert out["items"] is keep


def test_removed_keywords_are_counted_by_name() -> None:
    schema = {
        "title": "t",
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "properties": {"a": {"title": "a", "examples": [1]}, "b": {"readOnly": True}},
    }
    _, removed = strip(schema)
    assert removed == Counter({"title": 2, "$schema": 1, "examples": 1, "readOnly": 1})


def test_a_schema_that_is_not_an_object_passes_through() -> None:
    for schema in (True, False, None, "x", [1]):
        out, removed = strip(schema)
        assert out is schema
        assert not removed


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("http://json-schema.org/draft-07/schema#", "draft-07"),
        ("http://json-schema.org/draft-07/schema", "draft-07"),
        ("https://json-schema.org/draft-07/schema#", "draft-07"),
        ("https://json-schema.org/draft-06/schema", "draft-06"),
        ("https://json-schema.org/draft/2019-09/schema", "2019-09"),
        ("http://json-schema.org/draft/2020-12/schema#", "2020-12"),
        ("http://json-schema.org/draft-04/schema#", None),
        ("https://example.com/meta", None),
        ("http://json-schema.org/draft-07/schema##", None),
        (7, None),
    ],
)
def test_dialect_matches_with_or_without_hash_over_http_or_https(uri: Any, expected: Any) -> None:
    assert dialect(uri) == expected


@pytest.mark.parametrize(
    ("reference", "pointer"),
    [
        ("#/examples/0", ("examples", "0")),
        ("#/%24defs/a%20b", ("$defs", "a b")),
        ("#/properties/a~1b/c~0d", ("properties", "a/b", "c~d")),
        ("#/x~01", ("x~1",)),
        ("#/a%7E1b", ("a/b",)),
        ("#/", ("",)),
        ("#", ()),
        ("other.json#/definitions/x", ("definitions", "x")),
        ("#anchor", None),
        ("other.json", None),
    ],
)
def test_decode_pointer_decodes_percent_escapes_then_tilde_escapes(
    reference: str, pointer: tuple[str, ...] | None
) -> None:
    assert decode_pointer(reference) == pointer


def test_survey_refuses_a_schema_nested_past_the_limit() -> None:
    schema: dict[str, Any] = {}
    for _ in range(300):
        schema = {"not": schema}
    with pytest.raises(TooDeep):
        survey(schema)


def test_subschemas_of_gives_every_subschema_position_and_nothing_else() -> None:
    node = {
        "properties": {"b": {"type": "string"}, "a": True},
        "items": [{"title": "0"}, False],
        "additionalProperties": False,
        "allOf": [{}],
        "dependencies": {"a": ["b"], "c": {"minimum": 1}},
        "not": [{"title": "a list is not one schema"}],
        "anyOf": {"x": {}},
        "patternProperties": [{}],
        "default": {"properties": {"x": {}}},
        "x-unknown": {"items": {}},
    }
    found = [(keyword, member, sub) for keyword, member, sub in subschemas_of(node)]
    assert sorted(found, key=lambda f: (f[0], str(f[1]))) == [
        ("additionalProperties", None, False),
        ("allOf", 0, {}),
        ("dependencies", "c", {"minimum": 1}),
        ("items", 0, {"title": "0"}),
        ("items", 1, False),
        ("properties", "a", True),
        ("properties", "b", {"type": "string"}),
    ]
    assert [m for k, m, _ in found if k == "properties"] == ["b", "a"]  # document order


def test_a_value_of_the_wrong_shape_under_a_subschema_keyword_is_not_walked() -> None:
    schema = {"not": [{"$ref": "#", "title": "x"}], "allOf": {"a": {"$ref": "#", "title": "y"}}}
    assert not survey(schema).references
    out, removed = strip(schema)
    assert out is schema
    assert not removed


def test_put_subschema_copies_the_holder_once_and_leaves_the_node_alone() -> None:
    node = {"properties": {"a": {}, "b": {}}, "not": {}}
    before = copy.deepcopy(node)
    changed: dict[str, Any] = {}
    put_subschema(changed, node, "properties", "a", {"type": "string"})
    put_subschema(changed, node, "properties", "b", True)
    put_subschema(changed, node, "not", None, False)
    assert changed == {"properties": {"a": {"type": "string"}, "b": True}, "not": False}
    assert ordered(node) == ordered(before)


# Hypothesis: generated schemas with annotations in schema and instance positions

NAMES = ["a", "b", "title", "examples", "readOnly", "$schema", "$ref", "type", "default"]
TEXT = st.sampled_from(["", "x", "ab", "title", "#/examples/0", "é", "A1"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, -1.5, 2.0]),
    TEXT,
)
INSTANCES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(NAMES + sorted(ANNOTATIONS)), inner, max_size=3),
    ),
    max_leaves=6,
)
REFERENCE_TARGETS = [
    "#/$defs/a",
    "#/$defs/b",
    "#/examples/0",
    "#/$defs/a/examples/0",
    "#/%24defs/b",
    "#/$defs/a/title",
    "#/definitions/c",
]
DIALECT_URIS = [
    "https://json-schema.org/draft/2020-12/schema",
    "http://json-schema.org/draft-07/schema#",
    "https://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema#",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-04/schema#",
]
TYPES = ["string", "number", "integer", "object", "array", "boolean", "null"]

ASSERTIONS = {
    "type": st.one_of(
        st.sampled_from(TYPES),
        st.lists(st.sampled_from(TYPES), min_size=1, max_size=2, unique=True),
    ),
    "minimum": st.integers(-2, 2),
    "exclusiveMinimum": st.one_of(st.booleans(), st.integers(-1, 1)),  # draft-04: a boolean
    "maxLength": st.integers(0, 2),
    "pattern": st.sampled_from(["^a", "b$", "^$"]),
    "const": INSTANCES,
    "enum": st.lists(INSTANCES, min_size=1, max_size=3),
    "required": st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    "minItems": st.integers(0, 2),
    "uniqueItems": st.booleans(),
    "maxProperties": st.integers(0, 2),
    "multipleOf": st.sampled_from([1, 2, 0.5]),
    "default": INSTANCES,
    "description": TEXT,
}
ANNOTATION_VALUES = {
    "title": st.one_of(TEXT, st.fixed_dictionaries({"type": st.sampled_from(TYPES)})),
    "examples": st.lists(INSTANCES, max_size=2),
    "example": INSTANCES,
    "readOnly": st.booleans(),
    "writeOnly": st.booleans(),
    "deprecated": st.booleans(),
    "$comment": TEXT,
    "markdownDescription": TEXT,
    "$id": st.sampled_from(["urn:example:x", "https://example.com/s", "#frag"]),
    "$schema": st.sampled_from(DIALECT_URIS),
}


@st.composite
def keyword_objects(draw: st.DrawFn, values: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """An object with a few keywords drawn from `values` (cheaper than many optional keys)."""
    keys = draw(st.lists(st.sampled_from(sorted(values)), max_size=4, unique=True))
    return {key: draw(values[key]) for key in keys}


LEAF = st.one_of(st.booleans(), keyword_objects({**ASSERTIONS, **ANNOTATION_VALUES}))


def subschema_keywords(children: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    names = st.sampled_from(NAMES)
    return {
        "properties": st.dictionaries(names, children, max_size=3),
        "patternProperties": st.dictionaries(st.sampled_from(["^a", "e"]), children, max_size=2),
        "additionalProperties": children,
        "propertyNames": children,
        "items": st.one_of(children, st.lists(children, max_size=2)),
        "additionalItems": children,
        "prefixItems": st.lists(children, max_size=2),
        "contains": children,
        "minContains": st.integers(0, 2),
        "not": children,
        "if": children,
        "then": children,
        "else": children,
        "allOf": st.lists(children, min_size=1, max_size=2),
        "anyOf": st.lists(children, min_size=1, max_size=2),
        "oneOf": st.lists(children, min_size=1, max_size=2),
        "dependencies": st.dictionaries(
            names, st.one_of(children, st.lists(names, max_size=2, unique=True)), max_size=2
        ),
        "dependentSchemas": st.dictionaries(names, children, max_size=2),
        "dependentRequired": st.dictionaries(
            names, st.lists(names, max_size=2, unique=True), max_size=2
        ),
        "unevaluatedProperties": children,
        "unevaluatedItems": children,
        "contentSchema": children,
        "x-unknown": INSTANCES,
    }


@st.composite
def schema_objects(
    draw: st.DrawFn, children: st.SearchStrategy[Any], references: bool
) -> dict[str, Any]:
    """A schema object: a few subschema keywords, plus assertions and annotations."""
    node = draw(keyword_objects(subschema_keywords(children)))
    node.update(draw(keyword_objects({**ASSERTIONS, **ANNOTATION_VALUES})))
    if references and draw(st.integers(0, 3)) == 0:
        node[draw(st.sampled_from(["$ref", "$ref", "$anchor"]))] = draw(
            st.sampled_from(REFERENCE_TARGETS)
        )
    return node


def schemas(references: bool) -> st.SearchStrategy[Any]:
    return st.recursive(LEAF, lambda c: schema_objects(c, references), max_leaves=10)


@st.composite
def tool_schemas(draw: st.DrawFn) -> Any:
    """A root schema; sometimes with a `$schema`, `$defs` a `$ref` can reach, and root
    `examples` holding schemas (the targets of pointers into annotations)."""
    root = draw(schemas(references=draw(st.booleans())))
    if not isinstance(root, dict):
        return root
    root = dict(root)
    if draw(st.booleans()):
        root["$schema"] = draw(st.sampled_from(DIALECT_URIS))
    if draw(st.booleans()):
        reference_free = schemas(references=False)
        root["$defs"] = draw(
            st.fixed_dictionaries({}, optional={"a": reference_free, "b": reference_free})
        )
        if draw(st.booleans()):
            root["examples"] = draw(st.lists(reference_free, min_size=1, max_size=2))
    return root


def verdict(validator: Any, schema: Any, instance: Any) -> Any:
    """True/False, or the name of what jsonschema raised (the same schema must raise the same)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return validator(schema).is_valid(instance)
        except RecursionError:
            return "RecursionError"
        except Exception as exc:
            return type(exc).__name__


PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(tool_schemas(), st.lists(INSTANCES, min_size=1, max_size=4))
def test_validation_verdicts_are_identical_before_and_after(
    schema: Any, instances: list[Any]
) -> None:
    out, _ = strip(schema)
    for validator in (Draft7Validator, Draft202012Validator):
        for instance in instances:
            assert verdict(validator, out, instance) == verdict(validator, schema, instance), (
                validator.__name__,
                instance,
            )


@PROPERTY
@given(tool_schemas())
def test_stripping_twice_changes_nothing_more(schema: Any) -> None:
    once, _ = strip(schema)
    twice, removed = strip(once)
    assert twice is once
    assert not removed


@PROPERTY
@given(tool_schemas())
def test_stripping_is_deterministic(schema: Any) -> None:
    first, removed_first = strip(schema)
    second, removed_second = strip(copy.deepcopy(schema))
    assert ordered(first) == ordered(second)
    assert removed_first == removed_second


@PROPERTY
@given(tool_schemas())
def test_stripping_never_mutates_its_input(schema: Any) -> None:
    before = copy.deepcopy(schema)
    strip(schema)
    assert ordered(schema) == ordered(before)


@PROPERTY
@given(tool_schemas())
def test_only_annotation_keys_in_schema_positions_are_removed(schema: Any) -> None:
    out, removed = strip(schema)
    assert removed == positional_removals(schema, out)


@PROPERTY
@given(schemas(references=False))
def test_without_references_every_annotation_in_a_schema_position_goes(schema: Any) -> None:
    out, _ = strip(schema)
    for node in schema_positions(out):
        assert not (set(node) & (ANNOTATIONS | {"$id"})), node


@PROPERTY
@given(
    st.sampled_from(DIALECT_URIS[:2] + DIALECT_URIS[-1:]),
    st.sampled_from(DIALECT_URIS),
    schemas(references=False),
    INSTANCES,
)
def test_a_nested_schema_keyword_keeps_declaring_its_subschemas_dialect(
    outer: str, inner: str, sub: Any, instance: Any
) -> None:
    # draft-07 list-form items keeps a draft-07 root; the nested `$schema` must then stay too.
    nested = {**(sub if isinstance(sub, dict) else {}), "$schema": inner}
    schema = {"$schema": outer, "items": [True], "properties": {"a": nested}}
    out, _ = strip(schema)
    for validator in (Draft7Validator, Draft202012Validator):
        for wrapped in ({"a": instance}, {"a": [instance, instance]}):
            assert verdict(validator, out, wrapped) == verdict(validator, schema, wrapped)
