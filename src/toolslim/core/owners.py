"""Who owns a tool and who sent it: the MCP server a tool's name names, and the client a
request's User-Agent names. One spelling of each client's naming rule, read by the tool
ledger, drift, lint and the offline commands alike."""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

Client = Literal["claude-cli", "codex", "gemini-cli", "other"]
CLIENTS: Final = get_args(Client)
BUILTIN: Final = "builtin"

# User-Agent product tokens as each client sends them (docs/clients.md): `claude-cli/2.1.197
# (external, cli)`, `codex_exec/0.171.0 (...)` or `codex_cli_rs/...`, `GeminiCLI/0.61.0 (...)`.
_PRODUCTS: Final[tuple[tuple[re.Pattern[str], Client], ...]] = (
    (re.compile(r"claude-cli\b", re.I), "claude-cli"),
    (re.compile(r"codex", re.I), "codex"),
    (re.compile(r"gemini-?cli", re.I), "gemini-cli"),
)


def client_of(user_agent: str | None) -> Client:
    """The client that sent a request, from its User-Agent's product token; else `other`."""
    if user_agent:
        product = user_agent.split(" ", 1)[0]
        for pattern, client in _PRODUCTS:
            if pattern.match(product):
                return client
    return "other"


def server_of(name: str, namespace: str | None = None) -> str:
    """The MCP server that owns the tool called `name` (in Responses `namespace`, if any), else
    `builtin`.

    Claude Code and Codex name MCP tools `mcp__<server>__<tool>`; Codex also groups them in a
    namespace `mcp__<server>` whose members carry the bare tool name. Gemini CLI names them
    `mcp_<server>_<tool>` with single underscores, so a server name holding an underscore
    cannot be told from its tool's name: the server is read up to the first underscore.
    """
    if namespace is not None and namespace.startswith("mcp__") and len(namespace) > 5:
        return namespace[5:]
    if name.startswith("mcp__"):
        server, sep, tool = name[5:].partition("__")
        return server if sep and server and tool else BUILTIN
    if name.startswith("mcp_"):
        server, sep, tool = name[4:].partition("_")
        return server if sep and server and tool else BUILTIN
    return BUILTIN
