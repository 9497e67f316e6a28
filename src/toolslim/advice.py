"""PURE. Advisories: the proxy says when the way it is set up costs the user money, and what
to change. Each is decided per request from facts its catalogue has once (memo-hit cost) and
a header or two; /stats counts it, with its fix.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final, Literal

from toolslim.facts import CatalogueFacts

Advice = Literal[
    "claude_code_tool_search_off",
    "gemini_declarations_over_limit",
    "websocket_disabled",
]
ADVICE: Final[tuple[Advice, ...]] = (
    "claude_code_tool_search_off",
    "gemini_declarations_over_limit",
    "websocket_disabled",
)
GEMINI_DECLARATION_LIMIT: Final = 512  # function declarations the Gemini API accepts

FIX: Final[Mapping[Advice, str]] = MappingProxyType(
    {
        "claude_code_tool_search_off": (
            "Claude Code turns its tool search off when ANTHROPIC_BASE_URL is not "
            "api.anthropic.com, so every MCP tool's full schema goes with every request. "
            "Start Claude Code with ENABLE_TOOL_SEARCH=true next to ANTHROPIC_BASE_URL: "
            "toolslim forwards what tool search needs untouched."
        ),
        "gemini_declarations_over_limit": (
            f"This Gemini catalogue has more than {GEMINI_DECLARATION_LIMIT} function "
            "declarations, the API's limit: the request fails upstream. Turn off MCP servers "
            "or tools (excludeTools / includeTools in Gemini CLI's settings.json) until at most "
            f"{GEMINI_DECLARATION_LIMIT} remain."
        ),
        "websocket_disabled": (
            "websocket: false answers every WebSocket upgrade with 426, so Codex falls back "
            "from its WebSocket transport to HTTP for each session. Set websocket: true (the "
            "default) to relay it."
        ),
    }
)

# Claude Code says who it is in its User-Agent and in its first anthropic-beta value.
_CLAUDE_CODE_AGENT: Final = "claude-cli/"
_CLAUDE_CODE_BETA: Final = "claude-code-"
# Models Claude Code never defers tools for: no advice to give there.
_NEVER_DEFERS: Final = (b'"model":"claude-3-5-haiku', b'"model": "claude-3-5-haiku')
_MODEL_HEAD: Final = 256


def is_claude_code(headers: Mapping[str, str] | None) -> bool:
    """A request Claude Code sent: its User-Agent, or an anthropic-beta value it names."""
    if not headers:
        return False
    if headers.get("user-agent", "").startswith(_CLAUDE_CODE_AGENT):
        return True
    beta = headers.get("anthropic-beta", "")
    return any(value.strip().startswith(_CLAUDE_CODE_BETA) for value in beta.split(","))


def advise(
    api: str,
    headers: Mapping[str, str] | None,
    body: bytes,
    catalogues: Sequence[CatalogueFacts],
) -> list[tuple[Advice, int]]:
    """The advisories one request carries, each with its bytes: the catalogue bytes of its MCP
    tools (what tool search would keep out of the prompt), or 0."""
    found: list[tuple[Advice, int]] = []
    if api == "gemini":
        declarations = sum(c.tools.declarations for c in catalogues)
        if declarations > GEMINI_DECLARATION_LIMIT:
            found.append(("gemini_declarations_over_limit", 0))
    elif api == "anthropic" and is_claude_code(headers):
        mcp = sum(c.tools.mcp_tools for c in catalogues)
        searching = any(c.tools.tool_search for c in catalogues)
        if mcp and not searching and not _never_defers(body):
            found.append(
                ("claude_code_tool_search_off", sum(c.tools.mcp_bytes for c in catalogues))
            )
    return found


def _never_defers(body: bytes) -> bool:
    head = body[:_MODEL_HEAD]
    return any(model in head for model in _NEVER_DEFERS)
