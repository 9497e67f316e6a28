"""PURE. JSON-Schema knowledge as named tables, and the walks every component shares: the
subschema positions and the survey of what a schema uses. Values in, values out.

Every walker recurses through `subschemas_of`, the subschema positions of drafts 4 to 2020-12: it
never reads a property name and never enters instance data (`const`, `default`, `enum`,
`examples`) or unknown keywords.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final
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

# Subschema keywords by the shape of their value: a map of names to subschemas (the names are
# never read), one subschema (`items` also has the draft-07 list form), a list of subschemas.
SUBSCHEMA_MAPS = frozenset(
    {
        "$defs",
        "definitions",
        "dependentSchemas",
        "patternProperties",
        "properties",
    }
)

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

# Keywords that resolve against the base URI an id sets up (rule 1 of issue 2): references,
# and the anchors a reference may name. Each with the word `tooldefs` counts it under when it
# makes reachability unprovable (anchors are found by name, dynamic references by the dynamic
# scope); None for `$ref`, a pointer it follows.
REFERENCES: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "$anchor": "anchor",
        "$dynamicAnchor": "dynamic_anchor",
        "$dynamicRef": "dynamic_ref",
        "$recursiveAnchor": "recursive_anchor",
        "$recursiveRef": "recursive_ref",
        "$ref": None,
    }
)
REFERENCE_KEYWORDS = frozenset(REFERENCES)

# The references whose value is a URI, maybe with a JSON-Pointer fragment.
POINTER_KEYWORDS = ("$dynamicRef", "$recursiveRef", "$ref")
# The anchors whose value is a name a plain-name fragment (`#name`) finds.
ANCHOR_KEYWORDS = ("$anchor", "$dynamicAnchor")

# Keywords that set a new base URI where they appear, so a resource root: `$id`, and `id`,
# draft-04's spelling of it (core §8.2.1; draft-04 core §7.2). Only a string value is an id.
ID_KEYWORDS = ("$id", "id")

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


def sets_base(node: dict[str, JSON]) -> bool:
    """Whether a schema object sets a new base URI: an `$id`, or draft-04's `id`, as a string."""
    return any(isinstance(node.get(keyword), str) for keyword in ID_KEYWORDS)


HOLDS_SUBSCHEMAS = SUBSCHEMA_MAPS | SUBSCHEMA | SUBSCHEMA_LISTS | {DEPENDENCIES}

Member = str | int | None  # where a subschema sits in its keyword's value: name, index, or itself


def subschemas_of(node: dict[str, JSON]) -> Iterator[tuple[str, Member, JSON]]:
    """Each value in a subschema position of a schema object, as (keyword, member, value).

    The one reading of the tables every walker shares: the keyword's value itself
    (SUBSCHEMA, member None), each item of a list (SUBSCHEMA_LISTS and the draft-07 list form
    of `items`, member an index) or each member of a map (SUBSCHEMA_MAPS and `dependencies`,
    whose property-name arrays are not schemas; member a name). A value of another shape
    holds no subschema. Values may be any JSON: only objects have keywords to walk.
    Keywords come in set order, members in document order.
    """
    for keyword in HOLDS_SUBSCHEMAS.intersection(node):
        value = node[keyword]
        if isinstance(value, list):
            if keyword in SUBSCHEMA_LISTS or keyword == "items":
                for index, sub in enumerate(value):
                    yield keyword, index, sub
        elif keyword in SUBSCHEMA:
            yield keyword, None, value
        elif isinstance(value, dict) and keyword not in SUBSCHEMA_LISTS:
            for name, sub in value.items():
                if keyword != DEPENDENCIES or isinstance(sub, (dict, bool)):
                    yield keyword, name, sub


def put_subschema(
    changed: dict[str, JSON], node: dict[str, JSON], keyword: str, member: Member, new: JSON
) -> None:
    """Note in `changed` (keyword -> its new value) that the subschema `subschemas_of(node)`
    gave at (keyword, member) is now `new`; the list or map holding it is copied, once."""
    if member is None:
        changed[keyword] = new
        return
    holder = changed.get(keyword)
    if holder is None:
        holder = changed[keyword] = node[keyword].copy()
    holder[member] = new


def steps(keyword: str, member: Member) -> tuple[str, ...]:
    """The JSON-Pointer tokens from a schema object to its subschema at (keyword, member)."""
    return (keyword,) if member is None else (keyword, str(member))


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
        if depth and sets_base(node):
            embedded_ids = True
        if HOLDS_SUBSCHEMAS.isdisjoint(node):
            continue
        if isinstance(node.get("items"), list):
            found.keywords.add(LIST_ITEMS)
        below = depth + 1
        stack += [(sub, below) for _, _, sub in subschemas_of(node) if isinstance(sub, dict)]
    if found.pointers and embedded_ids:
        # Pointers resolve against the nearest id; where ids are embedded, protect the
        # pointer's path below each of them too (rare, so a second walk with paths).
        roots = [path for path, node in _walk(schema, ()) if path and sets_base(node)]
        found.resource_roots += roots
    return found


def _walk(node: JSON, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], dict[str, JSON]]]:
    """Every schema object under `node` with its path from the schema root."""
    if isinstance(node, dict):
        yield path, node
        for keyword, member, sub in subschemas_of(node):
            yield from _walk(sub, path + steps(keyword, member))
