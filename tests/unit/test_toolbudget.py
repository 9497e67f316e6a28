"""toolbudget: oversized schemas shrink step by step to a byte budget; names and required stay."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden_cases import golden
from toolslim.core.components import toolbudget as budget
from toolslim.core.components.toolbudget import DEFAULT_BUDGET_BYTES, ToolBudget
from toolslim.core.pipeline import Pipeline
from toolslim.core.schema import MAX_DEPTH, TooDeep

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
STEP_KEYS = ("step1_descriptions", "step2_definitions", "step3_deep_nodes", "step4_combinators")


def size(schema: Any) -> int:
    return len(orjson.dumps(schema))


@pytest.mark.parametrize("case", golden("toolbudget_*.json"))
def test_golden_case(case: dict[str, Any]) -> None:
    given_ = case["input"]
    schema = given_["schema"]
    untouched = copy.deepcopy(schema)
    component = budget.make(given_["options"])
    out, counts = component.rewrite(schema, given_["tool_name"])
    assert out == case["expected"]["schema"]
    assert dict(counts) == case["expected"]["counts"]
    assert schema == untouched  # never mutates its input
    if out == schema:
        assert out is schema  # identity means "no change"
    again, _ = component.rewrite(out, given_["tool_name"])
    assert again == out  # idempotent


@pytest.mark.parametrize(
    ("options", "option", "bad"),
    [
        ({"budget": 100}, "'budget'", "budget_bytes, exclude_tools"),
        ({"budget_bytes": 0}, "budget_bytes", "got 0"),
        ({"budget_bytes": -5}, "budget_bytes", "got -5"),
        ({"budget_bytes": "5000"}, "budget_bytes", "got '5000'"),
        ({"budget_bytes": 5000.0}, "budget_bytes", "got 5000.0"),
        ({"budget_bytes": True}, "budget_bytes", "got True"),
        ({"budget_bytes": None}, "budget_bytes", "got None"),
        ({"exclude_tools": "web_search"}, "exclude_tools", "got 'web_search'"),
        ({"exclude_tools": ["ok", 3]}, "exclude_tools", "got ['ok', 3]"),
        ({"exclude_tools": {"a": 1}}, "exclude_tools", "got {'a': 1}"),
    ],
)
def test_factory_rejects_a_bad_option_naming_it_and_repeating_the_value(
    options: dict[str, Any], option: str, bad: str
) -> None:
    with pytest.raises(ValueError) as caught:
        budget.make(options)
    message = str(caught.value)
    assert message.startswith("toolbudget")
    assert option in message and bad in message


def test_a_pipeline_with_bad_options_fails_when_built() -> None:
    with pytest.raises(ValueError, match=r"toolbudget\.budget_bytes.*got -1"):
        Pipeline(["toolbudget"], options={"toolbudget": {"budget_bytes": -1}})


def test_factory_defaults_to_5000_bytes_and_no_exclusions() -> None:
    component = budget.make({})
    assert (component.budget_bytes, component.exclude_tools) == (5000, frozenset())
    assert DEFAULT_BUDGET_BYTES == 5000
    custom = budget.make({"budget_bytes": 800, "exclude_tools": ["web_search", "Bash"]})
    assert (custom.budget_bytes, custom.exclude_tools) == (800, {"web_search", "Bash"})


def test_nesting_past_the_limit_raises_too_deep() -> None:
    node: dict[str, Any] = {"type": "string", "description": "d"}
    for _ in range(MAX_DEPTH + 1):
        node = {"items": node}
    with pytest.raises(TooDeep):
        ToolBudget(10).rewrite({"properties": {"a": node}}, "t")


def test_a_schema_orjson_cannot_write_is_left_alone() -> None:
    schema = {"properties": {"a": {"description": "\ud800" * 50}}}
    assert ToolBudget(10).rewrite(schema, "t") == (schema, {})


# --- properties over generated schemas --------------------------------------------------

KEYS = ("description", "a", "b", "items", "title")
text = st.text(alphabet="abc xyz", max_size=30)
leaves = st.sampled_from(
    [{"type": "string"}, {"type": "integer"}, {"$ref": "#/$defs/D"}, {"$ref": "#"}, {}, True]
) | st.builds(lambda d: {"type": "string", "description": d}, text)
nodes = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(
            lambda props, d: {"type": "object", "description": d, "properties": props},
            st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
            text,
        ),
        st.builds(lambda sub: {"type": "array", "items": sub}, inner),
        st.builds(lambda subs: {"anyOf": subs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda sub: {"not": sub, "default": {"description": "data"}}, inner),
    ),
    max_leaves=10,
)
schemas = st.builds(
    lambda props, required, table, d: {
        "type": "object",
        "description": d,
        "properties": props,
        "required": required,
        "$defs": table,
    },
    st.dictionaries(st.sampled_from(KEYS), nodes, max_size=4),
    st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
    st.dictionaries(st.sampled_from(("D", "E")), nodes, max_size=2),
    text,
)


@settings(max_examples=300, deadline=None)
@given(schemas, st.integers(1, 1500))
def test_budget_never_mutates_is_idempotent_and_keeps_names_and_required(
    schema: dict[str, Any], budget_bytes: int
) -> None:
    untouched = copy.deepcopy(schema)
    component = ToolBudget(budget_bytes)
    out, counts = component.rewrite(schema, "tool")
    assert schema == untouched
    assert orjson.dumps(component.rewrite(untouched, "tool")[0]) == orjson.dumps(out)
    assert list(out["properties"]) == list(schema["properties"])
    assert out["required"] == schema["required"]
    assert out["description"] == schema["description"]
    again, more = component.rewrite(out, "tool")
    assert again == out
    if size(schema) <= budget_bytes:
        assert out is schema and not counts
        return
    assert size(out) <= size(schema)
    assert ("over_budget" in counts) == (size(out) > budget_bytes)
    removed = sum(counts[f"step{n}_bytes"] for n in range(1, 5))
    assert removed == size(schema) - size(out)
    changed = [key for key in STEP_KEYS if counts[key]]
    # The stopping rule: only the last step that ran may leave the schema within budget.
    if "over_budget" not in counts and changed:
        assert size(out) <= budget_bytes
    if "over_budget" in counts:
        assert not more or set(more) <= {"over_budget"}


# --- end to end through the pipeline ----------------------------------------------------


def _schemas(body: bytes) -> dict[str, Any]:
    return {t["name"]: t["input_schema"] for t in orjson.loads(body)["tools"]}


def test_default_budget_leaves_every_capture_unchanged() -> None:
    # The largest tool schema in captures/ is Workflow's, at 1,633 bytes.
    for path in sorted(CAPTURES.glob("*.json")):
        body = path.read_bytes()
        report = Pipeline(["toolbudget"]).run(body)
        (run,) = report.runs
        assert run.tools_changed == 0, path.name
        assert not run.removed, path.name


def test_a_small_budget_shrinks_big_tools_spares_excluded_ones_and_keeps_names() -> None:
    body = (CAPTURES / "claude-code.anthropic.json").read_bytes()
    options = {"toolbudget": {"budget_bytes": 600, "exclude_tools": ["Bash"]}}
    report = Pipeline(["toolbudget"], options=options).run(body)
    (run,) = report.runs
    assert run.outcome == "applied"
    before, after = _schemas(body), _schemas(report.body)
    assert after["Bash"] == before["Bash"]
    for name, schema in before.items():
        assert list(after[name].get("properties", {})) == list(schema.get("properties", {}))
        assert after[name].get("required") == schema.get("required")
        if name != "Bash":
            fits = size(after[name]) <= 600
            assert fits or size(after[name]) < size(schema)
    big = [n for n, s in before.items() if size(s) > 600 and n != "Bash"]
    assert run.tools_changed == len(big) > 0
    assert run.removed["excluded"] == 1
    assert run.removed["step1_descriptions"] == len(big)
    assert run.removed["step1_bytes"] > 0
    assert run.bytes_after < run.bytes_before


def test_toolbudget_after_toolschema_sees_the_compacted_schemas() -> None:
    body = (CAPTURES / "mcp-fastmcp.anthropic.json").read_bytes()
    options = {"toolbudget": {"budget_bytes": 700}}
    alone = Pipeline(["toolbudget"], options=options).run(body)
    after = Pipeline(["toolschema", "toolbudget"], options=options).run(body)
    runs = {run.component: run for run in after.runs}
    # toolschema already brought some schemas under 700 bytes: fewer are left to shrink.
    assert runs["toolbudget"].tools_changed < alone.runs[0].tools_changed
    assert runs["toolschema"].bytes_after == runs["toolbudget"].bytes_before
    for schema in _schemas(after.body).values():
        assert size(schema) <= 700
