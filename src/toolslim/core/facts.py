"""PURE. What a tool catalogue is made of, found once per distinct catalogue: its tools in
document order, each with a digest of its exact bytes, whether it is deferred and which MCP
server its name names; where each tool's bytes stand; the counts the advisories read.

The facts live with the catalogue's memo entry (pipeline.py) and reach each request in its
RunReport, for every catalogue found, compacted or not. Must not import aiohttp or
prometheus_client.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from toolslim.core.lint import Finding, lint_raw
from toolslim.core.schema import JSON

# Keys of a catalogue element that hold more tools (catalog.NESTED_TOOL_LISTS): a Gemini
# entry's declarations, a Responses namespace's members.
NESTED_LISTS: Final = ("functionDeclarations", "function_declarations", "tools")
DECLARATIONS: Final = frozenset({"functionDeclarations", "function_declarations"})
MCP_PREFIX: Final = "mcp__"  # Claude Code (and Codex's flat form): mcp__<server>__<tool>
TOOL_SEARCH: Final = "ToolSearch"  # Claude Code's tool-search tool (ENABLE_TOOL_SEARCH)
DIGEST_SIZE: Final = 16

_WS = re.compile(r"[ \t\n\r]*")
_SCAN = json.JSONDecoder().raw_decode  # C: (text, index) -> (value, end index)


def digest(data: bytes) -> bytes:
    """The short digest facts use for identities: a catalogue's, a tool's."""
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


# --- where the tools stand -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """One element of a tool list: its bytes in the catalogue, and the tool list nested in it
    (a Gemini entry's declarations, a namespace's members) as `(key, Layout)`, if any."""

    start: int
    end: int
    nested: tuple[str, Layout] | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """A tool list: the span of its `[...]` and the slot of each element, in order."""

    start: int
    end: int
    slots: tuple[Slot, ...]


def nested_key(tool: JSON) -> str | None:
    """The key of the tool list an element holds (the last NESTED_LISTS key present)."""
    if not isinstance(tool, dict):
        return None
    found = None
    for key in NESTED_LISTS:
        if isinstance(tool.get(key), list):
            found = key
    return found


def layout(raw: bytes, catalogue: Sequence[JSON]) -> Layout:
    """Where each element of `catalogue` stands in `raw`, its exact bytes, one level of nested
    tool lists included. `raw` must be a JSON array that `catalogue` was parsed from.

    Bytes exactly as orjson writes `catalogue` (compact clients: Node's JSON.stringify, Rust's
    serde) are measured by writing each element; any others are read as Latin-1, so that every
    character is one byte (offsets are byte offsets), and scanned with the stdlib's C decoder:
    JSON's structure is ASCII, so multi-byte UTF-8 inside strings cannot move a boundary. Both
    give the same layout. Raises ValueError on bytes that disagree with `catalogue`.
    """
    try:
        if orjson.dumps(catalogue) == raw:
            return _written_layout(catalogue, 0)
    except orjson.JSONEncodeError:
        pass
    text = raw.decode("latin-1")
    return _list_layout(text, _skip_ws(text, 0), catalogue)


def _written_layout(items: Sequence[JSON], at: int) -> Layout:
    """The layout of `items` written by orjson at `at`: `[`, elements joined by `,`, `]`."""
    slots = []
    position = at + 1
    for item in items:
        size = len(orjson.dumps(item))
        key = nested_key(item)
        nested = None
        if key is not None:
            offset = position + 1  # past the `{`; members are `"key":value` joined by `,`
            for name, value in item.items():
                head = len(orjson.dumps(name)) + 1
                if name == key:
                    nested = (key, _written_layout(value, offset + head))
                offset += head + len(orjson.dumps(value)) + 1
        slots.append(Slot(position, position + size, nested))
        position += size + 1
    return Layout(at, position if items else at + 2, tuple(slots))


def _skip_ws(text: str, at: int) -> int:
    match = _WS.match(text, at)
    assert match is not None  # `*` matches the empty string
    return match.end()


def _list_layout(text: str, at: int, items: Sequence[JSON]) -> Layout:
    if text[at : at + 1] != "[":
        raise ValueError(f"a tool list does not start at {at}")
    start, slots = at, []
    at = _skip_ws(text, at + 1)
    for index, item in enumerate(items):
        if index:
            if text[at : at + 1] != ",":
                raise ValueError(f"expected ',' at {at}")
            at = _skip_ws(text, at + 1)
        _, end = _SCAN(text, at)
        key = nested_key(item)
        nested = None
        if key is not None:
            nested = (key, _list_layout(text, _member_start(text, at, key), item[key]))
        slots.append(Slot(at, end, nested))
        at = _skip_ws(text, end)
    if text[at : at + 1] != "]":
        raise ValueError(f"expected ']' at {at}")
    return Layout(start, at + 1, tuple(slots))


def _member_start(text: str, at: int, key: str) -> int:
    """Where the value of the last member `key` of the object at `at` starts."""
    found = None
    at = _skip_ws(text, at + 1)
    while text[at : at + 1] == '"':
        name, end = _SCAN(text, at)
        at = _skip_ws(text, _skip_ws(text, end) + 1)  # past the ':'
        if name == key:
            found = at
        _, end = _SCAN(text, at)
        at = _skip_ws(text, end)
        if text[at : at + 1] == ",":
            at = _skip_ws(text, at + 1)
    if found is None:
        raise ValueError(f"no member {key!r}")
    return found


# --- what the tools are ----------------------------------------------------------------------


def label(tool: JSON) -> str | None:
    """The name a tool is sorted and reported by: its `name` (OpenAI Chat: `function.name`),
    else its `type` (a built-in such as Responses' web_search); None for anything else."""
    if not isinstance(tool, dict):
        return None
    name = tool.get("name")
    if isinstance(name, str):
        return name
    inner = tool.get("function")
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
        return str(inner["name"])
    kind = tool.get("type")
    return kind if isinstance(kind, str) else None


def server_of(name: str) -> str | None:
    """The MCP server a tool name names: Claude Code's `mcp__<server>__<tool>`, or Gemini
    CLI's `<server>__<tool>` (the prefix it gives a tool whose name another server took)."""
    rest = name.removeprefix(MCP_PREFIX)
    server, sep, tool = rest.partition("__")
    return server if sep and server and tool else None


@dataclass(frozen=True, slots=True)
class Tools:
    """The leaf tools of a catalogue, in document order, as parallel tuples."""

    names: tuple[str, ...]  # labels; a namespace member as `<namespace>/<name>`
    digests: tuple[bytes, ...]  # of each tool's exact bytes (a member's: with its namespace's)
    servers: tuple[str | None, ...]
    sizes: tuple[int, ...]
    deferred: int  # tools with `defer_loading: true`
    declarations: int  # Gemini function declarations
    mcp_tools: int  # tools whose name starts with mcp__
    mcp_bytes: int  # their bytes
    tool_search: bool  # a tool named ToolSearch is in the catalogue


class CatalogueFacts:
    """The facts of one catalogue, exact bytes in. Cheap to make: the tools are read on first
    use (when the request is counted, after its response), once, and the bytes let go.

    Identity is `digest`, of the exact bytes: two catalogues with the same digest are the
    same catalogue.
    """

    __slots__ = ("_findings", "_raw", "_tools", "digest", "forwarded", "size")

    def __init__(self, raw: bytes, forwarded: bytes | None = None) -> None:
        """`raw` the catalogue as received; `forwarded` as the pipeline forwards it (None:
        unchanged), whose tools the tool ledger counts tokens of (toolfacts.py)."""
        self.digest = digest(raw)
        self.size = len(raw)
        self._raw: bytes | None = raw
        self._tools: Tools | None = None
        self.forwarded = raw if forwarded is None else forwarded
        self._findings: dict[str, tuple[Finding, ...]] | None = None  # by API

    @property
    def tools(self) -> Tools:
        if self._tools is None:
            assert self._raw is not None
            self._tools = read_tools(self._raw)
            self._raw = None
        return self._tools

    @property
    def read(self) -> bool:
        """Whether the tools were read (then the bytes are let go)."""
        return self._tools is not None

    def findings(self, api: str) -> tuple[Finding, ...]:
        """The lint findings of this catalogue sent to `api`, found on first use and kept.
        Asked before the tools are read (when the request is transformed), so the bytes are
        still held; asked for another API after that, it finds none."""
        found = self.known_findings(api)
        if found is None:
            found = lint_raw(self._raw, api) if self._raw is not None else ()
            self.remember_findings(api, found)
        return found

    def known_findings(self, api: str) -> tuple[Finding, ...] | None:
        """The findings for `api` if they were found before, else None."""
        return None if self._findings is None else self._findings.get(api)

    def remember_findings(self, api: str, found: tuple[Finding, ...]) -> None:
        """The findings for `api` as found before from the same bytes (the same digest)."""
        self._findings = {**(self._findings or {}), api: found}

    def known(self, tools: Tools) -> None:
        """The tools as read before from the same bytes (the same digest), so they are not
        read again: a catalogue the memo let go and met again."""
        if self._tools is None:
            self._tools, self._raw = tools, None

    def __repr__(self) -> str:
        return f"CatalogueFacts({self.digest.hex()}, {self.size} B)"


_EMPTY = Tools((), (), (), (), 0, 0, 0, 0, False)


def read_tools(raw: bytes) -> Tools:
    """The leaf tools of the catalogue `raw`, one level of nesting read; never raises (bytes
    that are not a readable tool list have no tools)."""
    try:
        catalogue = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            catalogue = json.loads(raw)  # integers past 64 bits, which orjson refuses
        except (ValueError, RecursionError):
            return _EMPTY
    if not isinstance(catalogue, list):
        return _EMPTY
    try:
        places = layout(raw, catalogue)
    except (ValueError, RecursionError):
        return _EMPTY
    reader = _Reader(raw)
    for index, (tool, slot) in enumerate(zip(catalogue, places.slots, strict=True)):
        if slot.nested is None:
            reader.leaf(tool, slot, fallback_label(tool, index), None, b"")
            continue
        key, inner = slot.nested
        group = label(tool)
        # A member's digest includes its container's own bytes (a namespace's description):
        # a change there changes what every member means.
        own = digest(raw[slot.start : inner.start] + raw[inner.end : slot.end])
        for position, (member, member_slot) in enumerate(zip(tool[key], inner.slots, strict=True)):
            name = fallback_label(member, position)
            reader.leaf(
                member,
                member_slot,
                f"{group}/{name}" if group is not None else name,
                group,
                own,
                declaration=key in DECLARATIONS,
            )
    return reader.tools()


def fallback_label(tool: JSON, index: int) -> str:
    """`label`, else an object's first key (a Gemini `{"googleSearch": {}}`), else `#index`."""
    found = label(tool)
    if found is not None:
        return found
    if isinstance(tool, dict) and tool:
        return str(next(iter(tool)))
    return f"#{index}"


class _Reader:
    """Collects the leaf tools of one catalogue (used by `read_tools` only)."""

    def __init__(self, raw: bytes) -> None:
        self.view = memoryview(raw)
        self.names: list[str] = []
        self.digests: list[bytes] = []
        self.servers: list[str | None] = []
        self.sizes: list[int] = []
        self.deferred = self.declarations = self.mcp_tools = self.mcp_bytes = 0
        self.tool_search = False

    def leaf(
        self,
        tool: JSON,
        slot: Slot,
        name: str,
        group: str | None,
        own: bytes,
        declaration: bool = False,
    ) -> None:
        size = slot.end - slot.start
        hashed = hashlib.blake2b(own, digest_size=DIGEST_SIZE)
        hashed.update(self.view[slot.start : slot.end])  # no copy of the tool's bytes
        bare = label(tool) or name
        self.names.append(name)
        self.digests.append(hashed.digest())
        self.servers.append(group or server_of(bare))
        self.sizes.append(size)
        self.deferred += isinstance(tool, dict) and tool.get("defer_loading") is True
        self.declarations += declaration
        if bare.startswith(MCP_PREFIX):
            self.mcp_tools += 1
            self.mcp_bytes += size
        self.tool_search = self.tool_search or bare == TOOL_SEARCH

    def tools(self) -> Tools:
        return Tools(
            tuple(self.names),
            tuple(self.digests),
            tuple(self.servers),
            tuple(self.sizes),
            self.deferred,
            self.declarations,
            self.mcp_tools,
            self.mcp_bytes,
            self.tool_search,
        )
