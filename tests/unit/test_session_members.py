"""Which body members name a request's session depends on its API: an Anthropic body is named
by its metadata.user_id, even when a tool call in its transcript has a prompt_cache_key."""

from __future__ import annotations

import orjson
import pytest

from toolslim.observe import drift

TRANSCRIPT_CALL = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Cache", "input": {"prompt_cache_key": "k"}}
    ],
}


def anthropic_body(messages: list[object]) -> bytes:
    return orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "messages": messages,
            "tools": [{"name": "Cache", "input_schema": {"type": "object"}}],
            "metadata": {"user_id": "session-1"},
            "max_tokens": 100,
        }
    )


def test_an_anthropic_body_is_named_by_its_user_id_whatever_its_transcript_holds() -> None:
    plain = anthropic_body([{"role": "user", "content": "hi"}])
    with_call = anthropic_body([{"role": "user", "content": "hi"}, TRANSCRIPT_CALL])
    named = drift.session_key("/v1/messages", {}, plain, "anthropic")
    assert named == b'"user_id"\0"session-1"'
    assert drift.session_key("/v1/messages", {}, with_call, "anthropic") == named


@pytest.mark.parametrize("api", [None, "openai-responses", "openai-chat", "other"])
def test_other_apis_still_look_for_prompt_cache_key_first(api: str | None) -> None:
    body = anthropic_body([{"role": "user", "content": "hi"}, TRANSCRIPT_CALL])
    assert drift.session_key("/v1/responses", {}, body, api) == b'"prompt_cache_key"\0"k"'


@pytest.mark.parametrize("api", ["anthropic", "openai-responses", None])
def test_a_session_header_names_the_session_for_every_api(api: str | None) -> None:
    body = anthropic_body([TRANSCRIPT_CALL])
    headers = {"x-claude-code-session-id": "abc"}
    assert drift.session_key("/v1/messages", headers, body, api) == drift.session_key(
        "/v1/messages", headers, body
    )


def test_an_anthropic_body_is_named_by_its_last_user_id_not_a_tool_calls() -> None:
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "Who", "input": {"user_id": "u-9"}}],
    }
    body = anthropic_body([{"role": "user", "content": "hi"}, call])
    assert drift.session_key("/v1/messages", {}, body, "anthropic") == b'"user_id"\0"session-1"'
    # without the API, the first in the tail, as before
    assert drift.session_key("/v1/messages", {}, body) == b'"user_id"\0"u-9"'


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b'"user_id":"a"}', b'"a"'),
        (b'"user_id": "a", "user_id": "b"}', b'"b"'),
        (b'"user_id": "a", "user_id": {"x": 1}}', b'"a"'),  # the last has no string
        (b'"user_id":1,"x":"user_id"}', None),
        (b'"user_id"', None),
        (b"", None),
    ],
)
def test_the_last_member_string_is_that_of_the_last_place_with_a_string(
    tail: bytes, expected: bytes | None
) -> None:
    assert drift.last_member_string(b'{"a": 1, ' + tail, b'"user_id"', 0) == expected
