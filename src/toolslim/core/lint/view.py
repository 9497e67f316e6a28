"""PURE. A tool catalogue as one provider would read it: its tools in the order the provider
numbers them, each with its name, MCP server, schema and `strict` flag, whatever the shape the
catalogue came in (Anthropic, OpenAI Chat or Responses, Gemini, an MCP `tools/list` result).

Must not import aiohttp, prometheus_client or logging.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from toolslim.core.owners import server_of
from toolslim.core.schema import JSON

Provider = Literal["anthropic", "openai", "gemini"]
PROVIDERS: Final = get_args(Provider)
# The shapes a catalogue comes in: the APIs routing names, and an MCP server's tools/list.
Shape = Literal["anthropic", "openai-chat", "openai-responses", "gemini", "mcp"]

# The provider behind each API routing names (`other` has none: it is never linted).
PROVIDER_OF: Final[Mapping[str, Provider]] = {
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openai-chat": "openai",
    "openai-responses": "openai",
}

# Where each shape keeps a tool's input schema, in the order looked for.
SCHEMA_FIELDS: Final = (
    "input_schema",
    "parameters",
    "parametersJsonSchema",
    "parameters_json_schema",
    "inputSchema",
)
DECLARATIONS: Final = ("functionDeclarations", "function_declarations")
# Gemini's field that takes the OpenAPI subset; every other field takes JSON Schema.
OPENAPI_PARAMETERS: Final = "parameters"
JSON_SCHEMA_PARAMETERS: Final = "parametersJsonSchema"


@dataclass(frozen=True, slots=True)
class Tool:
    """One callable tool as a provider reads it."""

    label: str  # what a finding calls it: its name, `<namespace>/<name>`, or `#<index>`
    name: str | None  # its name as sent (None: a built-in without one)
    server: str  # the MCP server its name names (owners.server_of), else `builtin`
    place: str  # where the provider's error messages say it is: `tools.3`, `tools[0]...`
    schema: JSON  # its input schema, None when it has none
    field: str | None  # the key the schema is read from, as the provider would read it
    strict: bool | None  # its `strict` flag (None: not given)
    kind: str | None = None  # its `type` (`function`, `custom`, a built-in's), if given


@dataclass(frozen=True, slots=True)
class View:
    """A catalogue as `provider` reads it, sent in `shape`."""

    provider: Provider
    shape: Shape
    tools: tuple[Tool, ...]
    entries: int  # elements of the top-level tool list (what OpenAI's count limit counts)


def read(catalogue: list[JSON], shape: Shape, provider: Provider) -> View:
    """`catalogue` (a parsed tool list in `shape`) as `provider` reads it. A schema from another
    shape goes to Gemini as `parametersJsonSchema` (JSON Schema), as Gemini CLI sends an MCP
    server's `inputSchema`."""
    tools = tuple(_tools(catalogue, shape))
    if provider == "gemini" and shape != "gemini":
        tools = tuple(_as_json_schema(tool) for tool in tools)
    return View(provider, shape, tools, len(catalogue))


def _as_json_schema(tool: Tool) -> Tool:
    if tool.field is None:
        return tool
    return Tool(
        tool.label,
        tool.name,
        tool.server,
        tool.place,
        tool.schema,
        JSON_SCHEMA_PARAMETERS,
        None,
        tool.kind,
    )


def _tools(catalogue: list[JSON], shape: Shape) -> Iterator[Tool]:
    declaration = 0  # Gemini numbers declarations within each entry
    for index, entry in enumerate(catalogue):
        if not isinstance(entry, dict):
            continue
        if shape == "gemini":
            key = next((k for k in DECLARATIONS if isinstance(entry.get(k), list)), None)
            if key is None:
                continue  # a built-in such as googleSearch: no declarations
            for declaration, member in enumerate(entry[key]):
                yield _tool(member, f"tools[{index}].function_declarations[{declaration}]", None)
            continue
        if shape == "openai-chat" and isinstance(entry.get("function"), dict):
            yield _tool(entry["function"], f"tools[{index}]", None)
        elif shape == "openai-responses" and isinstance(entry.get("tools"), list):
            namespace = entry.get("name") if isinstance(entry.get("name"), str) else None
            for position, member in enumerate(entry["tools"]):
                yield _tool(member, f"tools[{index}].tools[{position}]", namespace)
        elif shape == "anthropic":
            yield _tool(entry, f"tools.{index}", None)
        else:
            yield _tool(entry, f"tools[{index}]", None)


def _tool(tool: JSON, place: str, namespace: str | None) -> Tool:
    if not isinstance(tool, dict):
        return Tool(place, None, "builtin", place, None, None, None)
    name = tool.get("name") if isinstance(tool.get("name"), str) else None
    field = next((key for key in SCHEMA_FIELDS if key in tool), None)
    strict = tool.get("strict")
    kind = tool.get("type") if isinstance(tool.get("type"), str) else None
    label = name if name is not None else kind or place
    if namespace is not None:
        label = f"{namespace}/{label}"
    return Tool(
        label,
        name,
        server_of(name or "", namespace),
        place,
        tool.get(field) if field is not None else None,
        field,
        strict if isinstance(strict, bool) else None,
        kind,
    )


def shape_of(tools: list[JSON]) -> Shape:
    """The shape a bare tool list is written in, from its first tools: Gemini declarations,
    OpenAI Chat's `function` wrapper, Responses' `parameters` or namespaces, an MCP
    `inputSchema`, else Anthropic's."""
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if any(key in tool for key in DECLARATIONS):
            return "gemini"
        if isinstance(tool.get("function"), dict):
            return "openai-chat"
        if "inputSchema" in tool:
            return "mcp"
        if "parameters" in tool or tool.get("type") in ("function", "namespace", "custom"):
            return "openai-responses"
        if "input_schema" in tool:
            return "anthropic"
    return "anthropic"
