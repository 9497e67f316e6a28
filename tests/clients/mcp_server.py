"""A tiny MCP server over stdio (newline-delimited JSON-RPC 2.0), stdlib only, for the tests
that run a real client with MCP servers: `python tests/clients/mcp_server.py NAME` serves the
tools SERVERS names for NAME, and a call answers with a line naming the tool and its input.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROTOCOL = "2025-06-18"  # answered when the client names none


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {key: {"type": kind} for key, kind in properties.items()},
        "required": sorted(properties),
    }
    return {"name": name, "description": description, "inputSchema": schema}


SERVERS: dict[str, list[dict[str, Any]]] = {
    "notebook": [
        _tool("jot", "Write one line into the test notebook.", line="string"),
        _tool("leaf_through", "List the lines written into the test notebook so far."),
    ],
    "abacus": [
        _tool("tally", "Add up two whole numbers.", a="integer", b="integer"),
    ],
}


def answer(name: str, request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC response to one message, or None for a notification."""
    if "id" not in request:
        return None
    method, params = request.get("method"), request.get("params") or {}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": params.get("protocolVersion", PROTOCOL),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "0.0.1"},
        }
    elif method == "tools/list":
        reply["result"] = {"tools": SERVERS[name]}
    elif method == "tools/call":
        text = f"{name}/{params.get('name')} got {json.dumps(params.get('arguments'))}"
        reply["result"] = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": f"no method {method}"}
    return reply


def main() -> int:
    name = sys.argv[1]
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(name, json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
