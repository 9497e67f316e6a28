"""advice: each advisory fires when its set-up costs money, and only then, and names the fix
that would end it."""

from __future__ import annotations

import json

import orjson
import pytest
from multidict import CIMultiDict

from advisories import BUILT_IN, CLAUDE_CODE, MCP, claude_body, gemini_body, mcp_bytes, tool
from toolslim.core.facts import CatalogueFacts
from toolslim.observe.advice import ADVICE, FIX, GEMINI_DECLARATION_LIMIT, advise, is_claude_code


def advised(api: str, headers: dict[str, str], body: bytes) -> list[tuple[str, int]]:
    catalogue = json.loads(body)["tools"]
    facts = CatalogueFacts(orjson.dumps(catalogue))
    return [(name, size) for name, size in advise(api, CIMultiDict(headers), body, [facts])]


# --- claude_code_tool_search_off ---------------------------------------------------------------


def test_claude_code_with_mcp_tools_and_no_tool_search_is_advised_with_the_mcp_bytes() -> None:
    body = claude_body(BUILT_IN + MCP)
    assert advised("anthropic", CLAUDE_CODE, body) == [
        ("claude_code_tool_search_off", mcp_bytes(MCP))
    ]


@pytest.mark.parametrize(
    "headers",
    [{"User-Agent": "claude-cli/2.1.197"}, {"anthropic-beta": "claude-code-20250219"}],
    ids=["user agent", "beta value"],
)
def test_claude_code_is_known_by_its_user_agent_or_its_beta_value(headers: dict[str, str]) -> None:
    assert is_claude_code(CIMultiDict(headers))


QUIET = {
    "tool search is on": (CLAUDE_CODE, claude_body([*BUILT_IN, tool("ToolSearch"), *MCP])),
    "no MCP tool": (CLAUDE_CODE, claude_body(BUILT_IN)),
    "not Claude Code": ({"User-Agent": "anthropic-sdk/1.0"}, claude_body(BUILT_IN + MCP)),
    "a model that never defers": (
        CLAUDE_CODE,
        claude_body(BUILT_IN + MCP, model="claude-3-5-haiku-20241022"),
    ),
}


@pytest.mark.parametrize(("headers", "body"), QUIET.values(), ids=QUIET.keys())
def test_claude_code_is_not_advised_where_tool_search_would_change_nothing(
    headers: dict[str, str], body: bytes
) -> None:
    assert advised("anthropic", headers, body) == []


# --- gemini_declarations_over_limit ------------------------------------------------------------


def test_a_gemini_catalogue_over_the_apis_limit_is_advised_and_one_at_the_limit_is_not() -> None:
    over = gemini_body(GEMINI_DECLARATION_LIMIT + 1)
    assert advised("gemini", {}, over) == [("gemini_declarations_over_limit", 0)]
    assert advised("gemini", {}, gemini_body(GEMINI_DECLARATION_LIMIT)) == []


def test_every_advisory_has_a_fix_that_names_what_to_change() -> None:
    assert set(FIX) == set(ADVICE)
    assert "ENABLE_TOOL_SEARCH=true" in FIX["claude_code_tool_search_off"]
    assert "512" in FIX["gemini_declarations_over_limit"]
    assert "websocket: true" in FIX["websocket_disabled"]
