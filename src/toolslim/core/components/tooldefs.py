"""PURE. The `tooldefs` component: removes the entries of a tool schema's root `$defs` and
`definitions` tables that no reference can reach, losslessly (issue 6 §1).

Values in, values out; must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from toolslim.core.schema import (
    JSON,
    MAX_DEPTH,
    REFERENCES,
    TooDeep,
    decode_pointer,
    sets_base,
    subschemas_of,
)

# The root definition tables: `$defs` (2019-09 and later) and `definitions` (draft-04 to 07).
TABLES = ("$defs", "definitions")

# Keywords whose mere presence makes reachability unprovable, and the reason each is counted
# under: every reference keyword but `$ref` (schema.REFERENCES).
UNSAFE_KEYWORDS = {keyword: why for keyword, why in REFERENCES.items() if why is not None}

# Keys of the component's Counter: `unsafe:<reason>` when it skips, `definitions` removed.
UNSAFE = "unsafe:"
REMOVED = "definitions"

MISSING = object()  # what `resolve` returns when a pointer selects nothing


class _Scan:
    """The references and unsafe constructs found by walking some schema positions."""

    __slots__ = ("pointers", "reasons")

    def __init__(self) -> None:
        self.pointers: list[tuple[str, ...]] = []
        self.reasons: set[str] = set()


class ToolDefs:
    """The `tooldefs` component: prunes unreachable root definitions, losslessly."""

    name = "tooldefs"

    def rewrite(self, schema: JSON, tool_name: str | None) -> tuple[JSON, Counter[str]]:
        """The schema without unreachable root definitions (same object when none go).

        A tool whose references are not all local JSON Pointers, or that uses anchors,
        dynamic references or an embedded `$id`, is left as it is and counted as
        `unsafe:<reason>`.
        """
        counts: Counter[str] = Counter()
        if not isinstance(schema, dict):
            return schema, counts
        tables = {t: schema[t] for t in TABLES if isinstance(schema.get(t), dict) and schema[t]}
        if not tables:
            return schema, counts
        found = _Scan()
        _scan(schema, 0, found, root=True)
        entries: dict[tuple[str, str], _Scan] = {}
        for table, members in tables.items():
            for name, entry in members.items():
                entries[table, name] = scan = _Scan()
                _scan(entry, 1, scan)
                found.reasons |= scan.reasons
        kept: dict[str, set[str]] = {table: set() for table in tables}
        if not found.reasons:
            _reach(schema, tables, entries, found, kept)
        if found.reasons:
            counts.update(UNSAFE + reason for reason in found.reasons)
            return schema, counts
        gone = sum(len(tables[t]) - len(kept[t]) for t in tables)
        if not gone:
            return schema, counts
        counts[REMOVED] = gone
        out: dict[str, JSON] = {}
        for key, value in schema.items():
            if key in tables and len(kept[key]) < len(value):
                if not kept[key]:
                    continue  # the table became empty: it goes too
                value = {name: sub for name, sub in value.items() if name in kept[key]}
            out[key] = value
        return out, counts


def make(options: Mapping[str, Any]) -> ToolDefs:
    """The registry factory: `tooldefs` takes no options, so any key is an error."""
    if options:
        raise ValueError(f"tooldefs: unknown option {sorted(options)[0]!r}; it takes no options")
    return ToolDefs()


def _scan(node: JSON, depth: int, found: _Scan, *, root: bool = False) -> None:
    """Collect the references and unsafe keywords of `node` and every schema position below
    it; at the document root, the root tables are left out (their entries are scanned alone).
    """
    if not isinstance(node, dict):
        return
    top = node
    stack = [(node, depth)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TooDeep(depth)
        if "$ref" in node:
            _note_reference(node["$ref"], found)
        for keyword, reason in UNSAFE_KEYWORDS.items():
            if keyword in node:
                found.reasons.add(reason)
        if depth and sets_base(node):
            found.reasons.add("embedded_id")
        for keyword, _, sub in subschemas_of(node):
            if isinstance(sub, dict) and not (root and node is top and keyword in TABLES):
                stack.append((sub, depth + 1))


def _note_reference(reference: JSON, found: _Scan) -> None:
    if not isinstance(reference, str):
        found.reasons.add("invalid_ref")
    elif not reference.startswith("#"):
        found.reasons.add("remote_ref")  # resolves against a base URI, maybe another document
    else:
        pointer = decode_pointer(reference)
        if pointer is None:
            found.reasons.add("anchor_ref")
        else:
            found.pointers.append(pointer)


def _reach(
    schema: dict[str, JSON],
    tables: dict[str, dict[str, JSON]],
    entries: dict[tuple[str, str], _Scan],
    found: _Scan,
    kept: dict[str, set[str]],
) -> None:
    """Mark in `kept` every definition a reference outside the tables reaches, transitively.

    A reachable definition is kept whole, so every reference inside it counts. A pointer
    may also land outside any schema position (`#/x-shared/a`); the value there is then
    evaluated as a schema, so it is scanned for references too.
    """
    scanned: set[int] = set()
    work = list(found.pointers)
    while work and not found.reasons:
        pointer = work.pop()
        if not pointer:
            continue  # `#`: the root, already scanned
        table = tables.get(pointer[0])
        if table is not None:
            names = list(table) if len(pointer) == 1 else [pointer[1]]
            for name in names:
                if name in table and name not in kept[pointer[0]]:
                    kept[pointer[0]].add(name)
                    work += entries[pointer[0], name].pointers
            if len(pointer) <= 2:
                continue  # the table or the entry itself: scanned whole above
        target = resolve(schema, pointer)
        if isinstance(target, dict) and id(target) not in scanned:
            scanned.add(id(target))
            scan = _Scan()
            _scan(target, len(pointer), scan)
            found.reasons |= scan.reasons
            work += scan.pointers


def resolve(document: JSON, pointer: tuple[str, ...]) -> JSON:
    """The value a JSON Pointer (RFC 6901, tokens decoded) selects, or MISSING."""
    node = document
    for token in pointer:
        if isinstance(node, dict):
            node = node.get(token, MISSING)
        elif isinstance(node, list) and is_index(token) and int(token) < len(node):
            node = node[int(token)]
        else:
            return MISSING
    return node


def is_index(token: str) -> bool:
    """An RFC 6901 array index: ASCII digits without a leading zero."""
    return token.isascii() and token.isdigit() and (token == "0" or token[0] != "0")
