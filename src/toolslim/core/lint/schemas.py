"""PURE. What the lint rules read inside a tool schema: OpenAI's strict-mode requirements on
every object, the keywords Gemini's OpenAPI `Schema` subset knows, and whether a schema is
valid under its own dialect's metaschema (jsonschema, imported only when that check runs).

Each walk goes through subschema positions only (`schema.subschemas_of`, or the three Gemini
positions) and never reads a property name or instance data. Must not import aiohttp or
logging.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Final

from toolslim.core.schema import JSON, MAX_DEPTH, subschemas_of

# The fields of the Gemini API's `Schema` ("a select subset of an OpenAPI 3.0 schema object",
# docs/lint.md cites the page), in both the camelCase and the snake_case spelling its JSON
# parser takes.
GEMINI_SCHEMA_FIELDS: Final = frozenset(
    {
        "anyOf",
        "any_of",
        "default",
        "description",
        "enum",
        "example",
        "format",
        "items",
        "maxItems",
        "max_items",
        "maxLength",
        "max_length",
        "maxProperties",
        "max_properties",
        "maximum",
        "minItems",
        "min_items",
        "minLength",
        "min_length",
        "minProperties",
        "min_properties",
        "minimum",
        "nullable",
        "pattern",
        "properties",
        "propertyOrdering",
        "property_ordering",
        "required",
        "title",
        "type",
    }
)
# Where the subset nests a Schema: a map, one schema, a list.
_GEMINI_MAP, _GEMINI_ONE, _GEMINI_LISTS = "properties", "items", ("anyOf", "any_of")
MAX_REPORTED: Final = 3  # places one finding lists; the rest are counted


def path_of(steps: tuple[str, ...]) -> str:
    return ".".join(steps) if steps else "(root)"


def gemini_unknown(schema: JSON) -> list[str]:
    """`keyword at path` for each keyword of `schema` outside the Gemini Schema subset."""
    found: list[str] = []
    _gemini(schema, (), found, 0)
    return found


def _gemini(node: JSON, steps: tuple[str, ...], found: list[str], depth: int) -> None:
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return
    for key, value in node.items():
        if key not in GEMINI_SCHEMA_FIELDS:
            found.append(f"{key} at {path_of(steps)}")
        elif key == _GEMINI_MAP and isinstance(value, dict):
            for name, sub in value.items():
                _gemini(sub, (*steps, key, name), found, depth + 1)
        elif key == _GEMINI_ONE:
            _gemini(value, (*steps, key), found, depth + 1)
        elif key in _GEMINI_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                _gemini(sub, (*steps, key, str(index)), found, depth + 1)


def objects(schema: JSON) -> Iterator[tuple[tuple[str, ...], dict[str, JSON]]]:
    """Every object schema in `schema` (one whose `type` is or includes `object`, or that has
    `properties`), with its path, root first."""
    stack: list[tuple[tuple[str, ...], JSON, int]] = [((), schema, 0)]
    while stack:
        steps, node, depth = stack.pop()
        if not isinstance(node, dict) or depth > MAX_DEPTH:
            continue
        kind = node.get("type")
        if (
            kind == "object"
            or (isinstance(kind, list) and "object" in kind)
            or (isinstance(node.get("properties"), dict))
        ):
            yield steps, node
        children = [
            ((*steps, keyword) if member is None else (*steps, keyword, str(member)), sub)
            for keyword, member, sub in subschemas_of(node)
        ]
        children.sort(key=lambda child: child[0], reverse=True)  # popped in path order
        stack.extend((path, sub, depth + 1) for path, sub in children)


def not_closed(schema: JSON) -> list[str]:
    """Paths of object schemas without `additionalProperties: false` (OpenAI strict mode)."""
    return [
        path_of(steps)
        for steps, node in objects(schema)
        if node.get("additionalProperties") is not False
    ]


def not_all_required(schema: JSON) -> list[str]:
    """`name at path` for each property an object schema does not list in `required`
    (OpenAI strict mode wants every one listed)."""
    found: list[str] = []
    for steps, node in objects(schema):
        properties = node.get("properties")
        if not isinstance(properties, dict):
            continue
        required = node.get("required")
        listed = set(required) if isinstance(required, list) else set()
        found.extend(f"{name} at {path_of(steps)}" for name in properties if name not in listed)
    return found


def optional_properties(schema: JSON) -> list[str]:
    """The root's properties that `required` does not list."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = schema.get("required")
    listed = set(required) if isinstance(required, list) else set()
    return [name for name in schema["properties"] if name not in listed]


def dialect_errors(schema: JSON) -> list[str]:
    """Why `schema` is not valid under the metaschema of its own dialect (its `$schema`, else
    2020-12), as jsonschema's `check_schema` says it; [] when it is valid.

    jsonschema is imported here, on first use: only `toolslim lint` runs this check (about
    0.6 ms a tool, too slow for the proxy's first sight of a catalogue; docs/lint.md)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        with warnings.catch_warnings():  # an unknown `$schema` warns, then reads as 2020-12
            warnings.simplefilter("ignore", DeprecationWarning)
            validator_for(schema).check_schema(schema)
    except SchemaError as error:
        where = path_of(tuple(str(step) for step in error.path))
        return [f"{error.message} at {where}"]
    return []


def summary(places: list[str]) -> str:
    """At most MAX_REPORTED places, and how many more."""
    shown = "; ".join(places[:MAX_REPORTED])
    more = len(places) - MAX_REPORTED
    return f"{shown} (+{more} more)" if more > 0 else shown
