"""owners: the MCP server a tool's name names, in each client's spelling, and the client a
request's User-Agent names."""

from __future__ import annotations

import pytest

from toolslim.core.owners import BUILTIN, CLIENTS, client_of, server_of


@pytest.mark.parametrize(
    ("name", "namespace", "server"),
    [
        ("mcp__git__git_log", None, "git"),  # Claude Code and Codex
        ("mcp__aws-docs__search_documentation", None, "aws-docs"),
        ("git_log", "mcp__git", "git"),  # a Codex namespace member carries the bare name
        ("mcp_git_log", None, "git"),  # Gemini CLI: single underscores
        ("mcp_my_server_tool", None, "my"),  # ... read up to the first underscore
        ("Read", None, BUILTIN),
        ("exec", "functions", BUILTIN),  # a namespace that is not an MCP server's
        ("mcp__broken", None, BUILTIN),
        ("mcp____tool", None, BUILTIN),
        ("mcp_", None, BUILTIN),
        ("x", "mcp__", BUILTIN),
    ],
)
def test_a_tool_belongs_to_the_mcp_server_its_name_names_or_is_built_in(
    name: str, namespace: str | None, server: str
) -> None:
    assert server_of(name, namespace) == server


@pytest.mark.parametrize(
    ("user_agent", "client"),
    [
        ("claude-cli/2.1.197 (external, cli)", "claude-cli"),
        ("codex_exec/0.171.0 (Debian 12; x86_64)", "codex"),
        ("codex_cli_rs/0.171.0", "codex"),
        ("GeminiCLI/0.61.0 (linux; x64)", "gemini-cli"),
        ("gemini-cli/0.61.0", "gemini-cli"),
        ("python-requests/2.32.3 claude-cli/2.1.197", "other"),  # only the first product counts
        ("curl/8.5.0", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_a_request_s_client_is_named_by_its_user_agent_s_first_product(
    user_agent: str | None, client: str
) -> None:
    assert client_of(user_agent) == client


def test_every_client_name_is_one_of_the_clients() -> None:
    assert set(CLIENTS) == {"claude-cli", "codex", "gemini-cli", "other"}
