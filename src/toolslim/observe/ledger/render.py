"""PURE. The tool ledger as /stats `tools` shows it (docs/stats.md), made from a ledger export:
per client and MCP server, the costliest tools, the unused ones and the `unused_mcp_server`
advisory with how to turn each such server off in its client.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from toolslim.core.owners import BUILTIN
from toolslim.observe.advice import FIX
from toolslim.observe.ledger.book import Export, day_of, merge
from toolslim.observe.ledger.prices import TIERS

COSTLIEST: Final = 50  # tools /stats lists as the costliest
UNUSED: Final = 100  # unused tools /stats lists

# How to turn an MCP server off, per client (docs/clients.md says how each names servers).
TURN_OFF: Final[Mapping[str, str]] = {
    "claude-cli": "claude mcp remove {server} (or remove it from the project's .mcp.json)",
    "codex": "remove [mcp_servers.{server}] from Codex's config.toml (Codex writes a '-' of "
    "the server's name as '_')",
    "gemini-cli": 'remove "{server}" from mcpServers in Gemini CLI\'s settings.json, or list '
    "its tools in excludeTools",
    "other": "turn the MCP server {server} off in the client's configuration",
}


def iso(when: float | None) -> str | None:
    """A Unix time as ISO-8601 UTC (`2026-12-04T22:15:43Z`), or None."""
    if when is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


class _Tool:
    __slots__ = (
        "calls",
        "deferred",
        "equivalents",
        "first",
        "last",
        "last_called",
        "requests",
        "seen",
        "server",
        "sessions",
        "tiers",
        "tokens",
        "usd",
    )

    def __init__(self, server: str) -> None:
        self.server = server
        self.requests = 0
        self.sessions: set[str] = set()
        self.tiers = [0, 0, 0, 0]
        self.equivalents = 0.0
        self.usd = 0.0
        self.tokens = 0
        self.deferred = False
        self.seen = -1.0  # when the catalogue `tokens` and `deferred` come from was last offered
        self.first = float("inf")
        self.last = 0.0
        self.calls = 0
        self.last_called: float | None = None


class _Server:
    __slots__ = ("calls", "days", "deferred", "equivalents", "requests", "tiers", "today", "usd")

    def __init__(self) -> None:
        self.requests = 0
        self.tiers = [0, 0, 0, 0]
        self.deferred = 0
        self.equivalents = 0.0
        self.usd = 0.0
        self.today = [0.0, 0.0]
        self.calls = 0
        self.days: set[str] = set()


def _cost(equivalents: float, usd: float) -> dict[str, float]:
    return {"equivalents": equivalents, "usd": usd}


def render(export: Export, now: float, *, min_requests: int, min_sessions: int) -> dict[str, Any]:
    """The /stats `tools` section of `export` as of `now`; a tool is unused once offered in
    at least `min_requests` requests over `min_sessions` sessions and never called."""
    today = day_of(now)
    catalogues = export["catalogues"]
    tools: dict[tuple[str, str], _Tool] = {}
    servers: dict[tuple[str, str], _Server] = {}
    for day, clients in export["offers"].items():
        for client, rows in clients.items():
            for digest, row in rows.items():
                facts = catalogues.get(digest)
                if facts is not None:
                    _offer(tools, servers, client, day == today, day, facts, row)
    for clients in export["calls"].values():
        for client, rows in clients.items():
            for name, row in rows.items():
                tool = tools.get((client, name))
                if tool is not None:
                    tool.calls += row["calls"]
                    tool.last_called = max(tool.last_called or 0.0, row["last"])
                server = servers.get((client, row["server"]))
                if server is not None:
                    server.calls += row["calls"]
    unused = {
        key
        for key, tool in tools.items()
        if not tool.deferred
        and tool.calls == 0
        and tool.requests >= min_requests
        and len(tool.sessions) >= min_sessions
    }
    items = {key: _item(key, tool) for key, tool in tools.items()}
    ranked = sorted(items, key=lambda key: _rank(items[key]))
    server_rows = [
        _server_row(key, server, tools, unused, today) for key, server in servers.items()
    ]
    server_rows.sort(key=lambda row: (-row["cost"]["equivalents"], -row["cost"]["usd"]))
    inputs = export["input"]
    return {
        "input_tokens_per_request": inputs["tokens"] / inputs["requests"]
        if inputs["requests"]
        else 0.0,
        "servers": server_rows,
        "clients": _clients(export, server_rows),
        "costliest": [items[key] for key in ranked[:COSTLIEST]],
        "unused": [items[key] for key in ranked if key in unused][:UNUSED],
        "unknown_calls": export["unknown_calls"],
        "unpriced": export["unpriced"],
        "cache_miss_reasons": export["cache_miss_reasons"],
        "untracked": export["untracked"],
        "memory": export.get("memory", {"bytes": 0, "max_bytes": 0}),
        "advice": [_advice(row) for row in server_rows if row["unused"]],
    }


def _offer(
    tools: dict[tuple[str, str], _Tool],
    servers: dict[tuple[str, str], _Server],
    client: str,
    is_today: bool,
    day: str,
    facts: Mapping[str, Any],
    row: Mapping[str, Any],
) -> None:
    """One catalogue row's requests, spread over its tools and their servers."""
    requests, equivalents, usd = row["requests"], row["equivalents"], row["usd"]
    tiers = [row["tiers"].get(tier, 0) for tier in TIERS]
    seen: set[str] = set()
    for name, server_name, tokens, deferred in zip(
        facts["names"], facts["servers"], facts["tokens"], facts["deferred"], strict=True
    ):
        tool = tools.get((client, name))
        if tool is None:
            tool = tools[(client, name)] = _Tool(server_name)
        server = servers.get((client, server_name))
        if server is None:
            server = servers[(client, server_name)] = _Server()
        if server_name not in seen:
            seen.add(server_name)
            server.requests += requests
            server.days.add(day)
        tool.requests += requests
        tool.sessions.update(row["sessions"])
        tool.first = min(tool.first, row["first"])
        tool.last = max(tool.last, row["last"])
        if row["last"] >= tool.seen:
            tool.seen, tool.tokens, tool.deferred = row["last"], tokens, deferred
        if deferred:
            server.deferred += tokens * requests
            continue
        for index, count in enumerate(tiers):
            tool.tiers[index] += tokens * count
            server.tiers[index] += tokens * count
        tool.equivalents += tokens * equivalents
        tool.usd += tokens * usd
        server.equivalents += tokens * equivalents
        server.usd += tokens * usd
        if is_today:
            server.today[0] += tokens * equivalents
            server.today[1] += tokens * usd


