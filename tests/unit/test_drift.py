"""drift: which session a request belongs to, what kind of change its catalogue makes there,
and what the provider charged for it."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from multidict import CIMultiDict

from proxy_harness import dumps, settings_for
from sessions import BASH, EDIT, GIT_LOG, READ, anthropic_body, tool
from toolslim.core.facts import CatalogueFacts, Tools, read_tools
from toolslim.core.pipeline import Pipeline
from toolslim.observe.drift import (
    KINDS,
    MAX_NAMED,
    Change,
    Tracker,
    cache_write_after,
    classify,
    session_of,
)
from toolslim.observe.exchange import Exchange, Ledger
from toolslim.observe.stats import Stats
from toolslim.wire.routing import route_request
from toolslim.wire.usage import Usage

SALT = b"0123456789abcdef"


def tools_of(*catalogue: dict[str, Any]) -> Tools:
    return read_tools(orjson.dumps(list(catalogue)))


def facts(*catalogue: dict[str, Any]) -> CatalogueFacts:
    return CatalogueFacts(orjson.dumps(list(catalogue)))


# --- sessions ------------------------------------------------------------------------------


def headers(**values: str) -> CIMultiDict[str]:
    return CIMultiDict({k.replace("_", "-"): v for k, v in values.items()})


SESSIONS = {
    "Claude Code's session header": (headers(x_claude_code_session_id="cc-1"), b"{}"),
    "Codex's session-id header": (headers(session_id="thread-7"), b"{}"),
    "OpenAI's prompt_cache_key": (headers(), b'{"input": [], "prompt_cache_key": "pck-1"}'),
    "Anthropic's metadata.user_id": (
        headers(),
        b'{"messages": [], "metadata": {"user_id": "{\\"session_id\\": \\"s\\"}"}}',
    ),
}


@pytest.mark.parametrize(("given", "body"), SESSIONS.values(), ids=SESSIONS.keys())
def test_a_session_is_named_by_what_its_client_sends_and_kept_as_a_short_hash(
    given: CIMultiDict[str], body: bytes
) -> None:
    session = session_of("/v1/messages", given, body, SALT)
    assert len(session) == 8
    assert session == session_of("/v1/messages", given, body + b" ", SALT)  # not the body's bytes
    for value in (b"cc-1", b"thread-7", b"pck-1"):
        assert value not in session
    assert session != session_of("/v1/messages", headers(), b"{}", SALT)


def test_the_session_header_wins_over_the_body_and_differs_per_value() -> None:
    body = b'{"prompt_cache_key": "same"}'
    one = session_of("/v1/responses", headers(session_id="a"), body, SALT)
    two = session_of("/v1/responses", headers(session_id="b"), body, SALT)
    assert one != two


def test_a_client_that_names_no_session_is_known_by_credential_model_and_system_instruction() -> (
    None
):
    def gemini(key: str, model: str, system: str, turn: str) -> bytes:
        body = {
            "contents": [{"role": "user", "parts": [{"text": turn}]}],
            "systemInstruction": {"parts": [{"text": system}]},
        }
        target = f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
        return session_of(target, headers(x_goog_api_key=key), dumps(body), SALT)

    first = gemini("key-1", "gemini-2.5-pro", "You are Gemini CLI.", "hi")
    assert first == gemini("key-1", "gemini-2.5-pro", "You are Gemini CLI.", "a later turn")
    assert first != gemini("key-2", "gemini-2.5-pro", "You are Gemini CLI.", "hi")
    assert first != gemini("key-1", "gemini-2.5-flash", "You are Gemini CLI.", "hi")
    assert first != gemini("key-1", "gemini-2.5-pro", "You are someone else.", "hi")


def test_session_hashes_depend_on_the_trackers_salt() -> None:
    given = headers(x_claude_code_session_id="cc-1")
    assert session_of("/", given, b"", SALT) != session_of("/", given, b"", b"another salt....")


# --- kinds ---------------------------------------------------------------------------------

KIND_CASES = {
    "order_only": ([READ, BASH, EDIT], [BASH, READ, EDIT], ["Bash"]),
    "added": ([READ, BASH], [READ, GIT_LOG, BASH], ["mcp__git__git_log"]),
    "removed": ([READ, GIT_LOG, BASH], [READ, BASH], ["mcp__git__git_log"]),
    "changed": ([READ, BASH], [BASH, tool("Read", " on 2026-11-30")], ["Read"]),
    "mixed": ([READ, BASH], [READ, tool("Shell")], ["Bash", "Shell"]),
}


@pytest.mark.parametrize("kind", KIND_CASES, ids=KIND_CASES.keys())
def test_each_change_is_exactly_one_kind_and_names_its_tools(kind: str) -> None:
    before, after, named = KIND_CASES[kind]
    found = classify([tools_of(*before)], [tools_of(*after)])
    assert found is not None
    assert (found.kind, list(found.tools)) == (kind, named)


def test_the_same_tools_in_the_same_order_are_no_change() -> None:
    assert classify([tools_of(READ, BASH)], [tools_of(READ, BASH)]) is None


def test_a_tool_added_while_others_moved_is_mixed() -> None:
    found = classify([tools_of(READ, BASH)], [tools_of(BASH, READ, EDIT)])
    assert found is not None and found.kind == "mixed"


def test_an_order_only_change_names_the_fewest_tools_that_moved() -> None:
    names = [f"t{i:02}" for i in range(10)]
    before = tools_of(*(tool(n) for n in names))
    after = tools_of(*(tool(n) for n in [names[-1], *names[:-1]]))  # the last came first
    found = classify([before], [after])
    assert found is not None and found.tools == ("t09",)


def test_an_event_names_at_most_twenty_tools_and_the_mcp_servers_of_the_tools_it_names() -> None:
    many = [tool(f"mcp__server{i % 3}__tool{i}") for i in range(30)]
    found = classify([tools_of(READ)], [tools_of(READ, *many)])
    assert found is not None and found.kind == "added"
    assert len(found.tools) == MAX_NAMED
    assert found.servers == ("server0", "server1", "server2")


def test_a_namespace_names_the_server_of_its_members_and_its_text_changes_every_member() -> None:
    def namespace(description: str) -> dict[str, Any]:
        member = {"type": "function", "name": "get_issue", "parameters": {"type": "object"}}
        return {"type": "namespace", "name": "mcp_github", "description": description,
                "tools": [member]}  # fmt: skip

    found = classify([tools_of(namespace("GitHub"))], [tools_of(namespace("GitHub today"))])
    assert found is not None
    assert (found.kind, found.tools, found.servers) == (
        "changed",
        ("mcp_github/get_issue",),
        ("mcp_github",),
    )


# --- the tracker ---------------------------------------------------------------------------


def observe(tracker: Tracker, session: bytes, *catalogue: dict[str, Any]) -> Change | None:
    return tracker.observe(session, "anthropic", [facts(*catalogue)], None, 1.0)


def test_a_session_sending_its_catalogue_again_is_no_change_and_a_new_one_is() -> None:
    tracker = Tracker()
    assert observe(tracker, b"s1", READ, BASH) is None  # a session's first catalogue
    assert observe(tracker, b"s1", READ, BASH) is None
    change = observe(tracker, b"s1", BASH, READ)
    assert change is not None and change.kind == "order_only" and change.session == b"s1".hex()


def test_going_back_to_a_recent_catalogue_of_the_session_is_no_change() -> None:
    tracker = Tracker()
    observe(tracker, b"s", READ, BASH, EDIT)  # the main agent
    first = observe(tracker, b"s", READ)  # a subagent's first request writes a new prefix
    assert first is not None and first.kind == "removed"
    for _ in range(3):  # then the two take turns, each prefix cached: no change
        assert observe(tracker, b"s", READ, BASH, EDIT) is None
        assert observe(tracker, b"s", READ) is None


def test_sessions_are_bounded_the_least_recently_seen_going_first() -> None:
    tracker = Tracker(max_sessions=3)
    for index in range(10):
        observe(tracker, f"s{index}".encode(), READ)
    assert len(tracker) == 3
    assert observe(tracker, b"s0", BASH) is None  # forgotten: a first catalogue again
    change = observe(tracker, b"s9", BASH)
    assert change is not None and change.kind == "mixed"


def test_kept_facts_are_bounded_and_a_change_against_forgotten_ones_is_mixed_naming_none() -> None:
    tracker = Tracker(kept_bytes=1)  # keeps only the catalogue seen last
    observe(tracker, b"a", READ)
    observe(tracker, b"b", BASH)
    change = observe(tracker, b"a", READ, EDIT)
    assert change is not None
    assert (change.kind, change.tools) == ("mixed", ())


def test_two_catalogues_in_one_request_are_one_catalogue_for_drift() -> None:
    tracker = Tracker()
    both = [facts(READ), facts(BASH)]
    assert tracker.observe(b"s", "openai-responses", both, None, 1.0) is None
    assert tracker.observe(b"s", "openai-responses", [facts(READ), facts(BASH)], None, 2.0) is None
    change = tracker.observe(b"s", "openai-responses", [facts(READ), facts(EDIT)], None, 3.0)
    assert change is not None and change.kind == "mixed" and change.time == 3.0


@pytest.mark.parametrize(
    ("usage", "cached_before", "expected"),
    [
        (Usage(10, 5, 0, 4_000), 9_000, 4_000),  # Anthropic: what it wrote
        (Usage(3_300, 5, 200, 0), 3_000, 3_300),  # OpenAI/Gemini: cached fell, uncached input
        (Usage(3_300, 5, 3_000, 0), 3_000, 0),  # cached held: the change cost nothing seen
        (None, 3_000, 0),  # no usage read
    ],
)
def test_the_cost_of_a_change_comes_from_the_usage_of_the_request_that_carried_it(
    usage: Usage | None, cached_before: int, expected: int
) -> None:
    assert cache_write_after(usage, cached_before) == expected


# --- the ledger ----------------------------------------------------------------------------


async def test_the_ledger_keeps_at_most_drift_max_sessions_sessions() -> None:
    stats = Stats(["toolschema"])
    ledger = Ledger(stats, asyncio.get_running_loop(), set(), drift_sessions=3)
    route = route_request("/v1/messages", {}, settings_for("http://127.0.0.1:9"))
    pipeline = Pipeline(["toolschema"])
    for index in range(10):
        body = anthropic_body([READ, BASH], index)
        exchange = Exchange(
            route, "POST", "/v1/messages", 0.0, status=200, body=body,
            headers=CIMultiDict({"X-Claude-Code-Session-Id": f"session-{index}"}),
        )  # fmt: skip
        exchange.report = pipeline.run(body, "anthropic")
        ledger.count(exchange)
    assert stats.snapshot()["drift"]["sessions"] == 3
    assert stats.snapshot()["drift"]["changes"] == dict.fromkeys(KINDS, 0)
