"""The lint rules (toolslim.core.lint): golden cases per rule and provider, no rejected finding
on what working clients send, and every rule cited in docs/lint.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from golden_cases import golden
from toolslim.core.facts import CatalogueFacts
from toolslim.core.lint import PROVIDER_OF, RULES, lint, lint_raw, shape_of
from toolslim.offline.report import catalogues

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "captures").glob("*.json"))
DOCS = ROOT / "docs" / "lint.md"
# The API each capture was sent to (captures/README.md).
CAPTURE_API = {
    "claude-code.anthropic.json": "anthropic",
    "claude-code.mcp.anthropic.json": "anthropic",
    "claude-code.tool-search.anthropic.json": "anthropic",
    "mcp-fastmcp.anthropic.json": "anthropic",
    "openai-chat.json": "openai-chat",
    "openai-responses.codex.json": "openai-responses",
    "openai-responses.codex-gpt-5.5.json": "openai-responses",
    "gemini-cli.json": "gemini",
    "gemini-cli.yolo.json": "gemini",
}


def found(case: dict[str, Any]) -> list[dict[str, str]]:
    given = case["input"]
    findings = lint(given["tools"], given["shape"], given["provider"], offline=True)
    return [
        {"rule": f.rule, "severity": f.severity, "tool": f.tool, "server": f.server}
        for f in findings
    ]


@pytest.mark.parametrize("case", golden("lint.json"))
def test_a_catalogue_breaking_one_rule_gives_exactly_that_finding(case: dict[str, Any]) -> None:
    assert found(case) == case["expected"]


def test_every_rule_has_a_golden_case_that_breaks_it() -> None:
    cases = [param.values[0] for param in golden("lint.json")]
    broken = {expected["rule"] for case in cases for expected in case["expected"]}
    assert broken == set(RULES)


def test_each_finding_carries_the_rule_s_message_and_fix() -> None:
    tools = [{"name": "a.b", "input_schema": {"type": "object"}}]
    [finding] = lint(tools, "anthropic", "anthropic")
    assert finding.fix == RULES["anthropic_name"].fix
    assert finding.message == RULES["anthropic_name"].message
    assert finding.place == "tools.0"
    assert "'a.b'" in finding.detail


@pytest.mark.parametrize("path", CAPTURES, ids=lambda path: path.name)
def test_no_capture_has_a_rejected_finding_for_its_own_provider(path: Path) -> None:
    api = CAPTURE_API[path.name]
    document = json.loads(path.read_bytes())
    lists = catalogues(document)
    assert lists
    for tools in lists:
        findings = lint(tools, shape_of(tools), PROVIDER_OF[api], offline=True)
        assert [f for f in findings if f.severity == "rejected"] == []


def test_the_mcp_catalogues_the_tests_use_have_no_rejected_finding_anywhere() -> None:
    """The MCP tools of the captures (Claude Code's ten servers, the FastMCP host), read as the
    MCP servers list them and checked for each provider as its client would send them."""
    for name in ("claude-code.mcp.anthropic.json", "mcp-fastmcp.anthropic.json"):
        tools = json.loads((ROOT / "captures" / name).read_bytes())["tools"]
        listed = [
            {"name": t["name"], "description": t.get("description", ""), "inputSchema": schema}
            for t in tools
            if isinstance(schema := t.get("input_schema"), dict)
        ]
        assert shape_of(listed) == "mcp"
        for provider in ("anthropic", "gemini"):
            findings = lint(listed, "mcp", provider, offline=True)
            assert [f for f in findings if f.severity == "rejected"] == [], provider


def test_the_proxy_lints_the_catalogue_bytes_for_the_provider_behind_the_api() -> None:
    raw = b'[{"name":"x","input_schema":{"anyOf":[{"type":"object"}]}}]'
    [finding] = lint_raw(raw, "anthropic")
    assert (finding.rule, finding.provider) == ("anthropic_root_combinator", "anthropic")
    assert lint_raw(raw, "other") == ()
    assert lint_raw(b'{"not": "a list"}', "anthropic") == ()
    assert lint_raw(b"[not json", "anthropic") == ()


def test_the_proxy_never_runs_the_offline_only_metaschema_check() -> None:
    raw = b'[{"name":"t","input_schema":{"type":"object","properties":{"a":{"type":"strnig"}}}}]'
    assert lint_raw(raw, "anthropic") == ()
    assert [f.rule for f in lint(json.loads(raw), "anthropic", "anthropic", offline=True)] == [
        "anthropic_schema_invalid"
    ]


def test_facts_find_a_catalogue_s_findings_once_per_api_and_keep_them() -> None:
    facts = CatalogueFacts(b'[{"name":"a.b","input_schema":{"type":"object"}}]')
    assert facts.known_findings("anthropic") is None
    first = facts.findings("anthropic")
    assert [f.rule for f in first] == ["anthropic_name"]
    assert facts.findings("anthropic") is first
    assert facts.tools.names == ("a.b",)  # the tools read: the bytes let go
    assert facts.findings("anthropic") is first
    assert facts.findings("gemini") == ()  # asked too late for another API: none


def test_a_bare_tool_list_s_shape_is_read_from_its_tools() -> None:
    assert shape_of([{"functionDeclarations": []}]) == "gemini"
    assert shape_of([{"type": "function", "function": {"name": "f"}}]) == "openai-chat"
    assert shape_of([{"type": "function", "name": "f", "parameters": {}}]) == "openai-responses"
    assert shape_of([{"name": "f", "inputSchema": {}}]) == "mcp"
    assert shape_of([{"name": "f", "input_schema": {}}]) == "anthropic"


def test_every_rule_is_cited_in_docs_lint_md_beside_its_id() -> None:
    text = DOCS.read_text(encoding="utf-8")
    sections = re.split(r"^### ", text, flags=re.M)
    cited = {}
    for section in sections[1:]:
        title, _, body = section.partition("\n")
        ids = re.findall(r"`([a-z0-9_]+)`", title)
        for rule in ids:
            cited[rule] = re.findall(r"https://\S+", body)
    for rule in RULES:
        assert cited.get(rule), f"docs/lint.md: cite a source under a ### `{rule}` heading"
        assert RULES[rule].severity in text


def test_a_quoted_error_is_the_provider_s_own_text_as_docs_lint_md_quotes_it() -> None:
    text = " ".join(DOCS.read_text(encoding="utf-8").split())  # as wrapped in Markdown
    for rule in RULES.values():
        if rule.quoted:
            assert rule.quoted in text, rule.id
