"""PURE. The `toolbudget` component: shrinks a tool schema that is over a byte budget, in four
lossy steps that stop as soon as it fits (issue 6 §2). Opt-in: it changes what the model reads.

Values in, values out; must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from toolslim.core.components.tooldefs import MISSING, TABLES, resolve
from toolslim.core.schema import (
    ANCHOR_KEYWORDS,
    HOLDS_SUBSCHEMAS,
    ID_KEYWORDS,
    JSON,
    MAX_DEPTH,
    POINTER_KEYWORDS,
    TooDeep,
    decode_pointer,
    is_too_deep,
    put_subschema,
    subschemas_of,
    survey,
)

DEFAULT_BUDGET_BYTES = 5000
OPTIONS = ("budget_bytes", "exclude_tools")

# Step 3 replaces nodes holding any of these at DEEP schema steps or more below the root.
COMPLEX = frozenset(
    {
        "$ref",
        "additionalProperties",
        "allOf",
        "anyOf",
        "items",
        "oneOf",
        "properties",
    }
)
DEEP = 3

# Step 4 replaces nodes holding any of these.
COMBINATORS = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
    }
)

# An edit sees one schema node and its depth in schema steps; it returns the node to use
# and whether to go on into that node's subschemas.
Edit = Callable[[dict[str, JSON], int], tuple[JSON, bool]]


class ToolBudget:
    """The `toolbudget` component: lossy, best effort, per tool, never on excluded tools."""

    name = "toolbudget"

    def __init__(
        self, budget_bytes: int = DEFAULT_BUDGET_BYTES, exclude_tools: frozenset[str] = frozenset()
    ) -> None:
        self.budget_bytes = budget_bytes
        self.exclude_tools = exclude_tools

    def rewrite(self, schema: JSON, tool_name: str | None) -> tuple[JSON, Counter[str]]:
        """The schema shrunk step by step until its compact form fits the budget.

        Counts, per step, the schemas it changed (`stepN_<what>`) and the bytes it removed
        (`stepN_bytes`); `over_budget` when it still does not fit; `excluded` tools.
        """
        counts: Counter[str] = Counter()
        if tool_name is not None and tool_name in self.exclude_tools:
            counts["excluded"] = 1
            return schema, counts
        if not isinstance(schema, dict):
            return schema, counts
        size = _size(schema)
        if size is None or size <= self.budget_bytes:
            return schema, counts
        # Only a schema with references can be left with a dangling one by a step.
        settle = survey(schema).references
        current = schema
        for changed_key, bytes_key, step in _STEPS:
            if size <= self.budget_bytes:
                break
            new = step(current)
            if new is current:
                continue
            if settle:
                new = _settle(new, schema)
            new_size = _size(new)
            if new_size is None:  # cannot happen for a smaller value; keep the last good one
                break
            counts[changed_key] += 1
            counts[bytes_key] += size - new_size
            current, size = new, new_size
        if size > self.budget_bytes:
            counts["over_budget"] = 1
        return current, counts


def make(options: Mapping[str, Any]) -> ToolBudget:
    """The registry factory. Raises ValueError naming the option and repeating the bad value."""
    for key in options:
        if key not in OPTIONS:
            raise ValueError(
                f"toolbudget: unknown option {key!r}; known options: {', '.join(OPTIONS)}"
            )
    budget = options.get("budget_bytes", DEFAULT_BUDGET_BYTES)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(
            f"toolbudget.budget_bytes: expected an integer greater than 0, got {budget!r}"
        )
    exclude = options.get("exclude_tools", ())
    if not isinstance(exclude, (list, tuple)) or not all(isinstance(n, str) for n in exclude):
        raise ValueError(
            f"toolbudget.exclude_tools: expected a list of tool names, got {exclude!r}"
        )
    return ToolBudget(budget, frozenset(exclude))


def _size(schema: JSON) -> int | None:
    """Bytes of the compact serialization; None if orjson cannot write it (a lone surrogate:
    the catalogue is then skipped as a whole anyway)."""
    try:
        return len(orjson.dumps(schema))
    except orjson.JSONEncodeError as exc:
        if is_too_deep(exc):
            raise TooDeep(str(exc)) from exc
        return None


def _drop_descriptions(schema: dict[str, JSON]) -> JSON:
    """Step 1: no `description` keyword in nested schema nodes (the root's stays)."""

    def edit(node: dict[str, JSON], depth: int) -> tuple[JSON, bool]:
        if depth and "description" in node:
            return {k: v for k, v in node.items() if k != "description"}, True
        return node, True

    return _rewrite(schema, 0, edit)


def _drop_definitions(schema: dict[str, JSON]) -> JSON:
    """Step 2: every reference that can land in the root tables becomes `{}`, and the tables go.

    Conservatively, "can land" covers pointers into the tables, plain-name (anchor) fragments,
    and any non-local reference when the tables hold an `$id`. If the root itself refers to
    one definition (`{"$ref": "#/definitions/Args", ...}`), that definition holds the argument
    names, so it stays, alone, with the references inside it replaced too.
    """
    present = [t for t in TABLES if t in schema]
    if not present:
        return schema
    ids = any(
        not survey(entry).keywords.isdisjoint(ID_KEYWORDS)
        for t in present
        if isinstance(schema[t], dict)
        for entry in schema[t].values()
        if isinstance(entry, dict)
    )

    def lands(node: dict[str, JSON]) -> bool:
        return any(_lands_in_tables(node.get(k), present, ids) for k in POINTER_KEYWORDS)

    keep = _root_definition(schema, present)
    out: dict[str, JSON] = {}
    for key, value in schema.items():
        if key in present:
            if keep is not None and key == keep[0]:
                out[key] = {keep[1]: value[keep[1]]}
            continue
        spared = key == "$ref" and keep is not None
        if key in POINTER_KEYWORDS and not spared and _lands_in_tables(value, present, ids):
            continue  # the root is never replaced: only its reference goes
        out[key] = value

    def edit(node: dict[str, JSON], depth: int) -> tuple[JSON, bool]:
        if depth and lands(node):
            return {}, False
        return node, True

    return _rewrite(out, 0, edit)


def _root_definition(schema: dict[str, JSON], present: list[str]) -> tuple[str, str] | None:
    """(table, name) of the root definition the root's own `$ref` points into, if any."""
    reference = schema.get("$ref")
    pointer = decode_pointer(reference) if isinstance(reference, str) else None
    if not reference or reference[0] != "#" or pointer is None or len(pointer) < 2:
        return None
    table = schema.get(pointer[0]) if pointer[0] in present else None
    if isinstance(table, dict) and pointer[1] in table:
        return pointer[0], pointer[1]
    return None


def _lands_in_tables(reference: JSON, present: list[str], ids: bool) -> bool:
    if not isinstance(reference, str):
        return False
    if not reference.startswith("#"):
        return ids
    pointer = decode_pointer(reference)
    return pointer is None or (bool(pointer) and pointer[0] in present)


def _drop_deep(schema: dict[str, JSON]) -> JSON:
    """Step 3: complex nodes at DEEP schema steps or more below the root become `{}`."""

    def edit(node: dict[str, JSON], depth: int) -> tuple[JSON, bool]:
        if depth >= DEEP and not COMPLEX.isdisjoint(node):
            return {}, False
        return node, True

    return _rewrite(schema, 0, edit)


def _drop_combinators(schema: dict[str, JSON]) -> JSON:
    """Step 4: nodes holding `anyOf`/`oneOf`/`allOf` become `{}`.

    Never the root, nor the root definition the root refers to: they hold the argument names.
    """
    keep = _root_definition(schema, [t for t in TABLES if t in schema])
    spared = None if keep is None else schema[keep[0]][keep[1]]

    def edit(node: dict[str, JSON], depth: int) -> tuple[JSON, bool]:
        if depth and node is not spared and not COMBINATORS.isdisjoint(node):
            return {}, False
        return node, True

    return _rewrite(schema, 0, edit)


# In order: (Counter key of schemas changed, Counter key of bytes removed, step).
_STEPS: tuple[tuple[str, str, Callable[[dict[str, JSON]], JSON]], ...] = (
    ("step1_descriptions", "step1_bytes", _drop_descriptions),
    ("step2_definitions", "step2_bytes", _drop_definitions),
    ("step3_deep_nodes", "step3_bytes", _drop_deep),
    ("step4_combinators", "step4_bytes", _drop_combinators),
)


def _rewrite(node: JSON, depth: int, edit: Edit) -> JSON:
    """`node` with `edit` applied top-down at every schema position (same object if unchanged).

    Recursion follows subschema positions only, never property names or instance data.
    """
    if not isinstance(node, dict):
        return node
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    node, descend = edit(node, depth)
    if not descend or HOLDS_SUBSCHEMAS.isdisjoint(node):
        return node
    changed: dict[str, JSON] = {}
    for keyword, member, sub in subschemas_of(node):
        new = _rewrite(sub, depth + 1, edit)
        if new is not sub:
            put_subschema(changed, node, keyword, member, new)
    return {**node, **changed} if changed else node


def _settle(new: JSON, original: dict[str, JSON]) -> JSON:
    """`new` without the reference keywords that resolved in `original` but dangle in `new`.

    A step that replaces a node by `{}` may take away what another reference pointed at;
    a dangling reference makes some providers reject the whole request, so it goes.
    """
    before, now = _Targets(original), _Targets(new)

    def edit(node: dict[str, JSON], depth: int) -> tuple[JSON, bool]:
        dangling = [
            k
            for k in POINTER_KEYWORDS
            if isinstance(node.get(k), str)
            and before.resolves(node[k], original)
            and not now.resolves(node[k], new)
        ]
        if dangling:
            return {k: v for k, v in node.items() if k not in dangling}, True
        return node, True

    return _rewrite(new, 0, edit)


class _Targets:
    """The anchors and `$id`s a schema declares in its schema positions."""

    def __init__(self, schema: JSON) -> None:
        self.anchors: set[str] = set()
        self.ids: set[str] = set()

        def edit(node: dict[str, JSON], depth: int) -> tuple[JSON, bool]:
            for keyword in ANCHOR_KEYWORDS:
                if isinstance(node.get(keyword), str):
                    self.anchors.add(node[keyword])
            for keyword in ID_KEYWORDS:
                uri = node.get(keyword)
                if not isinstance(uri, str):
                    continue
                if uri.startswith("#"):
                    self.anchors.add(uri[1:])  # draft-04 to 07: `"$id": "#name"` is an anchor
                else:
                    self.ids.add(uri.partition("#")[0])
            return node, True

        _rewrite(schema, 0, edit)

    def resolves(self, reference: str, document: JSON) -> bool:
        """Whether `reference` finds a target in `document` (non-local: an exact `$id`)."""
        if not reference.startswith("#"):
            return reference.partition("#")[0] in self.ids
        pointer = decode_pointer(reference)
        if pointer is None:
            return reference[1:] in self.anchors
        return resolve(document, pointer) is not MISSING
