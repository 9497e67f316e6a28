"""PURE. Advisories: the proxy says when the way it is set up costs the user money, and what
to change. Each is decided per request from facts its catalogue has once (memo-hit cost) and
a header or two; /stats counts it, with its fix.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final, Literal, get_args

from toolslim.core.facts import CatalogueFacts

Advice = Literal[
    "claude_code_tool_search_off",
    "gemini_declarations_over_limit",
    "unused_mcp_server",
    "websocket_disabled",
]
ADVICE: Final[tuple[Advice, ...]] = get_args(Advice)
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
        "unused_mcp_server": (
            "An MCP server's tools are offered with every request and none of them was "
            "called (tools.unused): turn the server off in the client that sends it (each "
            "entry of `servers` says how, and what it saves per request and per day)."
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
# Models Claude Code never defers tools for (no advice to give there), as the start of the
# model's JSON string, looked for where Claude Code writes `model`: first in the body.
_NEVER_DEFERS: Final = b'"claude-3-5-haiku'
_MODEL_HEAD: Final = 64


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
) -> tuple[tuple[Advice, int], ...]:
    """The advisories one request carries, each with its bytes: the catalogue bytes of its MCP
    tools (what tool search would keep out of the prompt), or 0. The catalogue's facts are
    read first: most requests are decided without a header."""
    if api == "gemini":
        if sum(c.tools.declarations for c in catalogues) > GEMINI_DECLARATION_LIMIT:
            return _OVER_LIMIT
        return ()
    if api != "anthropic":
        return ()
    if len(catalogues) == 1:  # Anthropic bodies carry one
        tools = catalogues[0].tools
        mcp, searching, size = tools.mcp_tools, tools.tool_search, tools.mcp_bytes
    else:
        mcp = sum(c.tools.mcp_tools for c in catalogues)
        searching = any(c.tools.tool_search for c in catalogues)
        size = sum(c.tools.mcp_bytes for c in catalogues)
    if not mcp or searching or not is_claude_code(headers) or _never_defers(body):
        return ()
    return (("claude_code_tool_search_off", size),)


_OVER_LIMIT: Final[tuple[tuple[Advice, int], ...]] = (("gemini_declarations_over_limit", 0),)


def _never_defers(body: bytes) -> bool:
    return body.find(_NEVER_DEFERS, 0, _MODEL_HEAD) != -1
