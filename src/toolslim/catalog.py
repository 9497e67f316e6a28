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

from toolslim.schema import (
    DEPENDENCIES,
    JSON,
    MAX_DEPTH,
    SUBSCHEMA,
    SUBSCHEMA_LISTS,
    SUBSCHEMA_MAPS,
    TooDeep,
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

Rewrite = Callable[[JSON, "str | None"], tuple[JSON, Counter[str]]]


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
    tools = [_rewrite_tool(tool, rewrite, change, 0) for tool in catalogue]
    if all(new is old for new, old in zip(tools, catalogue, strict=True)):
        return catalogue, change
    return tools, change


def _rewrite_tool(tool: JSON, rewrite: Rewrite, change: CatalogueChange, depth: int) -> JSON:
    if not isinstance(tool, dict):
        return tool
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    name = tool.get("name")
    name = name if isinstance(name, str) else None
    out: dict[str, JSON] | None = None
    holds_tools = False
    changed_here = False
    for key, value in tool.items():
        new = value
        if key in SCHEMA_KEYS and isinstance(value, (dict, bool)):
            new, removed = rewrite(value, name)
            change.removed.update(removed)
            changed_here = changed_here or new is not value
        elif key == NESTED_TOOL and isinstance(value, dict):
            holds_tools = True
            new = _rewrite_tool(value, rewrite, change, depth + 1)
        elif key in NESTED_TOOL_LISTS and isinstance(value, list):
            holds_tools = True
            new = [_rewrite_tool(t, rewrite, change, depth + 1) for t in value]
            if all(a is b for a, b in zip(new, value, strict=True)):
                new = value
        if new is not value:
            if out is None:
                out = dict(tool)
            out[key] = new
    if not holds_tools:
        change.tools_seen += 1
        change.tools_changed += changed_here
    return tool if out is None else out


def count_tools(catalogue: list[JSON]) -> int:
    """Leaf tools in a catalogue (namespace groups and declaration lists are not tools)."""
    _, change = rewrite_catalogue(catalogue, lambda schema, _name: (schema, Counter()))
    return change.tools_seen


def serialize(catalogue: list[JSON]) -> bytes:
    """The canonical bytes of a catalogue: compact, raw UTF-8, object keys sorted by code point
    at every depth, except the members of name -> schema maps (`properties`, ...): their order
    is the order a model writes arguments in, so it is kept.

    orjson sorts everything in C; each order-keeping map is pre-serialized into an
    orjson.Fragment, so the Python walk touches only schema nodes that hold such maps.
    """
    return orjson.dumps([_tool_fragments(tool, 0) for tool in catalogue], option=_SORTED)


_SORTED = orjson.OPT_SORT_KEYS


def _tool_fragments(tool: JSON, depth: int) -> JSON:
    if not isinstance(tool, dict):
        return tool
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    out: dict[str, JSON] | None = None
    for key, value in tool.items():
        if key in SCHEMA_KEYS:
            new = schema_fragments(value, depth + 1)
        elif key == NESTED_TOOL and isinstance(value, dict):
            new = _tool_fragments(value, depth + 1)
        elif key in NESTED_TOOL_LISTS and isinstance(value, list):
            new = [_tool_fragments(t, depth + 1) for t in value]
        else:
            continue
        if new is not value:
            if out is None:
                out = dict(tool)
            out[key] = new
    return tool if out is None else out


def schema_fragments(node: JSON, depth: int = 0) -> JSON:
    """`node` with every name -> schema map replaced by its canonical bytes (a Fragment)."""
    if not isinstance(node, dict):
        return node
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    out: dict[str, JSON] | None = None
    for key, value in node.items():
        if key in SUBSCHEMA_MAPS and isinstance(value, dict):
            new: JSON = orjson.Fragment(
                b"{"
                + b",".join(
                    orjson.dumps(name)
                    + b":"
                    + orjson.dumps(schema_fragments(sub, depth + 2), option=_SORTED)
                    for name, sub in value.items()
                )
                + b"}"
            )
        elif key == DEPENDENCIES and isinstance(value, dict):
            new = {name: schema_fragments(sub, depth + 2) for name, sub in value.items()}
        elif key in SUBSCHEMA_LISTS or (key == "items" and isinstance(value, list)):
            if not isinstance(value, list):
                continue
            new = [schema_fragments(sub, depth + 2) for sub in value]
            if all(a is b for a, b in zip(new, value, strict=True)):
                continue
        elif key in SUBSCHEMA:
            new = schema_fragments(value, depth + 1)
            if new is value:
                continue
        else:
            continue
        if out is None:
            out = dict(node)
        out[key] = new
    return node if out is None else out
