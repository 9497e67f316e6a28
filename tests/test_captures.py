"""Pin the committed request bodies in captures/ to their generator and their documented shapes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import validator_for

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
GENERATOR = CAPTURES / "make_captures.py"
NAMES = [
    "claude-code.anthropic.json",
    "mcp-fastmcp.anthropic.json",
    "openai-chat.json",
    "openai-responses.codex.json",
    "gemini-cli.json",
]
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def load(name: str) -> Any:
    return json.loads((CAPTURES / name).read_bytes())


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def walk(value: Any) -> Iterator[Any]:
    """Every dict and list nested in a JSON value, the value itself included."""
    yield value
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict | list):
        for child in children:
            yield from walk(child)


def json_schemas(name: str, body: Any) -> Iterator[tuple[str, Any]]:
    """(tool name, schema) for every tool schema in a capture that is meant as JSON Schema."""
    for tool in body["tools"]:
        if "input_schema" in tool:
            yield tool["name"], tool["input_schema"]
        elif "function" in tool:
            yield tool["function"]["name"], tool["function"]["parameters"]
        elif tool.get("type") == "namespace":
            for member in tool["tools"]:
                yield member["name"], member["parameters"]
        elif tool.get("type") == "function":
            yield tool["name"], tool["parameters"]
        for declaration in tool.get("functionDeclarations", []):
            if "parametersJsonSchema" in declaration:
                yield declaration["name"], declaration["parametersJsonSchema"]
    for item in body.get("input", []):
        if item.get("type") in ("additional_tools", "tool_search_output"):
            for tool in item["tools"]:
                yield tool["name"], tool["parameters"]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("captures")
    subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.mark.parametrize("name", NAMES)
def test_regenerating_into_a_temp_dir_reproduces_the_committed_file_byte_for_byte(
    regenerated: Path, name: str
) -> None:
    assert (regenerated / name).read_bytes() == (CAPTURES / name).read_bytes()


def test_the_generator_writes_exactly_the_documented_files(regenerated: Path) -> None:
    assert sorted(path.name for path in regenerated.iterdir()) == sorted(NAMES)


def test_the_generator_prints_a_summary_line_per_file(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
    )
    for name in NAMES:
        line = next(line for line in result.stdout.splitlines() if line.startswith(name))
        size, tools, tools_bytes = (int(field) for field in line.split()[1:])
        assert size == (CAPTURES / name).stat().st_size
        assert tools > 0
        assert 0 < tools_bytes < size


@pytest.mark.parametrize("name", NAMES)
def test_every_capture_is_a_json_object_with_a_tools_array_and_no_trailing_newline(
    name: str,
) -> None:
    data = (CAPTURES / name).read_bytes()
    body = json.loads(data)
    assert isinstance(body, dict)
    assert isinstance(body["tools"], list) and body["tools"]
    assert not data.endswith(b"\n")


@pytest.mark.parametrize("name", NAMES)
def test_every_json_schema_in_a_capture_passes_its_metaschema(name: str) -> None:
    schemas = list(json_schemas(name, load(name)))
    assert schemas
    for _tool, schema in schemas:
        validator_for(schema).check_schema(schema)


def test_claude_code_capture_has_the_messages_request_keys_with_tools_after_system() -> None:
    body = load("claude-code.anthropic.json")
    keys = list(body)
    assert {"model", "messages", "system", "tools", "metadata", "max_tokens"} <= set(keys)
    assert body["stream"] is True
    assert keys.index("messages") < keys.index("tools")
    assert keys.index("system") < keys.index("tools")
    assert all("cache_control" in block for block in body["system"])
    blocks = [block["type"] for message in body["messages"] for block in message["content"]]
    assert "tool_use" in blocks and "tool_result" in blocks


def test_claude_code_capture_is_serialized_compactly_with_raw_utf8_like_json_stringify() -> None:
    data = (CAPTURES / "claude-code.anthropic.json").read_bytes()
    assert data == compact(json.loads(data))
    assert "→".encode() in data


def test_claude_code_capture_has_20_to_30_tools_in_a_60_to_80_kb_tools_array() -> None:
    tools = load("claude-code.anthropic.json")["tools"]
    assert 20 <= len(tools) <= 30
    assert 60 * 1024 <= len(compact(tools)) <= 80_000
    names = {tool["name"] for tool in tools}
    assert {"Bash", "Read", "Edit", "MultiEdit", "TodoWrite", "Task", "KillShell"} <= names
    assert any(name.startswith("mcp__") for name in names)


def test_claude_code_capture_has_draft_07_schema_on_every_tool_root() -> None:
    for tool in load("claude-code.anthropic.json")["tools"]:
        schema = tool["input_schema"]
        assert schema["$schema"] == DRAFT_07, tool["name"]
        assert schema["type"] == "object", tool["name"]
        assert schema["additionalProperties"] is False, tool["name"]
        assert "properties" in schema, tool["name"]


def test_mcp_capture_has_titles_nullable_any_of_defs_and_refs() -> None:
    body = load("mcp-fastmcp.anthropic.json")
    schemas = [tool["input_schema"] for tool in body["tools"]]
    assert 15 <= len(schemas) <= 20
    assert all("title" in schema for schema in schemas)
    nodes = [node for schema in schemas for node in walk(schema) if isinstance(node, dict)]
    assert any(
        {"type": "null"} in node.get("anyOf", []) and node.get("default", 0) is None
        for node in nodes
    )
    assert any("$defs" in schema for schema in schemas)
    assert any("examples" in node for node in nodes)


def test_mcp_capture_refs_all_resolve_to_a_defs_entry_of_the_same_schema() -> None:
    refs = 0
    for tool in load("mcp-fastmcp.anthropic.json")["tools"]:
        schema = tool["input_schema"]
        for node in walk(schema):
            if isinstance(node, dict) and "$ref" in node:
                refs += 1
                name = node["$ref"].removeprefix("#/$defs/")
                assert name in schema["$defs"], (tool["name"], node["$ref"])
    assert refs > 0


def test_openai_chat_capture_is_serialized_with_python_json_dumps_defaults() -> None:
    data = (CAPTURES / "openai-chat.json").read_bytes()
    body = json.loads(data)
    assert data == json.dumps(body).encode("ascii")
    assert b'", "' in data and b"\\u00fc" in data


def test_openai_chat_capture_has_a_strict_function_tool_with_closed_objects() -> None:
    tools = load("openai-chat.json")["tools"]
    assert all(tool["type"] == "function" for tool in tools)
    strict = [tool["function"] for tool in tools if tool["function"].get("strict") is True]
    assert len(strict) == 1
    objects = [
        node
        for node in walk(strict[0]["parameters"])
        if isinstance(node, dict) and node.get("type") == "object"
    ]
    assert objects
    for node in objects:
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])


def test_codex_capture_has_an_additional_tools_input_item_and_a_namespace_group() -> None:
    body = load("openai-responses.codex.json")
    assert body["store"] is False and body["stream"] is True
    items = {item.get("type"): item for item in body["input"]}
    additional = items["additional_tools"]["tools"]
    assert len(additional) == 2
    assert all("title" in tool["parameters"] for tool in additional)
    assert {"function_call", "function_call_output", "tool_search_output"} <= set(items)
    assert items["tool_search_output"]["tools"]
    kinds = [tool["type"] for tool in body["tools"]]
    assert "namespace" in kinds and "web_search" in kinds
    namespace = next(tool for tool in body["tools"] if tool["type"] == "namespace")
    assert namespace["name"] == "mcp_github"
    assert all(member["type"] == "function" for member in namespace["tools"])
    functions = [tool for tool in body["tools"] if tool["type"] == "function"]
    assert all(list(tool)[:4] == ["type", "name", "description", "strict"] for tool in functions)


def test_codex_capture_is_serialized_compactly() -> None:
    data = (CAPTURES / "openai-responses.codex.json").read_bytes()
    assert data == compact(json.loads(data))


def test_gemini_capture_mixes_openapi_parameters_and_parameters_json_schema() -> None:
    body = load("gemini-cli.json")
    assert {"contents", "systemInstruction", "generationConfig"} <= set(body)
    declarations = body["tools"][0]["functionDeclarations"]
    openapi = [d["parameters"] for d in declarations if "parameters" in d]
    json_schema = [d["parametersJsonSchema"] for d in declarations if "parametersJsonSchema" in d]
    assert openapi and json_schema
    assert {schema["type"] for schema in openapi} == {"OBJECT", "object"}
    assert any(
        "example" in node for schema in openapi for node in walk(schema) if isinstance(node, dict)
    )
    assert all("$schema" in schema and "title" in schema for schema in json_schema)


def test_readme_table_gives_each_captures_tool_count_and_tools_array_size() -> None:
    readme = (CAPTURES / "README.md").read_text(encoding="utf-8")
    for name in NAMES:
        row = re.search(rf"^\| `{re.escape(name)}` \|.*\| (\d+) \| ([\d,]+) B \|$", readme, re.M)
        assert row, name
        body = load(name)
        tools = body["tools"]
        count = sum(
            len(t["tools"])
            if t.get("type") == "namespace"
            else len(t.get("functionDeclarations", [])) or 1
            for t in tools
        )
        serialized = json.dumps(tools).encode() if name == "openai-chat.json" else compact(tools)
        assert int(row.group(1)) == count, name
        assert int(row.group(2).replace(",", "")) == len(serialized), name
