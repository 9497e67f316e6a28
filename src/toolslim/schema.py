"""PURE. JSON-Schema knowledge as named tables, and the positional annotation stripper that is
the `toolschema` component. Values in, values out: no I/O, no logging, no globals that change.

Recursion follows subschema positions only (drafts 4 to 2020-12); it never reads a property name
and never enters instance data (`const`, `default`, `enum`, `examples`) or unknown keywords.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

JSON = Any  # a parsed JSON value: dict, list, str, int, float, bool, None or orjson.Fragment

MAX_DEPTH = 256  # JSON nesting a tool schema may have before we refuse to walk it

# Annotation keywords: they never change the set of valid instances (validation §9, core
# §8.3), plus OpenAPI's `example` and VS Code's `markdownDescription`.
ANNOTATIONS = frozenset(
    {
        "$comment",
        "deprecated",
        "example",
        "examples",
        "markdownDescription",
        "readOnly",
        "title",
        "writeOnly",
    }
)

# Keywords whose value maps names to subschemas (values are schemas, keys are never read).
SUBSCHEMA_MAPS = frozenset(
    {
        "$defs",
        "definitions",
        "dependentSchemas",
        "patternProperties",
        "properties",
    }
)

# Keywords whose value is one subschema (`items` also has the draft-07 list form).
SUBSCHEMA = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)

# Keywords whose value is a list of subschemas.
SUBSCHEMA_LISTS = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "prefixItems",
    }
)

# draft-07 `dependencies`: each value is a subschema or a list of property names.
DEPENDENCIES = "dependencies"

# Keywords that resolve against the base URI `$id`/`$schema` set up (rule 1 of issue 2).
REFERENCE_KEYWORDS = frozenset(
    {
        "$anchor",
        "$dynamicAnchor",
        "$dynamicRef",
        "$recursiveRef",
        "$ref",
    }
)

# Keywords whose string value may carry a JSON-Pointer fragment.
POINTER_KEYWORDS = ("$dynamicRef", "$recursiveRef", "$ref")

# `$schema` URIs we recognise, normalised (http, no trailing `#`).
DIALECTS = {
    "http://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "http://json-schema.org/draft/2019-09/schema": "2019-09",
    "http://json-schema.org/draft/2020-12/schema": "2020-12",
}

LIST_ITEMS = "items[]"  # how the draft-07 list form of `items` shows up in a keyword survey

_DIFFERS_SINCE_2019 = frozenset(
    {
        "$recursiveAnchor",
        "$recursiveRef",
        DEPENDENCIES,
        LIST_ITEMS,
        "additionalItems",
    }
)
_NEW_IN_2020 = frozenset({"$dynamicAnchor", "$dynamicRef", "prefixItems"})
_NEW_IN_2019 = frozenset(
    {
        "$anchor",
        "dependentRequired",
        "dependentSchemas",
        "maxContains",
        "minContains",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)

# Keywords that validate differently under the named dialect than under 2020-12 (what the
# providers assume): while a tool uses one of them, its `$schema` must stay.
DIALECT_CONFLICTS = {
    "2020-12": frozenset(),
    # 2019-09's unevaluatedItems ignores `contains`; 2020-12's does not.
    "2019-09": _DIFFERS_SINCE_2019 | _NEW_IN_2020 | {"unevaluatedItems"},
    "draft-07": _DIFFERS_SINCE_2019 | _NEW_IN_2020 | _NEW_IN_2019,
    "draft-06": _DIFFERS_SINCE_2019 | _NEW_IN_2020 | _NEW_IN_2019 | {"else", "if", "then"},
}


class TooDeep(ValueError):
    """The value nests deeper than MAX_DEPTH."""


def dialect(uri: object) -> str | None:
    """The dialect a `$schema` URI names, matched with or without `#`, over http or https."""
    if not isinstance(uri, str):
        return None
    normal = uri.removesuffix("#")
    if normal.startswith("https://"):
        normal = "http://" + normal[len("https://") :]
    return DIALECTS.get(normal)


def subschemas(node: JSON) -> Iterator[tuple[tuple[str, ...], JSON]]:
    """Each direct subschema of a schema node with its relative path (keyword[, name|index])."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in SUBSCHEMA_MAPS:
            if isinstance(value, dict):
                for name, sub in value.items():
                    yield (key, name), sub
        elif key in SUBSCHEMA:
            if isinstance(value, list) and key == "items":
                for index, sub in enumerate(value):
                    yield (key, str(index)), sub
            else:
                yield (key,), value
        elif key in SUBSCHEMA_LISTS:
            if isinstance(value, list):
                for index, sub in enumerate(value):
                    yield (key, str(index)), sub
        elif key == DEPENDENCIES and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, (dict, bool)):
                    yield (key, name), sub


