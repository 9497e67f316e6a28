"""The request bodies in captures/ are data, committed as their clients send them; this pins each
one to the profile of the client it stands for: its shape, its tools and their schemas, the
annotations it carries, what toolslim removes (captures/README.md says where they come from)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import validator_for

from toolslim import cli
from toolslim.core.pipeline import Pipeline, RunReport

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
CLAUDE_CODE = "claude-code.anthropic.json"
CLAUDE_CODE_MCP = "claude-code.mcp.anthropic.json"
CLAUDE_CODE_TOOL_SEARCH = "claude-code.tool-search.anthropic.json"
FASTMCP = "mcp-fastmcp.anthropic.json"
CHAT = "openai-chat.json"
CODEX = "openai-responses.codex.json"
CODEX_GPT55 = "openai-responses.codex-gpt-5.5.json"
GEMINI = "gemini-cli.json"
GEMINI_YOLO = "gemini-cli.yolo.json"
NAMES = [
    CLAUDE_CODE,
    CLAUDE_CODE_MCP,
    CLAUDE_CODE_TOOL_SEARCH,
    FASTMCP,
    CHAT,
    CODEX,
    CODEX_GPT55,
    GEMINI,
    GEMINI_YOLO,
]
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# Claude Code sends these with tool search on; every other tool is deferred.
LOADED = ["Agent", "Bash", "Edit", "Read", "ReportFindings", "Skill", "ToolSearch", "Workflow"]
LOADED += ["Write"]
MCP_RESOURCE_TOOLS = {"ListMcpResourcesTool", "ReadMcpResourceDirTool", "ReadMcpResourceTool"}


def data(name: str) -> bytes:
    return (CAPTURES / name).read_bytes()


def load(name: str) -> Any:
    return json.loads(data(name))


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def walk(value: Any) -> Iterator[Any]:
    """Every dict and list nested in a JSON value, the value itself included."""
    yield value
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict | list):
        for child in children:
            yield from walk(child)


def catalogue(body: Any) -> list[Any]:
    """The top-level `tools`, or Codex's additional_tools input item when there is none."""
    if "tools" in body:
        return list(body["tools"])
    return next(item["tools"] for item in body["input"] if item["type"] == "additional_tools")


def leaves(tools: list[Any]) -> list[Any]:
    """Callable tools: namespace members and Gemini declarations one by one."""
    out = []
    for tool in tools:
        if tool.get("type") == "namespace":
            out += tool["tools"]
        elif "functionDeclarations" in tool:
            out += tool["functionDeclarations"]
        else:
            out.append(tool)
    return out


def json_schemas(body: Any) -> Iterator[tuple[str, Any]]:
    """(tool name, schema) for every tool schema; freeform and hosted tools have none."""
    for tool in leaves(catalogue(body)):
        name = tool.get("name", tool.get("type"))
        if "function" in tool:
            yield tool["function"]["name"], tool["function"]["parameters"]
        for key in ("input_schema", "parameters", "parametersJsonSchema"):
            if key in tool:
                yield name, tool[key]


@functools.cache
def strip(name: str) -> RunReport:
    return Pipeline(["toolschema"]).run(data(name))


@functools.cache
def measured(name: str) -> dict[str, Any]:
    """What `toolslim report --json` says about one capture."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(
            ["report", "--json", "--pipeline", "toolschema", str(CAPTURES / name)], env={}
        )
    assert code == 0
    [result] = json.loads(out.getvalue())
    return dict(result)


def removed_tokens(name: str) -> float:
    """Catalogue tokens before minus after, deferred tools' included."""
    result = measured(name)
    return float(result["catalogue_tokens_before"] - result["catalogue_tokens_after"])


def catalogue_percent(name: str) -> float:
    return 100 * removed_tokens(name) / measured(name)["catalogue_tokens_before"]


def request_percent(name: str) -> float:
    return 100 * removed_tokens(name) / measured(name)["input_tokens_per_request"]


