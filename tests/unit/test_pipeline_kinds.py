"""Tests for toolslim.core.pipeline's two kinds of step: the registry declares each component a
schema step or a catalogue step, and the walk runs each by its declared kind."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from toolslim.core.pipeline import CATALOGUE_STEPS, KNOWN, Pipeline

TOOLS = [
    {"name": "write", "input_schema": {"type": "object", "title": "W"}},
    {"name": "read", "input_schema": {"type": "object", "title": "R"}},
]
BODY = json.dumps({"model": "m", "tools": TOOLS}, separators=(",", ":")).encode()


def test_toolorder_is_the_one_catalogue_step_and_every_other_component_a_schema_step() -> None:
    assert set(CATALOGUE_STEPS) == {"toolorder"}
    for name, make in KNOWN.items():
        verb = "order" if name in CATALOGUE_STEPS else "rewrite"
        assert callable(getattr(make({}), verb)), name


def test_a_catalogue_step_sees_every_tool_and_changes_none() -> None:
    report = Pipeline(["toolorder"]).run(BODY)
    (run,) = report.runs
    assert (run.outcome, run.tools_seen, run.tools_changed) == ("applied", 2, 0)
    assert dict(run.removed) == {"reordered_tools": 2}
    assert len(report.body) == len(BODY)  # the client's own bytes, rearranged


def test_a_catalogue_step_after_a_schema_step_orders_what_it_rewrote() -> None:
    report = Pipeline(["toolschema", "toolorder"]).run(BODY)
    names = [tool["name"] for tool in json.loads(report.body)["tools"]]
    assert names == ["read", "write"]
    assert [run.outcome for run in report.runs] == ["applied", "applied"]
    assert b'"title"' not in report.body


class FailingOrder:
    """A catalogue step that fails on every catalogue."""

    name = "toolorder"

    def order(self, catalogue: list[Any]) -> tuple[list[Any], Counter[str]]:
        raise RuntimeError("no order")


def test_a_failing_catalogue_step_is_skipped_and_the_schema_steps_still_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(KNOWN, "toolorder", lambda options: FailingOrder())
    report = Pipeline(["toolorder", "toolschema"]).run(BODY)
    assert [run.outcome for run in report.runs] == ["error", "applied"]
    assert report.errors == (("toolorder", "RuntimeError: no order"),)
    assert [tool["name"] for tool in json.loads(report.body)["tools"]] == ["write", "read"]
