"""PURE. JSON-Schema knowledge as named tables, and the positional annotation stripper that is
the `toolschema` component. Values in, values out: no I/O, no logging, no globals that change.

Recursion follows subschema positions only (drafts 4 to 2020-12); it never reads a property name
and never enters instance data (`const`, `default`, `enum`, `examples`) or unknown keywords.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
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


def is_too_deep(exc: Exception) -> bool:
    """Whether orjson refused a value for its nesting (it reads 1024 levels, writes 254)."""
    message = str(exc).lower()
    return "depth" in message or "recursion" in message


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
    if isinstance(node, dict):
        for key, value in node.items():
            if key in HOLDS_SUBSCHEMAS:
                yield from _children(key, value)


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


# Every keyword that can hold a subschema, for one C-speed set intersection per node.
HOLDS_SUBSCHEMAS = SUBSCHEMA_MAPS | SUBSCHEMA | SUBSCHEMA_LISTS | {DEPENDENCIES}
# Keywords `_strip` may remove: annotations always, `$id` when the plan says so.
_MAYBE_REMOVED = ANNOTATIONS | {"$id"}


class Survey:
    """What a tool schema uses, gathered in one walk over its schema positions."""

    __slots__ = ("keywords", "pointers", "references", "resource_roots")

    def __init__(self) -> None:
        self.keywords: set[str] = set()
        self.references = False
        self.pointers: list[tuple[str, ...]] = []
        self.resource_roots: list[tuple[str, ...]] = [()]


def survey(schema: JSON) -> Survey:
    """Keywords used in schema positions, reference keywords, pointers and `$id` roots."""
    found = Survey()
    embedded_ids = False
    stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TooDeep(depth)
        found.keywords.update(node)
        if not REFERENCE_KEYWORDS.isdisjoint(node):
            found.references = True
            for keyword in POINTER_KEYWORDS:
                reference = node.get(keyword)
                pointer = decode_pointer(reference) if isinstance(reference, str) else None
                if pointer:
                    found.pointers.append(pointer)
        if depth and "$id" in node:
            embedded_ids = True
        below = depth + 1
        for key in HOLDS_SUBSCHEMAS.intersection(node):
            value = node[key]
            if isinstance(value, dict):
                if key in SUBSCHEMA:
                    stack.append((value, below))
                else:  # a name -> schema map, or draft-07 `dependencies`
                    stack += [(sub, below) for sub in value.values() if isinstance(sub, dict)]
            elif isinstance(value, list):
                if key == "items":
                    found.keywords.add(LIST_ITEMS)
                stack += [(sub, below) for sub in value if isinstance(sub, dict)]
    if found.pointers and embedded_ids:
        # Pointers resolve against the nearest `$id`; where ids are embedded, protect the
        # pointer's path below each of them too (rare, so a second walk with paths).
        found.resource_roots += [path for path, node in _walk(schema, ()) if path and "$id" in node]
    return found


def _children(key: str, value: JSON) -> Iterator[tuple[tuple[str, ...], JSON]]:
    """The subschemas keyword `key` holds in `value`, with their relative paths."""
    if key in SUBSCHEMA_MAPS:
        if isinstance(value, dict):
            for name, sub in value.items():
                yield (key, name), sub
    elif key in SUBSCHEMA_LISTS or (key == "items" and isinstance(value, list)):
        if isinstance(value, list):
            for index, sub in enumerate(value):
                yield (key, str(index)), sub
    elif key in SUBSCHEMA:
        yield (key,), value
    elif isinstance(value, dict):  # DEPENDENCIES: array values are lists of names
        for name, sub in value.items():
            if isinstance(sub, (dict, bool)):
                yield (key, name), sub


def _walk(node: JSON, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict[str, JSON]]]:
    """Every schema object under `node` with its path from the schema root."""
    if isinstance(node, dict):
        yield path, node
        for key in HOLDS_SUBSCHEMAS.intersection(node):
            for relative, sub in _children(key, node[key]):
                yield from _walk(sub, path + relative)


class _Plan:
    """What may go from one tool's schema, decided from its survey."""

    __slots__ = ("drop_ids", "drop_schema", "protected")

    def __init__(self, found: Survey) -> None:
        self.drop_ids = not found.references
        # Dialects whose root `$schema` may go: none while references resolve against it.
        self.drop_schema = (
            frozenset()
            if found.references
            else frozenset(
                name
                for name, conflicts in DIALECT_CONFLICTS.items()
                if conflicts.isdisjoint(found.keywords)
            )
        )
        # Keyword paths a JSON Pointer runs through, below each resource root.
        self.protected = frozenset(
            root + pointer[:end]
            for pointer in found.pointers
            for root in found.resource_roots
            for end in range(1, len(pointer) + 1)
        )


