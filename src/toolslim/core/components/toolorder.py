"""PURE. The `toolorder` component: puts a catalogue's tools in one canonical order, so that a
client that sends the same tools in another order (an MCP server reconnecting, servers that
connect in a different order) sends the provider the same prompt prefix.

The order: tools sorted by name (code point order), within each list where tools sit: the top
level (Responses namespaces among the tools, by their name), each namespace's members, each
Gemini `tools[]` entry's declarations (the entries themselves stay where they are). A tool
carrying `cache_control` keeps its index, so the breakpoint stays on the tool it was on (the
last one, as clients put it), and deferred tools (`defer_loading: true`) come after the rest.
No tool's bytes change. Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson

from toolslim.core.facts import Layout, label, layout, nested_key
from toolslim.core.schema import JSON

NAME: Final = "toolorder"
REORDERED: Final = "reordered_tools"  # the counter key: tools (or namespaces) that moved


def _anchored(tool: JSON) -> bool:
    """A tool that keeps its index: it carries a cache breakpoint, or has nothing to sort by."""
    return not isinstance(tool, dict) or "cache_control" in tool or label(tool) is None


def _deferred(tool: JSON) -> bool:
    return isinstance(tool, dict) and tool.get("defer_loading") is True


def _canonical(tool: JSON) -> bytes:
    """The tie-break for two tools of one name: their canonical bytes (never an index, which
    would make the order depend on the order received)."""
    try:
        return orjson.dumps(tool, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes: compare what it can
        return repr(tool).encode()


def permutation(tools: Sequence[JSON]) -> list[int] | None:
    """The canonical order of one tool list as `new position -> old index`, or None when the
    list is in that order already. Anchored tools keep their index; the others fill the
    remaining positions sorted by (deferred, name), tied names by their canonical bytes."""
    movable = [i for i, tool in enumerate(tools) if not _anchored(tool)]
    names = [label(tools[i]) or "" for i in movable]
    tied = len(set(names)) < len(names)

    def key(index: int) -> tuple[bool, str, bytes]:
        tool = tools[index]
        return _deferred(tool), label(tool) or "", _canonical(tool) if tied else b""

    order = sorted(movable, key=key)
    if order == movable:
        return None
    result = list(range(len(tools)))
    for position, index in zip(movable, order, strict=True):
        result[position] = index
    return result


def _moved(order: Sequence[int]) -> int:
    return sum(1 for position, index in enumerate(order) if position != index)


def _members_ordered(catalogue: list[JSON]) -> tuple[list[JSON], int]:
    """The catalogue with each nested tool list (namespace, Gemini entry) in order."""
    moved = 0
    items = catalogue
    for index, tool in enumerate(catalogue):
        key = nested_key(tool)
        if key is None:
            continue
        inner = tool[key]
        order = permutation(inner)
        if order is not None:
            if items is catalogue:
                items = list(catalogue)
            items[index] = {**tool, key: [inner[i] for i in order]}
            moved += _moved(order)
    return items, moved


def order_catalogue(catalogue: list[JSON]) -> tuple[list[JSON], int]:
    """The catalogue in canonical order and how many tools (or namespaces) moved; the very same
    list when nothing moves. Never mutates its input: a reordered nested list gets a new
    containing object, every tool object is the one given."""
    items, moved = _members_ordered(catalogue)
    # The top level is sorted with its members in order, so that ties compare canonical bytes.
    order = permutation(items)
    if order is not None:
        items = [items[i] for i in order]
        moved += _moved(order)
    return items, moved


def reorder_raw(raw: bytes, catalogue: list[JSON]) -> bytes:
    """`raw` with its tools in the order `order_catalogue` gives, each tool's bytes exactly as
    received and every byte between tools where it was: the same length, the same bytes
    rearranged. `catalogue` is `raw` parsed. Raises ValueError when the two disagree."""
    places = layout(raw, catalogue)
    items, _ = _members_ordered(catalogue)
    return _render(
        raw, places, permutation(items), lambda index: _element(raw, catalogue, places, index)
    )


def _element(raw: bytes, catalogue: list[JSON], places: Layout, index: int) -> bytes:
    """The bytes of top-level element `index`, its nested tool list (if any) in order."""
    slot = places.slots[index]
    if slot.nested is None:
        return raw[slot.start : slot.end]
    key, inner = slot.nested
    members = catalogue[index][key]
    nested = _render(raw, inner, permutation(members), lambda i: _span(raw, inner, i))
    return raw[slot.start : inner.start] + nested + raw[inner.end : slot.end]


def _span(raw: bytes, places: Layout, index: int) -> bytes:
    slot = places.slots[index]
    return raw[slot.start : slot.end]


def _render(
    raw: bytes, places: Layout, order: Sequence[int] | None, element: Callable[[int], bytes]
) -> bytes:
    """The list at `places` with element `order[k]` (`element(k)` when None) at position k,
    each separator where it was."""
    slots = places.slots
    if not slots:
        return raw[places.start : places.end]
    if order is None:
        order = range(len(slots))
    pieces = [raw[places.start : slots[0].start]]
    for position, index in enumerate(order):
        if position:
            pieces.append(raw[slots[position - 1].end : slots[position].start])
        pieces.append(element(index))
    pieces.append(raw[slots[-1].end : places.end])
    return b"".join(pieces)


class ToolOrder:
    """The component: one verb, `order`, over a whole catalogue (the others rewrite one tool
    schema at a time). Counted as `reordered_tools`."""

    name = NAME

    def order(self, catalogue: list[JSON]) -> tuple[list[JSON], Counter[str]]:
        ordered, moved = order_catalogue(catalogue)
        return ordered, Counter({REORDERED: moved}) if moved else Counter()


def make(options: Mapping[str, Any]) -> ToolOrder:
    """The registry's factory (pipeline.KNOWN); toolorder has no options."""
    if options:
        raise ValueError(f"toolorder takes no options, got {', '.join(sorted(options))}")
    return ToolOrder()
