"""Request bodies around one small catalogue, a hypothesis strategy of bodies with the catalogue
at any member position, and a schema with stale definitions: the cases the envelope's, the
memo's and tooldefs' tests share."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import strategies as st

from toolslim.core.components.toolschema import ToolSchema
from toolslim.core.entry import Step
from toolslim.core.envelope import Compacted, compact
from toolslim.core.memo import Memo

STRIP = (Step.rewriting(ToolSchema().rewrite),)


def cold(body: bytes, rewrites: Any = STRIP, api: str | None = None) -> Compacted:
    return compact(body, Memo(0), rewrites, api)


# A catalogue long enough (> 64 bytes) for the memo-hit byte search to index it.
CATALOGUE = (
    b'[{"name":"Read","description":"Read a file","input_schema":{"type":"object",'
    b'"title":"ReadInput","properties":{"file_path":{"type":"string","title":"Path"}},'
    b'"required":["file_path"]}},{"name":"Bash","input_schema":{"type":"object",'
    b'"properties":{"command":{"type":"string","examples":["ls"]}}}}]'
)


COMPACTED = (
    b'[{"description":"Read a file","input_schema":{"properties":{"file_path":'
    b'{"type":"string"}},"required":["file_path"],"type":"object"},"name":"Read"},'
    b'{"input_schema":{"properties":{"command":{"type":"string"}},"type":"object"},'
    b'"name":"Bash"}]'
)


def anthropic(messages: bytes = b"[]", tools: bytes = CATALOGUE) -> bytes:
    return b'{"model":"claude","messages":' + messages + b',"tools":' + tools + b',"stream":true}'


KEYS = ["model", "messages", "system", "stream", "metadata", "max_tokens", "x", "tool_choice"]


TRAPS = st.sampled_from(
    [
        '"tools": [1]',
        '{"tools":[]}',
        '"tools":',
        "\\",
        "é",
        "\u2028",
        '"}',
        "tools",
    ]
)


VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=5),
        TRAPS,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*KEYS, "tools", "input"]), inner, max_size=3),
    ),
    max_leaves=8,
)


SCHEMA_VALUES = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["string", "object", "integer"]),
            "title": st.text(max_size=3),
            "examples": st.lists(VALUES, max_size=2),
            "description": st.text(max_size=5),
            "default": VALUES,
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(st.sampled_from(["b", "a", "title"]), inner, max_size=3),
            "readOnly": st.booleans(),
        },
    ),
    max_leaves=5,
)


TOOLS = st.lists(
    st.fixed_dictionaries(
        {"name": st.text(min_size=1, max_size=4), "input_schema": SCHEMA_VALUES},
        optional={"description": st.text(max_size=5)},
    ),
    max_size=3,
)


def dumps(value: Any, style: str) -> str:
    if style == "compact":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == "ascii":
        return json.dumps(value)
    return json.dumps(value, indent=2)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, int, int, list[Any]]:
    """A body with the catalogue at a random member position: (body, start, end, tools)."""
    members = draw(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4))
    tools = draw(TOOLS)
    if draw(st.booleans()):  # the same catalogue nested in the conversation, to tempt the memo
        members["messages"] = [{"type": "tool_use", "input": {"tools": tools}}]
    position = draw(st.integers(0, len(members)))
    style = draw(st.sampled_from(["compact", "ascii", "pretty"]))
    space = draw(st.sampled_from(["", " ", "\n  "]))
    parts = [f"{json.dumps(k)}:{space}{dumps(v, style)}" for k, v in members.items()]
    head = "{" + space + f",{space}".join(parts[:position])
    head += f",{space}" if position else ""
    head += f'"tools":{space}'
    catalogue = dumps(tools, style)
    tail = "".join(f",{space}{p}" for p in parts[position:]) + space + "}"
    start = len(head.encode())
    return (head + catalogue + tail).encode(), start, start + len(catalogue.encode()), tools


# A draft-07 schema with definitions no reference reaches: tooldefs' case.
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def with_schemas(*schemas: dict[str, Any]) -> bytes:
    tools = [
        {"name": f"tool{i}", "description": "Does a thing.", "input_schema": s}
        for i, s in enumerate(schemas)
    ]
    return orjson.dumps({"model": "m", "messages": [], "tools": tools})


STALE = {
    "$schema": DRAFT7,
    "type": "object",
    "properties": {"path": {"type": "string", "title": "Path"}},
    "required": ["path"],
    "definitions": {"Legacy": {"$ref": "#/definitions/Older"}, "Older": {"type": "integer"}},
}
