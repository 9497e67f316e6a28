"""The tool ledger names a request's client as core.owners does, however often a User-Agent
comes back (the ledger remembers the last ones), and reads the Gemini path's model only from
a path that names one."""

from __future__ import annotations

import pytest

from toolslim.core import owners
from toolslim.observe.ledger import who

AGENTS = [
    "claude-cli/2.1.197 (external, cli)",
    "codex_exec/0.171.0 (Linux)",
    "GeminiCLI/0.61.0 (linux; x64)",
    "curl/8.5.0",
    "",
    None,
]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_ledger_names_each_client_as_owners_does_every_time(agent: str | None) -> None:
    for _ in range(3):
        assert who.client_of(agent) == owners.client_of(agent)


def test_more_user_agents_than_remembered_are_still_named_right() -> None:
    for n in range(200):
        agent = f"claude-cli/{n} (external, cli)" if n % 2 else f"tool-{n}/1.0"
        assert who.client_of(agent) == owners.client_of(agent)


@pytest.mark.parametrize(
    ("target", "model"),
    [
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini-2.5-pro"),
        ("/v1/messages?beta=true", "claude-sonnet-4-5"),
        ("/v1/messages?x=/models/", "claude-sonnet-4-5"),  # only the path names a model
    ],
)
def test_the_model_comes_from_a_gemini_path_else_the_body(target: str, model: str) -> None:
    assert who.model_of(target, b'{"model":"claude-sonnet-4-5","messages":[]}') == model
