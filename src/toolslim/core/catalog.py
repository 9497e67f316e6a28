"""PURE. Where tool schemas live in each API's tool catalogue, how a component is applied to
every one of them, and the canonical (key-sorted) form a rewritten catalogue is written in.

Shapes: Anthropic `input_schema`, OpenAI Chat `function.parameters`, Responses `parameters`
(namespaced groups nest more tools under `tools`), Gemini `functionDeclarations[].parameters`
and `.parametersJsonSchema` (snake_case spellings too). Tools without a schema pass through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import orjson

from toolslim.core.schema import (
    HOLDS_SUBSCHEMAS,
    JSON,
    MAX_DEPTH,
    SUBSCHEMA_MAPS,
    TooDeep,
    put_subschema,
    subschemas_of,
)

# The APIs a request can be sent to, as routing names them; "other" is any path the proxy
# forwards without knowing its shape. Every room that branches on the API uses this type.
Api = Literal["anthropic", "openai-chat", "openai-responses", "gemini", "other"]

# Keys of a tool object that hold its input schema.
SCHEMA_KEYS = frozenset(
    {
        "input_schema",
        "parameters",
        "parametersJsonSchema",
        "parameters_json_schema",
    }
)

# Keys of a tool object that hold more tool objects (one level down, same rules).
NESTED_TOOL_LISTS = frozenset(
    {
        "functionDeclarations",
        "function_declarations",
        "tools",
    }
)

NESTED_TOOL = "function"  # OpenAI Chat: {"type": "function", "function": {...}}

# A leaf tool with `defer_loading: true` is sent whole but kept out of the prompt until a tool
# search loads it (Anthropic tool search; OpenAI Responses `tool_search`, where a namespace's
# members carry it, never the namespace itself).
DEFER_LOADING = "defer_loading"

Rewrite = Callable[[JSON, "str | None"], tuple[JSON, Counter[str]]]

# An edit sees one tool schema, the tool object holding it and how deeply that tool is nested
# in the catalogue; it returns the schema to use (the same object when nothing changed).
SchemaEdit = Callable[[JSON, dict[str, JSON], int], JSON]


@dataclass
class CatalogueChange:
    """What one component did across one catalogue."""

    tools_seen: int = 0
    tools_changed: int = 0
    removed: Counter[str] = field(default_factory=Counter)


def rewrite_catalogue(
    catalogue: list[JSON], rewrite: Rewrite
) -> tuple[list[JSON], CatalogueChange]:
    """Apply `rewrite` to every tool schema; the same list comes back when nothing changed."""
    change = CatalogueChange()

    def edit(schema: JSON, tool: dict[str, JSON], depth: int) -> JSON:
        name = tool.get("name")
        new, removed = rewrite(schema, name if isinstance(name, str) else None)
        if removed:
            change.removed.update(removed)
        return new

    leaves: list[tuple[dict[str, JSON], bool]] = []
    tools = _each_tool(catalogue, edit, leaves, 0)
    change.tools_seen = len(leaves)
    change.tools_changed = sum(changed for _, changed in leaves)
    return tools, change


def leaf_tools(catalogue: list[JSON]) -> list[dict[str, JSON]]:
    """The leaf tools in document order: the object inside an OpenAI Chat `function` wrapper,
    each Gemini declaration, each tool of a Responses namespace, every other tool object."""
    leaves: list[tuple[dict[str, JSON], bool]] = []
    _each_tool(catalogue, _keep, leaves, 0)
    return [tool for tool, _ in leaves]


def deferred_tools(catalogue: list[JSON]) -> list[dict[str, JSON]]:
    """The leaf tools the provider keeps out of the prompt until a tool search loads them, in
    document order: those with `defer_loading: true`."""
    return [tool for tool in leaf_tools(catalogue) if tool.get(DEFER_LOADING) is True]


def count_tools(catalogue: list[JSON]) -> int:
    """Leaf tools in a catalogue (namespace groups and declaration lists are not tools)."""
    return len(leaf_tools(catalogue))


def _keep(schema: JSON, tool: dict[str, JSON], depth: int) -> JSON:
    return schema


def _each_tool(
    tools: list[JSON], edit: SchemaEdit, leaves: list[tuple[dict[str, JSON], bool]], depth: int
) -> list[JSON]:
    """`tools` with `edit` applied to every tool schema in document order, nested tools
    included; each leaf tool (one that holds no tools) is appended to `leaves` with whether
    its schemas changed. The same list and objects come back where nothing changed.

    The one walk over where tools nest (NESTED_TOOL, NESTED_TOOL_LISTS): rewriting,
    serializing and counting all go through it."""
    out = [_one_tool(tool, edit, leaves, depth) for tool in tools]
    return tools if all(a is b for a, b in zip(out, tools, strict=True)) else out


def _one_tool(
    tool: JSON, edit: SchemaEdit, leaves: list[tuple[dict[str, JSON], bool]], depth: int
) -> JSON:
    if not isinstance(tool, dict):
        return tool
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    out: dict[str, JSON] | None = None
    leaf = True
    for key, value in tool.items():
        if key in SCHEMA_KEYS:
            new = edit(value, tool, depth) if isinstance(value, (dict, bool)) else value
        elif key == NESTED_TOOL and isinstance(value, dict):
            leaf = False
            new = _one_tool(value, edit, leaves, depth + 1)
        elif key in NESTED_TOOL_LISTS and isinstance(value, list):
            leaf = False
            new = _each_tool(value, edit, leaves, depth + 1)
        else:
            continue
        if new is not value:
            if out is None:
                out = dict(tool)
            out[key] = new
    if leaf:
        leaves.append((tool, out is not None))
    return tool if out is None else out


def serialize(catalogue: list[JSON]) -> bytes:
    """The canonical bytes of a catalogue: compact, raw UTF-8, object keys sorted by code point
    at every depth, except the members of name -> schema maps (`properties`, ...): their order
    is the order a model writes arguments in, so it is kept.

    orjson sorts everything in C; each order-keeping map is pre-serialized into an
    orjson.Fragment, so the Python walk touches only schema nodes that hold subschemas.
    """
    return orjson.dumps(_each_tool(catalogue, _fragments, [], 0), option=_SORTED)


_SORTED = orjson.OPT_SORT_KEYS


def _fragments(schema: JSON, tool: dict[str, JSON], depth: int) -> JSON:
    return schema_fragments(schema, depth + 1)


def schema_fragments(node: JSON, depth: int = 0) -> JSON:
    """`node` with every name -> schema map replaced by its canonical bytes (a Fragment)."""
    if not isinstance(node, dict):
        return node
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    if HOLDS_SUBSCHEMAS.isdisjoint(node):
        return node
    changed: dict[str, JSON] = {}
    ordered: dict[str, list[bytes]] = {}
    for keyword, member, sub in subschemas_of(node):
        new = schema_fragments(sub, depth + 1 if member is None else depth + 2)
        if keyword in SUBSCHEMA_MAPS:
            member_bytes = orjson.dumps(member) + b":" + orjson.dumps(new, option=_SORTED)
            ordered.setdefault(keyword, []).append(member_bytes)
        elif new is not sub:
            put_subschema(changed, node, keyword, member, new)
    for keyword, members in ordered.items():
        changed[keyword] = orjson.Fragment(b"{" + b",".join(members) + b"}")
    return {**node, **changed} if changed else node