def _item(key: tuple[str, str], tool: _Tool) -> dict[str, Any]:
    client, name = key
    return {
        "client": client,
        "server": tool.server,
        "tool": name,
        "requests": tool.requests,
        "sessions": len(tool.sessions),
        "tokens": tool.tokens,
        "offered_tokens": dict(zip(TIERS, tool.tiers, strict=True)),
        "deferred": tool.deferred,
        "cost": _cost(tool.equivalents, tool.usd),
        "calls": tool.calls,
        "first_offered": iso(tool.first if tool.requests else None),
        "last_offered": iso(tool.last if tool.requests else None),
        "last_called": iso(tool.last_called),
    }


def _rank(item: Mapping[str, Any]) -> tuple[float, float, int, str, str]:
    cost = item["cost"]
    return (-cost["equivalents"], -cost["usd"], -item["tokens"], item["client"], item["tool"])


def _server_row(
    key: tuple[str, str],
    server: _Server,
    tools: Mapping[tuple[str, str], _Tool],
    unused: set[tuple[str, str]],
    today: str,
) -> dict[str, Any]:
    client, name = key
    own = [k for k, tool in tools.items() if k[0] == client and tool.server == name]
    offered = [k for k in own if not tools[k].deferred]
    idle = sum(1 for k in offered if k in unused)
    requests = server.requests
    days = max(1, len(server.days))
    return {
        "client": client,
        "server": name,
        "tools": len(own),
        "tokens_per_request": sum(server.tiers) / requests if requests else 0.0,
        "offered_tokens": dict(zip(TIERS, server.tiers, strict=True)),
        "deferred_tokens": server.deferred,
        "cost": _cost(server.equivalents, server.usd),
        "cost_today": _cost(*server.today),
        "calls": server.calls,
        "unused_tools": idle,
        "unused": name != BUILTIN and bool(offered) and idle == len(offered),
        "requests": requests,
        "cost_per_request": _cost(
            server.equivalents / requests if requests else 0.0,
            server.usd / requests if requests else 0.0,
        ),
        "cost_per_day": _cost(server.equivalents / days, server.usd / days),
    }


