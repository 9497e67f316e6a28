"""facts: what a catalogue is made of, read once per distinct catalogue, for every catalogue a
request carries, compacted or not."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from toolslim.core.facts import CatalogueFacts, digest, layout, read_tools, server_of
from toolslim.core.pipeline import Pipeline


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "input_schema": {"type": "object"}, **extra}


def test_tools_are_read_in_document_order_with_the_digest_of_their_exact_bytes() -> None:
    raw = b'[{"name":"Read","input_schema":{}} , {"name": "Bash", "input_schema": {}}]'
    read, bash = b'{"name":"Read","input_schema":{}}', b'{"name": "Bash", "input_schema": {}}'
    tools = read_tools(raw)
    assert tools.names == ("Read", "Bash")
    assert tools.digests == (digest(read), digest(bash))
    assert tools.sizes == (len(read), len(bash))


def test_space_between_tools_leaves_their_digests_and_space_inside_one_changes_its_own() -> None:
    base = read_tools(b'[{"name":"a"},{"name":"b"}]')
    assert read_tools(b'[ {"name":"a"} ,\n{"name":"b"} ]').digests == base.digests
    changed = read_tools(b'[{"name":"a"},{"name": "b"}]')
    assert changed.digests[0] == base.digests[0] and changed.digests[1] != base.digests[1]


SHAPES = {
    "anthropic": ([tool("Read"), tool("mcp__git__git_log")], ("Read", "mcp__git__git_log")),
    "openai chat": (
        [{"type": "function", "function": {"name": "read", "parameters": {}}}],
        ("read",),
    ),
    "responses with a namespace and a built-in": (
        [
            {"type": "function", "name": "shell", "parameters": {}},
            {"type": "namespace", "name": "mcp_github", "tools": [{"name": "get_pr"}]},
            {"type": "web_search"},
        ],
        ("shell", "mcp_github/get_pr", "web_search"),
    ),
    "gemini": (
        [{"functionDeclarations": [{"name": "glob"}, {"name": "git__log"}]}, {"googleSearch": {}}],
        ("glob", "git__log", "googleSearch"),
    ),
}


@pytest.mark.parametrize(("catalogue", "names"), SHAPES.values(), ids=SHAPES.keys())
def test_the_leaf_tools_of_each_api_shape_are_named(
    catalogue: list[Any], names: tuple[str, ...]
) -> None:
    assert read_tools(orjson.dumps(catalogue)).names == names


def test_mcp_servers_come_from_the_name_or_the_namespace() -> None:
    assert server_of("mcp__git__git_log") == "git"
    assert server_of("mcp__aws-docs__search_documentation") == "aws-docs"
    assert server_of("git__log") == "git"  # Gemini CLI's prefix for a name another server took
    assert server_of("Read") is None and server_of("mcp__broken") is None
    namespaced = [{"type": "namespace", "name": "mcp_github", "tools": [{"name": "get_pr"}]}]
    assert read_tools(orjson.dumps(namespaced)).servers == ("mcp_github",)


def test_the_counts_the_advisories_read() -> None:
    mcp = tool("mcp__fetch__fetch", description="Fetch a URL.")
    catalogue = [tool("ToolSearch"), mcp, tool("mcp__x__y", defer_loading=True)]
    tools = read_tools(orjson.dumps(catalogue))
    assert (tools.mcp_tools, tools.deferred, tools.tool_search) == (2, 1, True)
    assert tools.mcp_bytes == len(orjson.dumps(mcp)) + len(orjson.dumps(catalogue[2]))
    gemini = [{"functionDeclarations": [{"name": f"t{i}"} for i in range(3)]}]
    assert read_tools(orjson.dumps(gemini)).declarations == 3


@pytest.mark.parametrize(
    "raw",
    [b"not json", b'{"name": "a"}', b"[" * 5000 + b"]" * 5000],
    ids=["not JSON", "not a list", "too deep"],
)
def test_bytes_that_are_no_readable_tool_list_have_no_tools(raw: bytes) -> None:
    assert read_tools(raw).names == ()


def test_an_element_that_is_no_tool_object_is_named_by_its_index() -> None:
    assert read_tools(b'[{"name": "a"}, 1e999999, "text"]').names == ("a", "#1", "#2")


def test_numbers_past_64_bits_and_escapes_are_read_where_they_stand() -> None:
    raw = '[{"name":"big","default":123456789012345678901234567890},{"name":"\\u00e9t\\u00e9"}]'
    tools = read_tools(raw.encode())
    assert tools.names == ("big", "été")


def test_layout_offsets_are_byte_offsets_through_multibyte_text() -> None:
    catalogue = [{"name": "ünïcödé ✓"}, {"name": "b"}]
    raw = json.dumps(catalogue, ensure_ascii=False).encode()
    slots = layout(raw, catalogue).slots
    assert [json.loads(raw[s.start : s.end]) for s in slots] == catalogue


def test_facts_are_identified_by_their_bytes_and_read_once_then_let_go() -> None:
    raw = orjson.dumps([tool("a")])
    facts = CatalogueFacts(raw)
    assert facts.digest == CatalogueFacts(raw).digest != CatalogueFacts(raw + b" ").digest
    first = facts.tools
    assert facts.tools is first
    assert facts.size == len(raw)


def test_every_catalogue_found_reaches_the_report_once_per_catalogue_applied_or_not() -> None:
    pipeline = Pipeline(["toolschema"])
    plain = b'{"tools":[{"type":"function","name":"shell","parameters":{}}],"input":[]}'
    first = pipeline.run(plain, "openai-responses")
    assert first.runs[0].reason == "nothing_to_strip"
    assert [f.tools.names for f in first.catalogues] == [("shell",)]
    again = pipeline.run(plain, "openai-responses")
    assert again.memo_hits == 1 and again.catalogues[0] is first.catalogues[0]
    assert Pipeline([]).run(plain).catalogues == ()  # an empty pipeline reads no body
    assert pipeline.run(b'{"input": []}').catalogues == ()
