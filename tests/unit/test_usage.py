"""Tests for toolslim.wire.usage: the usage readers, fed one JSON event at a time (WebSocket
messages, SSE event data) or one JSON body."""

from __future__ import annotations

import typing

import orjson
import pytest

from streams import BODIES, STREAMS
from toolslim.core.catalog import Api
from toolslim.wire.sse import SSEDecoder
from toolslim.wire.usage import API_NAMES, Usage, UsageReader, read_event

# A Codex Responses WebSocket turn: each event is one JSON text message, never inside SSE.
RESPONSES_CREATED = (
    '{"type":"response.created","sequence_number":0,"response":{"id":"resp_1",'
    '"object":"response","status":"in_progress","output":[],"usage":null}}'
)
RESPONSES_DELTA = (
    '{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1",'
    '"output_index":0,"content_index":0,"delta":"R\u00e9sum\u00e9 \\"usage\\": {}"}'
)
RESPONSES_COMPLETED = (
    '{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1",'
    '"object":"response","status":"completed","output":[],'
    '"usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1536},'
    '"output_tokens":120,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":2168}}}'
)
RESPONSES_USAGE = Usage(512, 120, cache_read_input_tokens=1536)


def events_of(stream: bytes) -> list[str]:
    decoder = SSEDecoder()
    return [event.data for event in decoder.feed(stream)]


def test_the_api_names_are_those_of_the_catalogue_api_type() -> None:
    assert sorted(API_NAMES) == sorted(typing.get_args(Api))


# --- read_event: one message --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["response.completed", "response.done", "response.failed"])
def test_a_final_responses_event_reports_its_usage(kind: str) -> None:
    message = RESPONSES_COMPLETED.replace("response.completed", kind)
    assert read_event("openai-responses", message) == RESPONSES_USAGE
    assert read_event("other", message) == RESPONSES_USAGE


def test_an_event_as_bytes_reads_as_its_text() -> None:
    assert read_event("openai-responses", RESPONSES_COMPLETED.encode()) == RESPONSES_USAGE


@pytest.mark.parametrize(
    "message",
    [
        RESPONSES_CREATED,
        RESPONSES_DELTA,
        '{"type":"error","error":{"type":"server_error","message":"boom"}}',
        '{"type":"response.failed","response":{"status":"failed","usage":null}}',
        "[1, 2]",
        "not json, and no usage key",
        "",
    ],
)
def test_an_event_without_final_usage_reports_none(message: str) -> None:
    assert read_event("openai-responses", message) is None


def test_an_event_that_mentions_usage_but_does_not_parse_reports_none() -> None:
    assert read_event("openai-responses", RESPONSES_COMPLETED[:-1]) is None


def test_junk_counts_report_none() -> None:
    message = RESPONSES_COMPLETED.replace('"output_tokens":120', '"output_tokens":-1')
    assert read_event("openai-responses", message) is None


# --- UsageReader: a sequence of events ----------------------------------------------------------


def test_a_websocket_turn_fed_message_by_message_reports_the_final_usage() -> None:
    reader = UsageReader("openai-responses")
    for message in (RESPONSES_CREATED, RESPONSES_DELTA):
        reader.feed(message)
        assert reader.finish() is None  # no final word yet
    reader.feed(RESPONSES_COMPLETED)
    assert reader.finish() == RESPONSES_USAGE


@pytest.mark.parametrize("name", STREAMS)
def test_each_sse_stream_read_event_by_event_gives_the_observers_usage(name: str) -> None:
    stream, usage = STREAMS[name]
    for api in (name, "other"):
        reader = UsageReader(typing.cast(Api, api))
        for data in events_of(stream):
            reader.feed(data)
        assert reader.finish() == usage


@pytest.mark.parametrize("name", BODIES)
def test_a_whole_json_body_reports_its_usage(name: str) -> None:
    body, usage = BODIES[name]
    reader = UsageReader(typing.cast(Api, name))
    reader.feed_body(body)
    assert reader.finish() == usage


def test_an_anthropic_message_delta_completes_the_usage_of_message_start() -> None:
    reader = UsageReader("anthropic")
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}
    reader.observe(start)
    assert reader.finish() is None  # message_start is provisional
    reader.observe({"type": "message_delta", "usage": {"output_tokens": 4, "input_tokens": None}})
    assert reader.finish() == Usage(9, 4)


def test_an_unparsable_event_that_mentions_usage_spends_the_reader() -> None:
    reader = UsageReader("openai-responses")
    reader.feed('{"type":"response.completed","usage": {oops')
    assert not reader.available
    reader.feed(RESPONSES_COMPLETED)
    assert reader.finish() is None


def test_an_event_whose_usage_is_null_is_not_parsed() -> None:
    reader = UsageReader("openai-chat")
    reader.feed('{"choices":[], "usage" : null, "broken": ')  # never parsed: nothing to read
    assert reader.available
    assert reader.finish() is None


def test_parsed_events_are_not_mutated() -> None:
    event = orjson.loads(RESPONSES_COMPLETED)
    before = orjson.dumps(event)
    reader = UsageReader("openai-responses")
    reader.observe(event)
    reader.observe(event)
    assert reader.finish() == RESPONSES_USAGE
    assert orjson.dumps(event) == before


def test_an_unknown_api_name_reads_as_other() -> None:
    assert read_event(typing.cast(Api, "bedrock"), RESPONSES_COMPLETED) == RESPONSES_USAGE
