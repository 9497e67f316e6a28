"""Tests for toolslim.core.components.toolschema: draft-04's `id` is read as `$id` is (a golden
file), the references that keep an `$id` are the ones tooldefs counts, and the factory."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft4Validator

from golden_cases import golden
from toolslim.core.components import tooldefs, toolschema
from toolslim.core.components.toolschema import ToolSchema
from toolslim.core.schema import REFERENCES

DRAFT04 = golden("draft04_ids.json")


@pytest.mark.parametrize("case", DRAFT04)
def test_draft04_ids_are_read_as_ids(case: dict[str, Any]) -> None:
    given = copy.deepcopy(case["input"])
    out, _ = ToolSchema().rewrite(given, "tool")
    assert out == case["expected"]
    assert given == case["input"]  # never mutated


@pytest.mark.parametrize("instance", [{"inner": {"n": 5}}, {"inner": {"n": "five"}}, {}])
def test_a_pointer_below_a_draft04_id_validates_as_before(instance: Any) -> None:
    schema = DRAFT04[0].values[0]["input"]
    out, _ = ToolSchema().rewrite(schema, "tool")
    assert Draft4Validator(out).is_valid(instance) == Draft4Validator(schema).is_valid(instance)


@pytest.mark.parametrize("keyword", sorted(REFERENCES))
def test_every_reference_keyword_keeps_the_ids_it_may_resolve_against(keyword: str) -> None:
    value: Any = True if keyword == "$recursiveAnchor" else "#/$defs/a"
    schema = {
        "$id": "https://example.com/tool.json",
        "properties": {"a": {keyword: value, "title": "A"}},
        "$defs": {"a": {"type": "string"}},
    }
    out, removed = ToolSchema().rewrite(schema, "tool")
    assert out["$id"] == "https://example.com/tool.json"
    assert removed == {"title": 1}


def test_tooldefs_counts_as_unsafe_every_reference_but_a_pointer() -> None:
    assert set(tooldefs.UNSAFE_KEYWORDS) == set(REFERENCES) - {"$ref"}


def test_the_factory_makes_the_component_and_takes_no_options() -> None:
    assert isinstance(toolschema.make({}), ToolSchema)
    with pytest.raises(ValueError, match="toolschema takes no options, got keep"):
        toolschema.make({"keep": ["title"]})
