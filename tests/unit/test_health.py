"""health: lint findings counted once per request and warned once per catalogue; an upstream
400 tied to the finding that explains it, or unexplained; worker states merge exactly."""

from __future__ import annotations

import gzip
import logging

import orjson
import pytest

from fakes import FakeClock
from toolslim.core.facts import CatalogueFacts
from toolslim.core.lint import lint
from toolslim.observe.fleet import merge, state_of
from toolslim.observe.health import FINDINGS_KEPT, Linter, explaining
from toolslim.observe.stats import Stats

ROOT_ANY_OF = {"name": "mcp__ci__get", "input_schema": {"anyOf": [{"type": "object"}]}}
DOTTED = {"name": "mcp__fs__read.file", "input_schema": {"type": "object"}}
CLEAN = {"name": "Read", "input_schema": {"type": "object"}}
REFUSAL = b'{"type":"error","error":{"message":"tools.1.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"}}'  # noqa: E501


def facts(*tools: object) -> CatalogueFacts:
    return CatalogueFacts(orjson.dumps(list(tools)))


def linted(stats: Stats, *tools: object) -> tuple[Linter, CatalogueFacts]:
    linter = Linter(stats.health)
    catalogue = facts(*tools)
    linter.request("anthropic", [catalogue], "POST", "/v1/messages")
    return linter, catalogue


def test_a_request_is_counted_once_per_rule_however_many_tools_break_it() -> None:
    stats = Stats([])
    linter = Linter(stats.health)
    other = dict(ROOT_ANY_OF, name="mcp__ci__put")
    found = linter.request("anthropic", [facts(ROOT_ANY_OF, other)], "POST", "/v1/messages")
    assert [f.tool for f in found] == ["mcp__ci__get", "mcp__ci__put"]
    lint_ = stats.snapshot()["lint"]
    assert lint_["requests"] == 1
    assert lint_["rules"]["anthropic_root_combinator"]["requests"] == 1
    assert [f["tool"] for f in lint_["findings"]] == ["mcp__ci__put", "mcp__ci__get"]


def test_a_catalogue_met_again_in_new_facts_is_not_warned_about_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = Stats([])
    linter = Linter(stats.health)
    with caplog.at_level(logging.WARNING, logger="toolslim.proxy.lint"):
        for _ in range(3):  # new facts each time: a memo entry that is not the most recent
            linter.request("anthropic", [facts(CLEAN, DOTTED)], "POST", "/v1/messages")
    assert len(caplog.records) == 1
    assert stats.snapshot()["lint"]["rules"]["anthropic_name"]["requests"] == 3
    assert len(stats.snapshot()["lint"]["findings"]) == 1
    linter.request("anthropic", [facts(DOTTED)], "POST", "/v1/messages")  # another catalogue
    assert len(stats.snapshot()["lint"]["findings"]) == 1  # the same finding: listed once


def test_an_api_without_a_provider_is_not_linted() -> None:
    stats = Stats([])
    assert Linter(stats.health).request("other", [facts(DOTTED)], "POST", "/x") == ()
    assert stats.snapshot()["lint"]["requests"] == 0


def test_the_finding_of_the_tool_the_error_names_explains_it() -> None:
    findings = lint([CLEAN, ROOT_ANY_OF, DOTTED], "anthropic", "anthropic")
    assert [f.rule for f in findings] == ["anthropic_name", "anthropic_root_combinator"]
    text = "tools.1.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"  # noqa: E501
    assert explaining(findings, text, ["mcp__ci__get"]).rule == "anthropic_root_combinator"
    # no tool named: the rule whose error it quotes; nothing quoted: the first rejected one
    assert explaining(findings, text, []).rule == "anthropic_root_combinator"
    assert explaining(findings, "tools: bad", []).rule == "anthropic_name"
    assert explaining(findings, "tools.0.custom: bad", ["Read"]) is None  # a clean tool named
    assert explaining((), text, ["Read"]) is None


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_400_is_read_for_the_place_it_names_compressed_or_not(gzipped: bool) -> None:
    stats = Stats([])
    linter, catalogue = linted(stats, CLEAN, ROOT_ANY_OF)
    answer = gzip.compress(REFUSAL) if gzipped else REFUSAL
    findings = catalogue.findings("anthropic")
    names = catalogue.tools.names
    linter.answered(
        "anthropic", 400, findings, answer, "gzip" if gzipped else None, names, "POST /v1/messages"
    )
    lint_ = stats.snapshot()["lint"]
    assert lint_["rules"]["anthropic_root_combinator"]["upstream_rejections"] == 1
    assert lint_["upstream_rejections"] == {"explained": 1, "unexplained": 0}


def test_a_400_that_names_a_clean_tool_is_unexplained_and_other_statuses_are_not_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = Stats([])
    linter, catalogue = linted(stats, CLEAN)
    names = catalogue.tools.names
    answer = b'{"error":{"message":"Invalid schema for function \'Read\': bad"}}'
    with caplog.at_level(logging.WARNING, logger="toolslim.proxy.lint"):
        linter.answered("openai-chat", 400, (), answer, None, names, "POST /v1/chat/completions")
        linter.answered("openai-chat", 429, (), answer, None, names, "POST /v1/chat/completions")
        linter.answered(
            "openai-chat", 400, (), b'{"error":{"message":"bad max_tokens"}}', None, names, "x"
        )
        linter.answered("other", 400, (), answer, None, names, "POST /x")  # not linted
    assert stats.snapshot()["lint"]["upstream_rejections"] == {"explained": 0, "unexplained": 1}
    [line] = [r.getMessage() for r in caplog.records]
    assert 'unexplained by lint; it names "Read"' in line


def test_workers_lint_counts_merge_to_what_one_worker_serving_all_would_show() -> None:
    clock = FakeClock()
    one, first, second = Stats([], clock=clock), Stats([], clock=clock), Stats([], clock=clock)
    linters = {stats: Linter(stats.health) for stats in (one, first, second)}

    def send(stats: Stats, *tools: object) -> None:
        linters[stats].request("anthropic", [facts(*tools)], "POST", "/v1/messages")

    for stats in (one, first):
        send(stats, CLEAN, DOTTED)
        stats.health.record_rejection("anthropic_name")
    clock.now += 1
    for stats in (one, second):
        send(stats, CLEAN, ROOT_ANY_OF)
        send(stats, CLEAN, DOTTED)  # first seen earlier (by the other worker)
        stats.health.record_rejection(None)
    merged = merge([state_of(s, ident=str(n), pid=n) for n, s in enumerate((first, second))])
    together, alone = merged["snapshot"]["lint"], one.snapshot()["lint"]
    assert together == alone
    assert [(f["tool"], f["seen_at"]) for f in together["findings"]] == [
        ("mcp__ci__get", clock.now),
        ("mcp__fs__read.file", clock.now - 1),
    ]
    assert together["upstream_rejections"] == {"explained": 1, "unexplained": 1}


def test_the_distinct_findings_are_bounded() -> None:
    stats = Stats([])
    linter = Linter(stats.health)
    for index in range(FINDINGS_KEPT + 5):
        tool = {"name": f"mcp__s__t.{index}", "input_schema": {"type": "object"}}
        linter.request("anthropic", [facts(tool)], "POST", "/v1/messages")
    findings = stats.snapshot()["lint"]["findings"]
    assert len(findings) == FINDINGS_KEPT
    assert findings[0]["tool"] == f"mcp__s__t.{FINDINGS_KEPT + 4}"  # newest first