def _clients(export: Export, servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server rows rolled up per client, costliest first; `requests` are the client's
    model calls that offered tools (a request carrying two catalogues counts twice)."""
    requests: dict[str, int] = {}
    for clients in export["offers"].values():
        for client, rows in clients.items():
            requests[client] = requests.get(client, 0) + sum(r["requests"] for r in rows.values())
    made: dict[str, dict[str, Any]] = {}
    for row in servers:
        client = made.setdefault(
            row["client"],
            {
                "client": row["client"],
                "requests": requests.get(row["client"], 0),
                "servers": 0,
                "tools": 0,
                "offered_tokens": dict.fromkeys(TIERS, 0),
                "deferred_tokens": 0,
                "cost": _cost(0.0, 0.0),
                "cost_today": _cost(0.0, 0.0),
                "calls": 0,
                "unused_tools": 0,
                "unused_servers": 0,
            },
        )
        client["servers"] += 1
        client["unused_servers"] += row["unused"]
        for key in ("tools", "deferred_tokens", "calls", "unused_tools"):
            client[key] += row[key]
        for tier in TIERS:
            client["offered_tokens"][tier] += row["offered_tokens"][tier]
        for key in ("cost", "cost_today"):
            for part in ("equivalents", "usd"):
                client[key][part] += row[key][part]
    for client in made.values():
        offered = sum(client["offered_tokens"].values())
        client["tokens_per_request"] = offered / client["requests"] if client["requests"] else 0.0
    return sorted(made.values(), key=lambda c: (-c["cost"]["equivalents"], c["client"]))


def _advice(row: Mapping[str, Any]) -> dict[str, Any]:
    """The `unused_mcp_server` advisory for one server row."""
    how = TURN_OFF.get(row["client"], TURN_OFF["other"]).format(server=row["server"])
    return {
        "client": row["client"],
        "server": row["server"],
        "tokens_per_request": row["tokens_per_request"],
        "cost_per_request": row["cost_per_request"],
        "cost_per_day": row["cost_per_day"],
        "fix": f"No tool of MCP server {row['server']} ({row['tools']} offered) was called; "
        f"turning it off saves {round(row['tokens_per_request']):,} prompt tokens per request: "
        f"{how}.",
    }


def tools_of(state: Mapping[str, Any], now: float) -> dict[str, Any]:
    """/stats `tools` of a published ledger state (Stats.tools_state, or several merged)."""
    requests, sessions = state["unused_after"]
    tools = render(state["ledger"], now, min_requests=requests, min_sessions=sessions)
    tools["tool_metrics"] = state["tool_metrics"]
    return tools


def merged(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' ledger states as one (fleet.RULES): exports merged, settings the first's."""
    return {**states[0], "ledger": merge([state["ledger"] for state in states])}


def shown(snapshot: dict[str, Any], now: float) -> dict[str, Any]:
    """A published snapshot whose `tools` is a ledger state, as /stats shows it: `tools`
    rendered, and the advisory it raises in `advice` (fleet.view)."""
    if "ledger" not in snapshot.get("tools", {}):
        return snapshot
    tools = tools_of(snapshot["tools"], now)
    advice = with_unused_servers(dict(snapshot["advice"]), tools)
    return {**snapshot, "tools": tools, "advice": advice}


def with_unused_servers(advice: dict[str, Any], tools: Mapping[str, Any]) -> dict[str, Any]:
    """`advice` with `unused_mcp_server` from the tool ledger's render: the requests that
    offered a server none of whose tools was called, and those servers (with their fixes)."""
    unused = [row for row in tools["servers"] if row["unused"]]
    advice["unused_mcp_server"] = {
        "requests": sum(row["requests"] for row in unused),
        "bytes": 0,
        "fix": FIX["unused_mcp_server"],
        "servers": tools["advice"],
    }
    return advice
