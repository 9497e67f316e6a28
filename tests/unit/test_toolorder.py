"""toolorder: one canonical order per set of tools, no tool's bytes changed, so an order-only
change at the client reaches the provider as no change at all."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from golden_cases import golden
from toolslim.config.settings import ConfigError, load_settings
from toolslim.core.components.toolorder import REORDERED, make, order_catalogue, reorder_raw
from toolslim.core.facts import layout
from toolslim.core.pipeline import Pipeline

SEPARATORS = {"compact": (",", ":"), "spaced": (", ", ": ")}


def written(catalogue: Any, style: str = "spaced") -> bytes:
    return json.dumps(catalogue, separators=SEPARATORS[style], ensure_ascii=False).encode()


def tool_bytes(raw: bytes, catalogue: list[Any]) -> list[bytes]:
    """The exact bytes of every tool in `raw`, one level of nesting read, sorted."""
    found = []
    for slot in layout(raw, catalogue).slots:
        if slot.nested is None:
            found.append(raw[slot.start : slot.end])
        else:
            found += [raw[s.start : s.end] for s in slot.nested[1].slots]
    return sorted(found)


@pytest.mark.parametrize("case", golden("toolorder*.json"))
def test_golden_order(case: dict[str, Any]) -> None:
    given = copy.deepcopy(case["input"])
    ordered, moved = order_catalogue(given)
    assert ordered == case["expected"]
    assert given == case["input"]  # never mutated
    assert (moved == 0) == (case["input"] == case["expected"])
    again, moved_again = order_catalogue(ordered)
    assert again is ordered and moved_again == 0  # idempotent: nothing more to move


@pytest.mark.parametrize("style", SEPARATORS)
@pytest.mark.parametrize("case", golden("toolorder*.json"))
def test_golden_order_as_bytes_rearranges_the_clients_own_bytes(
    case: dict[str, Any], style: str
) -> None:
    raw = written(case["input"], style)
    out = reorder_raw(raw, case["input"])
    assert json.loads(out) == case["expected"]
    assert len(out) == len(raw)
    assert tool_bytes(out, case["expected"]) == tool_bytes(raw, case["input"])
    if style == "compact":  # separators in place: the compact writing of the new order
        assert out == written(case["expected"], style)


def test_an_ordered_catalogue_comes_back_as_the_same_object() -> None:
    catalogue = [{"name": "a"}, {"name": "b"}]
    assert order_catalogue(catalogue) == (catalogue, 0)
    assert order_catalogue(catalogue)[0] is catalogue


names = st.text(alphabet="abcAB_é", min_size=1, max_size=3)
tools = st.lists(
    st.builds(
        lambda name, cache, deferred, text: {
            "name": name,
            "description": text,
            **({"cache_control": {"type": "ephemeral"}} if cache else {}),
            **({"defer_loading": True} if deferred else {}),
        },
        names,
        st.booleans(),
        st.booleans(),
        st.text(max_size=3),
    ),
    max_size=8,
)


@given(tools)
def test_the_order_is_a_deterministic_idempotent_permutation_that_anchors_breakpoints(
    catalogue: list[dict[str, Any]],
) -> None:
    ordered, _ = order_catalogue(catalogue)
    assert sorted(map(orjson.dumps, ordered)) == sorted(map(orjson.dumps, catalogue))
    assert order_catalogue(ordered)[0] == ordered
    assert order_catalogue(list(reversed(catalogue)))[0] == ordered or any(
        "cache_control" in t for t in catalogue
    )
    for index, tool in enumerate(catalogue):
        if "cache_control" in tool:
            assert ordered[index] is tool
    free = [t for t in ordered if "cache_control" not in t]
    flags = [t.get("defer_loading", False) for t in free]
    assert flags == sorted(flags)  # deferred after the rest
    raw = written(catalogue)
    assert json.loads(reorder_raw(raw, catalogue)) == ordered


def test_toolorder_takes_no_options_and_config_says_so(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="toolorder takes no options"):
        make({"by": "name"})
    config = tmp_path / "toolslim.yaml"
    config.write_text("components:\n  toolorder:\n    by: name\n")
    with pytest.raises(ConfigError, match=r"components\.toolorder"):
        load_settings(str(config), {}, {})


# --- in the pipeline ---------------------------------------------------------------------------


def body_with(catalogue: list[Any], style: str = "compact") -> bytes:
    return b'{"model":"m","messages":[],"tools":' + written(catalogue, style) + b',"stream":true}'


CODEX = [  # no annotations: nothing for toolschema to strip
    {"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": False},
    {"type": "function", "name": "apply_patch", "parameters": {"type": "object"}},
]


def test_a_new_order_is_adopted_though_no_byte_is_saved_and_counted() -> None:
    pipeline = Pipeline(["toolorder", "toolschema"])
    body = body_with(CODEX)
    report = pipeline.run(body, "openai-responses")
    order, schema = report.runs
    assert (order.outcome, order.removed, order.bytes_saved) == ("applied", {REORDERED: 2}, 0)
    assert (schema.outcome, schema.reason) == ("skipped", "nothing_to_strip")
    assert len(report.body) == len(body)
    assert report.body == body_with(list(reversed(CODEX)))
    again = pipeline.run(body, "openai-responses")
    assert again.memo_hits == 1 and again.body == report.body


def test_a_catalogue_already_in_order_goes_on_untouched_as_in_order() -> None:
    body = body_with(list(reversed(CODEX)))
    report = Pipeline(["toolorder", "toolschema"]).run(body, "openai-responses")
    assert not report.changed(body)
    assert (report.runs[0].outcome, report.runs[0].reason) == ("skipped", "in_order")


def test_with_annotations_stripped_the_canonical_catalogue_is_in_order_too() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    catalogue = [{"name": "b", "input_schema": schema}, {"name": "a", "input_schema": schema}]
    report = Pipeline(["toolschema", "toolorder"]).run(body_with(catalogue), "anthropic")
    assert [run.outcome for run in report.runs] == ["applied", "applied"]
    tools = json.loads(report.body)["tools"]
    assert [t["name"] for t in tools] == ["a", "b"]
    assert all("$schema" not in t["input_schema"] for t in tools)


@pytest.mark.parametrize("style", SEPARATORS)
def test_the_same_tools_in_any_order_give_the_upstream_the_same_bytes(style: str) -> None:
    pipeline = Pipeline(["toolorder", "toolschema"])
    bodies = [body_with(order, style) for order in (CODEX, list(reversed(CODEX)))]
    sent = {pipeline.run(body, "openai-responses").body for body in bodies}
    assert len(sent) == 1
