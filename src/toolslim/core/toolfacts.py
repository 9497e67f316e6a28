"""PURE. What the tool ledger knows of each tool of a catalogue as forwarded: its name as the
client and the model name it, the MCP server that owns it, its tokens and whether it is
deferred. Made once per distinct catalogue, off the request path (counting tokens is slow).

Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Final

import orjson

from toolslim.core.catalog import DEFER_LOADING
from toolslim.core.facts import fallback_label, label, layout
from toolslim.core.owners import server_of


def tool_name(name: str, namespace: str | None = None) -> str:
    """The ledger's name of a tool: its own, or `<namespace>/<name>` for a member of a
    Responses namespace (as facts.Tools names it, and as a call naming both is read)."""
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """The leaf tools of one catalogue as forwarded, in document order, as parallel tuples."""

    names: tuple[str, ...]
    servers: tuple[str, ...]
    tokens: tuple[int, ...]  # of each tool's bytes as forwarded (the tokens_saved tokenizer)
    deferred: tuple[bool, ...]  # `defer_loading: true`: not in the prompt until loaded


EMPTY = ToolFacts((), (), (), ())
# The bytes a tool takes in a catalogue's ToolFacts (or a set of its names) beside its name's
# characters: the tuples' slots, a string's and an int's headers (tracemalloc, bench/README.md).
TOOL_BYTES: Final = 120


def names_bytes(names: Collection[str]) -> int:
    """An estimate of the bytes the ledger holds for a catalogue of tools named `names`:
    cheap (no object walk), within a few per cent of tracemalloc on real catalogues."""
    return TOOL_BYTES * len(names) + sum(map(len, names))


def tool_facts(forwarded: bytes, count: Callable[[bytes], int]) -> ToolFacts:
    """The facts of each leaf tool of the catalogue `forwarded`, one level of nesting read (a
    namespace's members, a Gemini entry's declarations); never raises (bytes that are not a
    readable tool list have no tools)."""
    try:
        catalogue = orjson.loads(forwarded)
        if not isinstance(catalogue, list):
            return EMPTY
        places = layout(forwarded, catalogue)
    except (ValueError, RecursionError):
        return EMPTY
    names: list[str] = []
    servers: list[str] = []
    tokens: list[int] = []
    deferred: list[bool] = []

    def leaf(tool: object, start: int, end: int, bare: str, namespace: str | None) -> None:
        names.append(tool_name(bare, namespace))
        servers.append(server_of(bare, namespace))
        tokens.append(count(forwarded[start:end]))
        deferred.append(isinstance(tool, dict) and tool.get(DEFER_LOADING) is True)

    for index, (tool, slot) in enumerate(zip(catalogue, places.slots, strict=True)):
        if slot.nested is None:
            leaf(tool, slot.start, slot.end, fallback_label(tool, index), None)
            continue
        key, inner = slot.nested
        group = label(tool)
        for position, (member, place) in enumerate(zip(tool[key], inner.slots, strict=True)):
            leaf(member, place.start, place.end, fallback_label(member, position), group)
    return ToolFacts(tuple(names), tuple(servers), tuple(tokens), tuple(deferred))
