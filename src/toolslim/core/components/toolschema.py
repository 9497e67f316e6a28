"""PURE. The `toolschema` component: strips annotation keywords from a tool schema by position,
losslessly, and the root `$schema` and unreferenced `$id`s where nothing resolves against them.

A schema step (pipeline.SchemaStep). Values in, values out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from toolslim.core.schema import (
    ANNOTATIONS,
    DIALECT_CONFLICTS,
    HOLDS_SUBSCHEMAS,
    JSON,
    Survey,
    dialect,
    put_subschema,
    steps,
    subschemas_of,
    survey,
)

# What may go from a schema object: annotations always, an `$id` while nothing resolves
# against it (draft-04's `id` always stays).
_MAYBE_REMOVED = ANNOTATIONS | {"$id"}


class _Plan:
    """What may go from one tool's schema, decided from its survey. `protected` holds the
    keyword paths a JSON Pointer runs through, below each resource root."""

    __slots__ = ("drop_ids", "keywords", "protected")

    def __init__(self, found: Survey) -> None:
        self.drop_ids = not found.references
        self.keywords = found.keywords
        self.protected = frozenset(
            root + pointer[:end]
            for pointer in found.pointers
            for root in found.resource_roots
            for end in range(1, len(pointer) + 1)
        )

    def drops_schema(self, uri: JSON) -> bool:
        """Whether the root `$schema` naming `uri` may go: never while references resolve
        against it, nor while a keyword in use validates differently under its dialect.

        Only the root's goes: it names the dialect the providers assume anyway. A nested one
        sets its subschema's dialect for any reader (jsonschema switches there), so it stays.
        """
        if not self.drop_ids:
            return False
        name = dialect(uri)
        return name is not None and DIALECT_CONFLICTS[name].isdisjoint(self.keywords)


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
        if "$schema" in out and plan.drops_schema(out["$schema"]):
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
            return node
        drop = []
    else:
        drop = [
            key for key in _MAYBE_REMOVED.intersection(node) if key in ANNOTATIONS or plan.drop_ids
        ]
        if drop and path is not None:
            drop = [key for key in drop if (*path, key) not in plan.protected]
    changed: dict[str, JSON] = {}
    for keyword, member, sub in subschemas_of(node):
        if isinstance(sub, dict):
            below = None if path is None else path + steps(keyword, member)
            new = _strip(sub, plan, below, removed)
            if new is not sub:
                put_subschema(changed, node, keyword, member, new)
    if not drop and not changed:
        return node
    out = {**node, **changed}
    for key in drop:
        del out[key]
        removed[key] += 1
    return out


def make(options: Mapping[str, Any]) -> ToolSchema:
    """The registry's factory (pipeline.KNOWN): `toolschema` takes no options."""
    if options:
        raise ValueError(f"toolschema takes no options, got {', '.join(sorted(options))}")
    return ToolSchema()