def decode_pointer(reference: str) -> tuple[str, ...] | None:
    """The JSON-Pointer tokens of a reference's fragment, or None if it has no pointer.

    Percent-escapes are decoded first (the fragment is a URI part), then `~1` and `~0`.
    """
    _, hash_sign, fragment = reference.partition("#")
    if not hash_sign:
        return None
    fragment = unquote(fragment)
    if fragment == "":
        return ()
    if not fragment.startswith("/"):
        return None  # a plain-name fragment ($anchor), not a pointer
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in fragment[1:].split("/"))


@dataclass
class Survey:
    """What a tool schema uses, gathered in one walk over its schema positions."""

    keywords: set[str] = field(default_factory=set)
    references: bool = False
    pointers: list[tuple[str, ...]] = field(default_factory=list)
    resource_roots: list[tuple[str, ...]] = field(default_factory=lambda: [()])


def survey(schema: JSON) -> Survey:
    """Keywords used in schema positions, reference keywords, pointers and `$id` roots."""
    found = Survey()
    _survey(schema, found, [], 0)
    return found


def _survey(node: JSON, found: Survey, path: list[str], depth: int) -> None:
    if not isinstance(node, dict):
        return
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    for key, value in node.items():
        found.keywords.add(LIST_ITEMS if key == "items" and isinstance(value, list) else key)
        if key in REFERENCE_KEYWORDS:
            found.references = True
            if key in POINTER_KEYWORDS and isinstance(value, str):
                pointer = decode_pointer(value)
                if pointer:
                    found.pointers.append(pointer)
        elif key == "$id" and path:
            found.resource_roots.append(tuple(path))
    for relative, sub in subschemas(node):
        path.extend(relative)
        _survey(sub, found, path, depth + 1)
        del path[len(path) - len(relative) :]


@dataclass(frozen=True)
class _Plan:
    drop_ids: bool
    drop_schema: frozenset[str]  # dialects whose `$schema` may go
    protected: frozenset[tuple[str, ...]]  # keyword paths a JSON Pointer runs through


def _plan(found: Survey) -> _Plan:
    protected = {
        root + pointer[:end]
        for pointer in found.pointers
        for root in found.resource_roots
        for end in range(1, len(pointer) + 1)
    }
    if found.references:
        droppable: frozenset[str] = frozenset()
    else:
        droppable = frozenset(
            name
            for name, conflicts in DIALECT_CONFLICTS.items()
            if not (conflicts & found.keywords)
        )
    return _Plan(not found.references, droppable, frozenset(protected))


class ToolSchema:
    """The `toolschema` component: strips annotations by position, losslessly."""

    name = "toolschema"

    def rewrite(self, schema: JSON, tool_name: str | None) -> tuple[JSON, Counter[str]]:
        """The schema without annotation keywords (same object when nothing goes)."""
        removed: Counter[str] = Counter()
        if not isinstance(schema, dict):
            return schema, removed
        plan = _plan(survey(schema))
        return _strip(schema, plan, (), removed), removed


def _strip(node: JSON, plan: _Plan, path: tuple[str, ...], removed: Counter[str]) -> JSON:
    if not isinstance(node, dict):
        return node
    items: list[tuple[str, JSON]] = []
    changed = False
    for key, value in node.items():
        if _removable(key, value, plan) and (
            not plan.protected or (*path, key) not in plan.protected
        ):
            removed[key] += 1
            changed = True
            continue
        new = _strip_value(key, value, plan, path, removed)
        changed = changed or new is not value
        items.append((key, new))
    return dict(items) if changed else node


def _removable(key: str, value: JSON, plan: _Plan) -> bool:
    if key in ANNOTATIONS:
        return True
    if key == "$id":
        return plan.drop_ids
    if key == "$schema":
        return dialect(value) in plan.drop_schema
    return False


def _strip_value(
    key: str, value: JSON, plan: _Plan, path: tuple[str, ...], removed: Counter[str]
) -> JSON:
    """`value` of keyword `key`, with the subschemas it holds stripped."""
    if key in SUBSCHEMA_MAPS or key == DEPENDENCIES:
        if not isinstance(value, dict):
            return value
        members = {
            name: _strip(sub, plan, (*path, key, name), removed) if isinstance(sub, dict) else sub
            for name, sub in value.items()
        }
        return members if any(members[n] is not value[n] for n in value) else value
    if key in SUBSCHEMA_LISTS or (key == "items" and isinstance(value, list)):
        if not isinstance(value, list):
            return value
        subs = [_strip(sub, plan, (*path, key, str(i)), removed) for i, sub in enumerate(value)]
        return subs if any(a is not b for a, b in zip(subs, value, strict=True)) else value
    if key in SUBSCHEMA:
        return _strip(value, plan, (*path, key), removed)
    return value