# --- each file's profile, as data ----------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """What a capture's client sends: callable tools, tool schemas (freeform and hosted tools
    have none), the `$schema` each schema declares (None: none), and the annotation keywords
    toolschema removes, with how many of each."""

    tools: int
    schemas: int
    dialects: dict[str | None, int]
    annotations: dict[str, int] = field(default_factory=dict)


PROFILES = {
    CLAUDE_CODE: Profile(24, 24, {DRAFT_2020_12: 24}, {"$schema": 24}),
    CLAUDE_CODE_MCP: Profile(
        230, 230, {DRAFT_2020_12: 27, DRAFT_07: 39, None: 164}, {"$schema": 66, "title": 64}
    ),
    CLAUDE_CODE_TOOL_SEARCH: Profile(
        12, 12, {DRAFT_2020_12: 9, None: 3}, {"$schema": 9, "title": 12}
    ),
    FASTMCP: Profile(16, 16, {None: 16}, {"title": 89, "examples": 13, "deprecated": 1}),
    CHAT: Profile(6, 6, {None: 6}, {"title": 29, "examples": 2, "deprecated": 1}),
    CODEX: Profile(12, 11, {None: 11}),
    CODEX_GPT55: Profile(10, 8, {None: 8}),
    GEMINI: Profile(8, 8, {None: 8}),
    GEMINI_YOLO: Profile(15, 15, {None: 14, DRAFT_07: 1}, {"$schema": 1}),
}


def test_the_folder_holds_exactly_the_profiled_captures() -> None:
    assert sorted(path.name for path in CAPTURES.glob("*.json")) == sorted(NAMES)
    assert sorted(PROFILES) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_capture_has_its_clients_number_of_tools_and_schemas(name: str) -> None:
    body = load(name)
    assert len(leaves(catalogue(body))) == PROFILES[name].tools
    assert len(list(json_schemas(body))) == PROFILES[name].schemas


@pytest.mark.parametrize("name", NAMES)
def test_each_capture_s_schemas_declare_the_dialects_its_client_sends(name: str) -> None:
    dialects = Counter(schema.get("$schema") for _tool, schema in json_schemas(load(name)))
    assert dialects == PROFILES[name].dialects


@pytest.mark.parametrize("name", NAMES)
def test_each_capture_carries_exactly_its_clients_annotations(name: str) -> None:
    (run,) = strip(name).runs
    assert dict(run.removed) == PROFILES[name].annotations
    assert run.outcome == ("applied" if PROFILES[name].annotations else "skipped")


# --- every capture -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_capture_is_a_json_object_with_a_catalogue_and_no_trailing_newline(
    name: str,
) -> None:
    body = json.loads(data(name))
    assert isinstance(body, dict)
    assert leaves(catalogue(body))
    assert not data(name).endswith(b"\n")


@pytest.mark.parametrize("name", NAMES)
def test_every_json_schema_in_a_capture_passes_its_metaschema(name: str) -> None:
    schemas = list(json_schemas(load(name)))
    assert schemas
    for _tool, schema in schemas:
        validator_for(schema).check_schema(schema)


@pytest.mark.parametrize("name", [n for n in NAMES if n != CHAT])
def test_every_capture_but_the_python_one_is_compact_raw_utf8(name: str) -> None:
    assert data(name) == compact(json.loads(data(name)))


# --- Claude Code 2.1.197 -------------------------------------------------------------------


def test_claude_code_sends_its_body_keys_in_its_order_with_a_json_user_id() -> None:
    for name in (CLAUDE_CODE, CLAUDE_CODE_MCP, CLAUDE_CODE_TOOL_SEARCH):
        body = load(name)
        assert list(body) == [
            "model",
            "messages",
            "system",
            "tools",
            "metadata",
            "max_tokens",
            "thinking",
            "context_management",
            "output_config",
            "stream",
        ]
        assert set(json.loads(body["metadata"]["user_id"])) == {
            "device_id",
            "account_uuid",
            "session_id",
        }
        assert ["cache_control" in block for block in body["system"]] == [False, True, True]
        assert any(message["role"] == "system" for message in body["messages"])
        users = [message for message in body["messages"] if message["role"] == "user"]
        marked = [block for m in users for block in m["content"] if "cache_control" in block]
        assert marked == [users[-1]["content"][-1]]
        assert "→".encode() in data(name)


def test_claude_code_sends_24_built_in_tools_sorted_in_about_63_kb() -> None:
    body = load(CLAUDE_CODE)
    names = [tool["name"] for tool in body["tools"]]
    assert len(names) == 24 and names == sorted(names)
    assert {"Agent", "Bash", "Edit", "Read", "Write", "Workflow", "TaskUpdate"} <= set(names)
    assert not any(name.startswith("mcp__") for name in names)
    assert 60_000 <= len(compact(body["tools"])) <= 66_000
    blocks = [
        block["type"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    ]
    assert "tool_use" in blocks and "tool_result" in blocks


def test_claude_code_built_in_schemas_open_with_a_2020_12_schema_and_close_the_object() -> None:
    for tool in load(CLAUDE_CODE)["tools"]:
        schema = tool["input_schema"]
        assert list(schema)[:3] == ["$schema", "type", "properties"], tool["name"]
        assert schema["$schema"] == DRAFT_2020_12, tool["name"]
        assert list(schema)[-1] == "additionalProperties" and not schema["additionalProperties"]


def test_claude_code_built_in_catalogue_carries_no_annotation_but_its_schema_uri() -> None:
    report = strip(CLAUDE_CODE)
    (run,) = report.runs
    assert run.removed == {"$schema": 24}
    # `,"$schema":"https://json-schema.org/draft/2020-12/schema"` is 57 bytes, once per tool.
    assert len(data(CLAUDE_CODE)) - len(report.body) == 24 * 57 == 1368


def test_claude_code_saves_408_tokens_that_is_2_2_to_3_8_percent_of_its_catalogue() -> None:
    assert measured(CLAUDE_CODE)["tokens_saved_per_request"] == removed_tokens(CLAUDE_CODE) == 408
    assert 2.2 <= catalogue_percent(CLAUDE_CODE) <= 3.8
    assert 2.0 <= request_percent(CLAUDE_CODE) <= 2.6


def test_the_mcp_heavy_capture_has_27_built_in_then_203_mcp_tools_of_ten_servers() -> None:
    tools = load(CLAUDE_CODE_MCP)["tools"]
    names = [tool["name"] for tool in tools]
    built_in, mcp = names[:27], names[27:]
    assert built_in == sorted(built_in) and set(built_in) >= MCP_RESOURCE_TOOLS
    assert len(mcp) == 203 and mcp == sorted(mcp)
    assert all(name.startswith("mcp__") for name in mcp)
    assert len({name.split("__")[1] for name in mcp}) == 10
    assert 240_000 <= len(compact(tools)) <= 260_000


def test_mcp_tools_keep_the_draft_07_schema_uris_and_titles_their_servers_send() -> None:
    tools = load(CLAUDE_CODE_MCP)["tools"]
    dialects = Counter(
        (tool["name"].startswith("mcp__"), tool["input_schema"].get("$schema")) for tool in tools
    )
    assert dialects == {
        (False, DRAFT_2020_12): 27,
        (True, DRAFT_07): 39,
        (True, None): 164,
    }
    for tool in tools[27:]:
        assert list(tool["input_schema"])[:2] == ["type", "properties"], tool["name"]
    report = strip(CLAUDE_CODE_MCP)
    (run,) = report.runs
    assert set(run.removed) == {"$schema", "title"}
    assert run.removed["$schema"] == 27 + 39
    share = (len(data(CLAUDE_CODE_MCP)) - len(report.body)) / len(compact(tools))
    assert 0.019 <= share <= 0.022


def test_the_mcp_heavy_capture_saves_2_to_3_percent_of_its_catalogue() -> None:
    assert 2.0 <= catalogue_percent(CLAUDE_CODE_MCP) <= 3.0


def test_with_tool_search_nine_tools_stay_and_the_found_ones_come_back_deferred() -> None:
    body = load(CLAUDE_CODE_TOOL_SEARCH)
    names = [tool["name"] for tool in body["tools"]]
    assert names[:9] == LOADED
    found = body["tools"][9:]
    assert found and all(tool["defer_loading"] is True for tool in found)
    keys = ["name", "description", "input_schema", "defer_loading"]
    assert all(list(tool) == keys for tool in found)
    assert not any("defer_loading" in tool for tool in body["tools"][:9])
    search = body["tools"][names.index("ToolSearch")]["input_schema"]
    assert search["required"] == ["query", "max_results"]
    references = [
        reference["tool_name"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
        for reference in block["content"]
    ]
    assert sorted(references) == [tool["name"] for tool in found]


def test_with_tool_search_a_system_message_names_each_of_the_222_deferred_tools() -> None:
    body = load(CLAUDE_CODE_TOOL_SEARCH)
    every = [tool["name"] for tool in load(CLAUDE_CODE_MCP)["tools"]] + ["ToolSearch"]
    [notice] = [m["content"] for m in body["messages"] if m["role"] == "system"]
    listed = [line for line in notice.splitlines() if line in every]
    assert len(listed) == 222
    assert set(listed) == set(every) - set(LOADED)


def test_with_tool_search_the_schema_uris_and_the_found_tools_titles_go() -> None:
    (run,) = strip(CLAUDE_CODE_TOOL_SEARCH).runs
    assert run.removed["$schema"] == 9
    assert run.removed["title"] > 0
    assert 2.0 <= catalogue_percent(CLAUDE_CODE_TOOL_SEARCH) <= 3.0


# --- a FastMCP server's tools, forwarded by an agent host ------------------------------------


def test_mcp_capture_has_titles_nullable_any_of_defs_and_refs() -> None:
    body = load(FASTMCP)
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
    for tool in load(FASTMCP)["tools"]:
        schema = tool["input_schema"]
        for node in walk(schema):
            if isinstance(node, dict) and "$ref" in node:
                refs += 1
                name = node["$ref"].removeprefix("#/$defs/")
                assert name in schema["$defs"], (tool["name"], node["$ref"])
    assert refs > 0


def test_a_pydantic_made_mcp_catalogue_loses_far_more_than_a_client_s_own() -> None:
    assert catalogue_percent(FASTMCP) >= 15 > 5 * catalogue_percent(CLAUDE_CODE)


# --- OpenAI Chat Completions from the Python SDK's pydantic_function_tool ------------------


def test_openai_chat_capture_is_serialized_with_python_json_dumps_defaults() -> None:
    body = json.loads(data(CHAT))
    assert data(CHAT) == json.dumps(body).encode("ascii")
    assert b'", "' in data(CHAT) and b"\\u00fc" in data(CHAT)


def test_openai_chat_tools_are_strict_with_every_object_closed_and_fully_required() -> None:
    for tool in load(CHAT)["tools"]:
        function = tool["function"]
        assert list(function) == ["name", "strict", "parameters", "description"]
        assert function["strict"] is True
        objects = [
            node
            for node in walk(function["parameters"])
            if isinstance(node, dict) and node.get("type") == "object"
        ]
        for node in objects:
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])


def test_openai_chat_tools_title_every_model_and_every_property_not_naming_a_model() -> None:
    for tool in load(CHAT)["tools"]:
        parameters = tool["function"]["parameters"]
        models = [parameters, *parameters.get("$defs", {}).values()]
        for model in models:
            assert "title" in model
            for prop in model.get("properties", {}).values():
                assert "title" in prop or "$ref" in json.dumps(prop)


# --- Codex CLI 0.171.0 ----------------------------------------------------------------------


def test_codex_with_its_default_model_sends_the_catalogue_in_an_input_item() -> None:
    body = load(CODEX)
    assert list(body) == [
        "model",
        "stream",
        "input",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "store",
        "include",
        "prompt_cache_key",
        "text",
        "client_metadata",
    ]
    first = body["input"][0]
    assert list(first) == ["type", "id", "role", "tools"] and first["role"] == "developer"
    assert [ns["name"] for ns in first["tools"]] == ["functions", "clock", "collaboration"]
    assert len(leaves(first["tools"])) == 12
    assert {tool["type"] for tool in leaves(first["tools"])} == {"custom", "function"}


def test_codex_with_gpt_5_5_sends_ten_top_level_tools() -> None:
    body = load(CODEX_GPT55)
    assert list(body)[:4] == ["model", "stream", "input", "tools"]
    kinds = Counter(tool["type"] for tool in body["tools"])
    assert kinds == {"function": 7, "custom": 1, "tool_search": 1, "web_search": 1}
    assert not any(item["type"] == "additional_tools" for item in body["input"])


@pytest.mark.parametrize("name", [CODEX, CODEX_GPT55])
def test_codex_schemas_carry_no_annotation_so_nothing_is_stripped(name: str) -> None:
    body = data(name)
    report = Pipeline(["toolschema"]).run(body)
    (run,) = report.runs
    assert (run.outcome, run.reason) == ("skipped", "nothing_to_strip")
    assert not report.changed(body)
    for _tool, schema in json_schemas(load(name)):
        properties = schema["properties"]
        assert list(properties) == sorted(properties)
        assert schema["additionalProperties"] is False
    assert removed_tokens(name) == 0


# --- Gemini CLI 0.61.0 ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "count"), [(GEMINI, 8), (GEMINI_YOLO, 15)])
def test_gemini_cli_declares_every_tool_with_parameters_json_schema(name: str, count: int) -> None:
    body = load(name)
    assert list(body) == ["contents", "systemInstruction", "tools", "generationConfig"]
    [group] = body["tools"]
    declarations = group["functionDeclarations"]
    assert len(declarations) == count
    assert all(list(d) == ["name", "description", "parametersJsonSchema"] for d in declarations)


def test_gemini_cli_s_default_catalogue_has_no_annotation() -> None:
    report = strip(GEMINI)
    (run,) = report.runs
    assert (run.outcome, run.reason) == ("skipped", "nothing_to_strip")
    assert removed_tokens(GEMINI) == 0


def test_gemini_cli_in_yolo_mode_has_one_annotation_a_draft_07_schema_uri() -> None:
    declarations = load(GEMINI_YOLO)["tools"][0]["functionDeclarations"]
    uris = {d["name"]: d["parametersJsonSchema"].get("$schema") for d in declarations}
    assert {name: uri for name, uri in uris.items() if uri} == {"activate_skill": DRAFT_07}
    (run,) = strip(GEMINI_YOLO).runs
    assert run.removed == {"$schema": 1}
    assert 0 < catalogue_percent(GEMINI_YOLO) <= 1.6


# --- captures/README.md ---------------------------------------------------------------------


def test_readme_table_gives_each_captures_tool_count_and_catalogue_size() -> None:
    readme = (CAPTURES / "README.md").read_text(encoding="utf-8")
    for name in NAMES:
        row = re.search(rf"^\| `{re.escape(name)}` \|.*\| (\d+) \| ([\d,]+) B \|$", readme, re.M)
        assert row, name
        tools = catalogue(load(name))
        serialized = json.dumps(tools).encode() if name == CHAT else compact(tools)
        assert int(row.group(1)) == len(leaves(tools)), name
        assert int(row.group(2).replace(",", "")) == len(serialized), name


def test_readme_says_what_toolslim_removes_from_each_capture() -> None:
    readme = (CAPTURES / "README.md").read_text(encoding="utf-8")
    for name in NAMES:
        cells = r"([\d,]+) \| ([\d,]+) \| ([\d.]+) % \| ([\d.]+) % \|$"
        row = re.search(rf"^\| `{re.escape(name)}` \| [^|]+ \| {cells}", readme, re.M)
        assert row, name
        removed, tokens, of_catalogue, of_request = row.groups()
        assert int(removed.replace(",", "")) == len(data(name)) - len(strip(name).body), name
        assert int(tokens.replace(",", "")) == removed_tokens(name), name
        assert float(of_catalogue) == round(catalogue_percent(name), 1), name
        assert float(of_request) == round(request_percent(name), 1), name
