"""`toolslim report`'s per-server breakdown: each leaf tool of a captured catalogue belongs to the
MCP server its name names (`core.owners.server_of`), else `builtin`; tools and tokens add up per
server, and the tool calls a capture recorded of each answer. Values in, values out."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from toolslim.core.catalog import DEFER_LOADING, leaf_tools
from toolslim.core.facts import label
from toolslim.core.owners import server_of
from toolslim.core.schema import JSON

NAMESPACE_MEMBERS = "tools"  # a Responses namespace `{"name": "mcp__<server>", "tools": [...]}`
Call = tuple[str, str | None]  # (name, namespace) as the answer named the tool


def owners(catalogue: list[JSON]) -> tuple[tuple[str, bool], ...]:
    """The server and deferred flag of each leaf tool, in `catalog.leaf_tools` order."""
    found: list[tuple[str, bool]] = []
    for element in catalogue:
        namespace = None
        if isinstance(element, dict) and isinstance(element.get(NAMESPACE_MEMBERS), list):
            namespace = label(element)
        for leaf in leaf_tools([element]):
            found.append((server_of(label(leaf) or "", namespace), leaf.get(DEFER_LOADING) is True))
    return tuple(found)


@dataclass
class ServerCounts:
    """One server's tools and their tokens, summed over a file's requests."""

    tools: int = 0
    deferred_tools: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    calls: int = 0


def count(
    into: dict[str, ServerCounts],
    owned: Iterable[tuple[str, bool]],
    tokens: Iterable[int],
    *,
    after: bool,
) -> None:
    """Add one catalogue's leaf tools (`owned`, with each one's `tokens`) to `into`: as sent
    (tools and tokens before) or, `after`, as forwarded (tokens after)."""
    for (server, deferred), n in zip(owned, tokens, strict=True):
        counts = into.setdefault(server, ServerCounts())
        if after:
            counts.tokens_after += n
        else:
            counts.tools += 1
            counts.deferred_tools += deferred
            counts.tokens_before += n


def merge_servers(files: Iterable[dict[str, ServerCounts]]) -> dict[str, ServerCounts]:
    """Several files' counts per server, added up."""
    merged: dict[str, ServerCounts] = {}
    for servers in files:
        for name, c in servers.items():
            into = merged.setdefault(name, ServerCounts())
            into.tools += c.tools
            into.deferred_tools += c.deferred_tools
            into.tokens_before += c.tokens_before
            into.tokens_after += c.tokens_after
            into.calls += c.calls
    return merged


def calls_of(recorded: Any) -> list[Call] | None:
    """The calls of a capture line's `calls` key (docs/captures.md), or None when it has none
    (an older capture, or no answer read); entries that are not calls are left out."""
    if not isinstance(recorded, list):
        return None
    found: list[Call] = []
    for call in recorded:
        if isinstance(call, dict) and isinstance(name := call.get("name"), str):
            namespace = call.get("namespace")
            found.append((name, namespace if isinstance(namespace, str) else None))
    return found


def count_calls(into: dict[str, ServerCounts], calls: Iterable[Call]) -> None:
    """Add one answer's tool calls to the servers that own the tools."""
    for name, namespace in calls:
        into.setdefault(server_of(name, namespace), ServerCounts()).calls += 1


def summarize(
    servers: dict[str, ServerCounts], requests: int, input_tokens: int, answers: int = 0
) -> list[dict[str, Any]]:
    """The `--json` `servers` list: means per request, the most tokens first; `calls` in all
    (None when no line recorded its answer's calls)."""
    ordered = sorted(servers.items(), key=lambda item: (-item[1].tokens_before, item[0]))
    return [
        {
            "server": name,
            "tools_per_request": c.tools / requests,
            "deferred_tools_per_request": c.deferred_tools / requests,
            "tokens_before_per_request": c.tokens_before / requests,
            "tokens_after_per_request": c.tokens_after / requests,
            "percent_of_input": 100 * c.tokens_before / input_tokens if input_tokens else None,
            "calls": c.calls if answers else None,
        }
        for name, c in ordered
    ]