class ToolSchema:
    """The `toolschema` component: strips annotations by position, losslessly."""

    name = "toolschema"

    def rewrite(self, schema: JSON, tool_name: str | None) -> tuple[JSON, Counter[str]]:
        """The schema without annotation keywords (same object when nothing goes)."""
        removed: Counter[str] = Counter()
        if not isinstance(schema, dict):
            return schema, removed
        plan = _Plan(survey(schema))
        path = () if plan.protected else None
        out = _strip(schema, plan, path, removed)
        # Only the root's `$schema` goes: it names the dialect the providers assume anyway.
        # A nested one sets its subschema's dialect for any reader (jsonschema switches
        # there), and what dropping it would leave depends on the reader: it stays.
        if "$schema" in out and dialect(out["$schema"]) in plan.drop_schema:
            removed["$schema"] += 1
            out = {k: v for k, v in out.items() if k != "$schema"}
        return out, removed


def _strip(
    node: dict[str, JSON], plan: _Plan, path: tuple[str, ...] | None, removed: Counter[str]
) -> dict[str, JSON]:
    """`node` without its removable keywords, recursing through subschema positions only.

    `path` (from the schema root) is tracked only when a JSON Pointer protects some keyword.
    """
    if _MAYBE_REMOVED.isdisjoint(node):
        if HOLDS_SUBSCHEMAS.isdisjoint(node):
            return node  # a leaf with nothing to remove: most nodes end here
        drop = []
    else:
        drop = [
            key for key in _MAYBE_REMOVED.intersection(node) if key in ANNOTATIONS or plan.drop_ids
        ]
        if drop and path is not None:
            drop = [key for key in drop if (*path, key) not in plan.protected]
    changed: dict[str, JSON] = {}
    for key in HOLDS_SUBSCHEMAS.intersection(node):
        value = node[key]
        new = _strip_holder(key, value, plan, path, removed)
        if new is not value:
            changed[key] = new
    if not drop and not changed:
        return node
    removed.update(drop)
    return {k: changed.get(k, v) for k, v in node.items() if k not in drop}


def _strip_holder(
    key: str, value: JSON, plan: _Plan, path: tuple[str, ...] | None, removed: Counter[str]
) -> JSON:
    """`value` of keyword `key`, with the subschemas it holds stripped."""
    if path is None:
        return map_holder(key, value, lambda sub, _: _strip(sub, plan, None, removed))
    return map_holder(key, value, lambda sub, steps: _strip(sub, plan, (*path, *steps), removed))


def map_holder(
    key: str, value: JSON, fn: Callable[[dict[str, JSON], tuple[str, ...]], JSON]
) -> JSON:
    """`value` of keyword `key` with `fn(subschema, steps from the keyword's node)` applied to
    each subschema it holds; the very same object when nothing changed.

    The rewriting walk's knowledge of which shape each subschema keyword holds, shared by
    `_strip` and budget's rewrite: one schema (SUBSCHEMA), a list of them (SUBSCHEMA_LISTS,
    and `items` in its array form), or a map of names to them (SUBSCHEMA_MAPS,
    `dependencies`, whose string-array members are skipped). `_children` and `survey` still
    spell the same shapes out for reading (survey more cautiously).
    """
    if isinstance(value, dict):
        if key in SUBSCHEMA:
            return fn(value, (key,))
        if key in SUBSCHEMA_LISTS:
            return value  # not a list: no subschema position to enter
        members: dict[str, JSON] | None = None
        for name, sub in value.items():
            if isinstance(sub, dict):
                new = fn(sub, (key, name))
                if new is not sub:
                    if members is None:
                        members = dict(value)
                    members[name] = new
        return value if members is None else members
    if isinstance(value, list) and (key in SUBSCHEMA_LISTS or key == "items"):
        subs = [
            fn(sub, (key, str(i))) if isinstance(sub, dict) else sub for i, sub in enumerate(value)
        ]
        return subs if any(a is not b for a, b in zip(subs, value, strict=True)) else value
    return value
