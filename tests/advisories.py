"""What the advice tests send: Claude Code's headers, built-in and MCP tools, a Claude Code body,
a Gemini body with N declarations, and the bytes a client writes for a catalogue's MCP tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from proxy_harness import dumps

CLAUDE_CODE = {
    "User-Agent": "claude-cli/2.1.197 (external, cli)",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
}


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"{name}.", "input_schema": {"type": "object"}}


BUILT_IN = [tool("Bash"), tool("Read")]


MCP = [tool("mcp__git__git_log"), tool("mcp__fetch__fetch")]


def claude_body(catalogue: list[dict[str, Any]], model: str = "claude-sonnet-4-5") -> bytes:
    return dumps({"model": model, "messages": [{"role": "user", "content": "hi"}],
                  "tools": catalogue})  # fmt: skip


def mcp_bytes(catalogue: list[dict[str, Any]], write: Callable[[Any], bytes] = orjson.dumps) -> int:
    """The bytes of the catalogue's MCP tools as `write` writes them (the client's bytes)."""
    return sum(len(write(t)) for t in catalogue if t["name"].startswith("mcp__"))


def gemini_body(declarations: int) -> bytes:
    found = [{"name": f"tool_{i}", "parametersJsonSchema": {"type": "object"}}
             for i in range(declarations)]  # fmt: skip
    return dumps({"contents": [], "tools": [{"functionDeclarations": found}]})
