"""PURE. The tool ledger's Prometheus series, as plain data made from /stats `tools` (metrics.py,
the only importer of prometheus_client, turns them into families). Labels are bounded: the
MCP servers (summed over clients) and the tiers; per-tool series only behind
`ledger.tool_metrics`, and then only for the costliest tools /stats lists.

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from toolslim.observe.ledger.prices import TIERS

Kind = Literal["counter", "gauge"]
# (kind, name without _total, help, label names, [(label values, value)])
Series = tuple[Kind, str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]


def series(tools: Mapping[str, Any], per_tool: bool) -> list[Series]:
    """Every tool-ledger series of one /stats `tools` section."""
    offered: dict[tuple[str, str], float] = {}
    calls: dict[str, float] = {}
    usd: dict[str, float] = {}
    unused: dict[str, float] = {}
    for row in tools["servers"]:
        server = row["server"]
        for tier in TIERS:
            key = (server, tier)
            offered[key] = offered.get(key, 0) + row["offered_tokens"][tier]
        calls[server] = calls.get(server, 0) + row["calls"]
        usd[server] = usd.get(server, 0.0) + row["cost"]["usd"]
        unused[server] = max(unused.get(server, 0), 1 if row["unused"] else 0)
    made: list[Series] = [
        (
            "counter",
            "toolslim_tool_offered_tokens",
            "Prompt tokens of the tools offered to models, by MCP server (builtin: the "
            "client's own) and the cache tier they were billed at.",
            ("server", "tier"),
            [(key, value) for key, value in sorted(offered.items())],
        ),
        (
            "counter",
            "toolslim_tool_calls",
            "Tool calls the models' answers made, by the MCP server of the tool.",
            ("server",),
            [((server,), value) for server, value in sorted(calls.items())],
        ),
        (
            "counter",
            "toolslim_tool_cost_usd",
            "USD the offered tools' prompt tokens cost at the models' prices, by MCP server.",
            ("server",),
            [((server,), value) for server, value in sorted(usd.items())],
        ),
        (
            "gauge",
            "toolslim_tool_unused",
            "1 while an MCP server's tools are all unused in some client (the "
            "unused_mcp_server advisory), else 0.",
            ("server",),
            [((server,), value) for server, value in sorted(unused.items())],
        ),
        (
            "gauge",
            "toolslim_tool_ledger_bytes",
            "Bytes the tool ledger's rows and tool facts hold, as its bound counts them.",
            (),
            [((), tools["memory"]["bytes"])],
        ),
        (
            "gauge",
            "toolslim_tool_ledger_capacity_bytes",
            "The tool ledger's bound in bytes (a quarter of memo_bytes).",
            (),
            [((), tools["memory"]["max_bytes"])],
        ),
    ]
    if per_tool:
        costliest = tools["costliest"]
        made.append(
            (
                "counter",
                "toolslim_tool_costliest_offered_tokens",
                "Prompt tokens offered per tool, for the costliest tools /stats lists.",
                ("client", "server", "tool"),
                [
                    ((t["client"], t["server"], t["tool"]), sum(t["offered_tokens"].values()))
                    for t in costliest
                ],
            )
        )
        made.append(
            (
                "counter",
                "toolslim_tool_costliest_calls",
                "Tool calls per tool, for the costliest tools /stats lists.",
                ("client", "server", "tool"),
                [((t["client"], t["server"], t["tool"]), t["calls"]) for t in costliest],
            )
        )
    return made
