"""A client session turn by turn: tools, Anthropic bodies carrying a catalogue at a turn, a scripted
session with one catalogue change of each kind, and an upstream answering the usage asked for."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from proxy_harness import dumps


def tool(name: str, text: str = "") -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {"name": name, "description": f"{name} things{text}", "input_schema": schema}


READ, BASH, EDIT, GIT_LOG = tool("Read"), tool("Bash"), tool("Edit"), tool("mcp__git__git_log")


class UsageUpstream:
    """Answers each request with the usage its X-Usage header gives, in the API's shape."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        usage = json.loads(request.headers.get("X-Usage", "{}"))
        if request.path.endswith("/responses"):
            payload = {"object": "response", "usage": usage}
        else:
            payload = {"type": "message", "usage": usage}
        return web.json_response(payload)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app


def anthropic_body(catalogue: Sequence[dict[str, Any]], turn: int) -> bytes:
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(turn + 1)]
    return dumps({"model": "claude-sonnet-4-5", "messages": messages, "tools": list(catalogue)})


# A scripted session: the same catalogue, then one change of each kind, each answered with the
# cache write the provider reported for it.
SCRIPT: list[tuple[list[dict[str, Any]], str | None, int]] = [
    ([READ, BASH, EDIT], None, 5_000),
    ([READ, BASH, EDIT], None, 0),
    ([BASH, READ, EDIT], "order_only", 4_100),
    ([BASH, READ, EDIT, GIT_LOG], "added", 4_200),
    ([BASH, READ, GIT_LOG], "removed", 4_300),
    ([BASH, tool("Read", " (changed)"), GIT_LOG], "changed", 4_400),
    ([tool("Shell"), tool("Read", " (changed)"), GIT_LOG], "mixed", 4_500),
]
