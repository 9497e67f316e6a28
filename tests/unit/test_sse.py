"""Tests for toolslim.wire.sse: the SSE decoder and the usage observer, split at every byte."""

from __future__ import annotations

import gzip
import itertools
import zlib

import brotli
import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from streams import (
    ANTHROPIC_STREAM,
    ANTHROPIC_USAGE,
    BODIES,
    GEMINI_STREAM,
    JSON,
    OPENAI_CHAT_STREAM,
    OPENAI_CHAT_USAGE,
    OPENAI_RESPONSES_STREAM,
    OPENAI_RESPONSES_USAGE,
    SSE,
    STREAMS,
)
from toolslim.wire.sse import MAX_DECODED, Event, SSEDecoder, UsageObserver
from toolslim.wire.usage import API_NAMES, Usage


def crlf(stream: bytes) -> bytes:
    return stream.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def lf(stream: bytes) -> bytes:
    return stream.replace(b"\r\n", b"\n")


def cr(stream: bytes) -> bytes:
    return lf(stream).replace(b"\n", b"\r")


def observe(
    api: str,
    chunks: list[bytes],
    content_type: str | None = SSE,
    content_encoding: str | None = None,
    max_buffer: int = 8 * 1024 * 1024,
    batch: int = 0,
    max_decoded: int = MAX_DECODED,
) -> Usage | None:
    """Usage as the observer reads `chunks`, looking at each read on its own by default: the
    path that has to get every boundary between reads right (the proxy batches reads)."""
    observer = UsageObserver(
        api, content_type, content_encoding, max_buffer, batch, max_decoded=max_decoded
    )
    for chunk in chunks:
        observer.feed(chunk)
    return observer.finish()


def decode(chunks: list[bytes]) -> list[Event]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


ENDINGS = {"lf": lf, "crlf": crlf, "cr": cr}


# --- SSEDecoder ---------------------------------------------------------------------------------


def test_decoder_emits_each_event_with_its_type_and_data() -> None:
    events = decode([lf(ANTHROPIC_STREAM)])
    assert [e.event for e in events] == [
        "message_start",
        "ping",
        "content_block_delta",
        "message_delta",
        "message_stop",
    ]
    assert orjson.loads(events[2].data)["delta"]["text"] == "Café 😀"


def test_an_event_without_an_event_line_is_a_message() -> None:
    assert decode([b"data: x\n\n"]) == [Event("message", "x")]


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("name", STREAMS)
def test_decoder_gives_identical_events_for_every_two_chunk_split(name: str, ending: str) -> None:
    stream = ENDINGS[ending](STREAMS[name][0])
    whole = decode([stream])
    assert whole == decode([lf(STREAMS[name][0])])
    for i in range(len(stream) + 1):
        assert decode([stream[:i], stream[i:]]) == whole, i


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("name", STREAMS)
def test_decoder_gives_identical_events_when_fed_one_byte_at_a_time(name: str, ending: str) -> None:
    stream = ENDINGS[ending](STREAMS[name][0])
    assert decode(bytewise(stream)) == decode([stream])


def test_a_character_split_across_chunks_is_decoded_whole() -> None:
    emoji = "😀".encode()
    events = decode([b"data: a" + emoji[:1], emoji[1:3], emoji[3:] + b"\xc3", b"\xa9\n\n"])
    assert events == [Event("message", "a😀é")]


def test_cr_at_the_end_of_one_chunk_and_lf_at_the_start_of_the_next_is_one_line_break() -> None:
    assert decode([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [Event("message", "a\nb")]


def test_an_empty_chunk_between_cr_and_lf_does_not_split_the_line_break() -> None:
    assert decode([b"data: a\r", b"", b"\ndata: b\n\n"]) == [Event("message", "a\nb")]


def test_lone_cr_lone_lf_and_crlf_all_end_lines() -> None:
    assert decode([b"data: a\rdata: b\ndata: c\r\n\r\nevent: e\rdata: d\r\r"]) == [
        Event("message", "a\nb\nc"),
        Event("e", "d"),
    ]


def test_only_cr_lf_and_crlf_end_lines_not_other_unicode_breaks() -> None:
    assert decode(["data: a\u2028b\x0cc\x1cd\n\n".encode()]) == [
        Event("message", "a\u2028b\x0cc\x1cd")
    ]


def test_comment_lines_are_ignored() -> None:
    assert decode([b": keep-alive\n\n:\ndata: x\n: inside\n\n"]) == [Event("message", "x")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert decode([b'data: {\ndata:  "a": 1\ndata: }\n\n']) == [Event("message", '{\n "a": 1\n}')]


def test_only_one_space_after_the_colon_is_removed() -> None:
    assert decode([b"data:x\n\ndata:  y\n\n"]) == [Event("message", "x"), Event("message", " y")]


def test_a_field_without_a_colon_has_an_empty_value() -> None:
    assert decode([b"data\ndata\n\n"]) == [Event("message", "\n")]


def test_a_leading_bom_is_dropped_even_when_split() -> None:
    assert decode([b"\xef", b"\xbb", b"\xbfdata: x\n\n"]) == [Event("message", "x")]


def test_a_decoder_that_starts_mid_stream_keeps_a_bom() -> None:
    decoder = SSEDecoder(at_start=False)
    assert decoder.feed(b"\xef\xbb\xbfdata: x\n\ndata: y\n\n") == [Event("message", "y")]


def test_only_the_first_bom_is_dropped() -> None:
    assert decode([b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n"]) == []  # field "\ufeffdata" is unknown


def test_an_event_with_no_data_is_not_dispatched_and_its_type_is_forgotten() -> None:
    assert decode([b"event: ping\n\ndata: x\n\n"]) == [Event("message", "x")]


def test_an_unfinished_event_at_the_end_is_not_dispatched() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\n") == []
    assert decoder.buffered == 1


def test_the_last_event_id_carries_over_and_retry_and_unknown_fields_are_ignored() -> None:
    assert decode(
        [b"id: 7\nretry: 10\nfoo: bar\ndata: a\n\ndata: b\n\nid: 8\x00\ndata: c\n\n"]
    ) == [
        Event("message", "a", "7"),
        Event("message", "b", "7"),
        Event("message", "c", "7"),
    ]


def test_invalid_utf8_becomes_the_replacement_character() -> None:
    assert decode([b"data: \xff\n\n"]) == [Event("message", "\ufffd")]


def test_buffered_counts_the_unfinished_line_and_event() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: abc\ndata: de")
    assert decoder.buffered == len("abc") + len("data: de")
    decoder.feed(b"\n\n")
    assert decoder.buffered == 0


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(sorted(STREAMS)),
    ending=st.sampled_from(sorted(ENDINGS)),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=40),
)
def test_any_chunking_of_a_stream_gives_the_same_events(
    name: str, ending: str, cuts: list[int]
) -> None:
    stream = ENDINGS[ending](STREAMS[name][0])
    cuts = [c % (len(stream) + 1) for c in cuts]
    assert decode(split_at(stream, cuts)) == decode([stream])


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=10))
def test_any_chunking_of_arbitrary_bytes_gives_the_same_events(
    data: bytes, cuts: list[int]
) -> None:
    cuts = [c % (len(data) + 1) for c in cuts]
    assert decode(split_at(data, cuts)) == decode([data])


# --- UsageObserver: streams ---------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
def test_a_whole_stream_reports_the_exact_usage(name: str) -> None:
    stream, usage = STREAMS[name]
    assert observe(name, [stream]) == usage


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("name", STREAMS)
def test_usage_is_identical_for_every_two_chunk_split(name: str, ending: str) -> None:
    stream, usage = STREAMS[name]
    stream = ENDINGS[ending](stream)
    for i in range(len(stream) + 1):
        assert observe(name, [stream[:i], stream[i:]]) == usage, i


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("name", STREAMS)
def test_usage_is_identical_when_fed_one_byte_at_a_time(name: str, ending: str) -> None:
    stream, usage = STREAMS[name]
    assert observe(name, bytewise(ENDINGS[ending](stream))) == usage


@pytest.mark.parametrize("name", STREAMS)
def test_api_other_reads_every_providers_stream(name: str) -> None:
    stream, usage = STREAMS[name]
    assert observe("other", [stream]) == usage


def test_an_unknown_api_name_is_treated_as_other() -> None:
    assert observe("bedrock", [ANTHROPIC_STREAM]) == ANTHROPIC_USAGE


def test_the_stream_content_type_may_carry_parameters_and_any_case() -> None:
    stream, usage = STREAMS["gemini"]
    assert observe("gemini", [stream], "Text/Event-Stream; charset=utf-8") == usage


def test_anthropic_message_delta_overrides_input_and_cache_fields_that_are_not_null() -> None:
    stream = ANTHROPIC_STREAM.replace(
        b'"usage":{"output_tokens":57}',
        b'"usage":{"input_tokens":480,"cache_creation_input_tokens":null,'
        b'"cache_read_input_tokens":20000,"output_tokens":57}',
    )
    assert observe("anthropic", [stream]) == Usage(480, 57, 20000, 1024)


def test_anthropic_later_message_deltas_override_earlier_ones() -> None:
    delta = b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":%d}}\n\n'
    stream = ANTHROPIC_STREAM + delta % 60 + delta % 61
    assert observe("anthropic", [stream]) == Usage(472, 61, 20480, 1024)


def test_gemini_last_cumulative_usage_wins_even_when_fields_disappear() -> None:
    stream = GEMINI_STREAM + b'data: {"usageMetadata": {"promptTokenCount": 10}}\r\n\r\n'
    assert observe("gemini", [stream]) == Usage(10, 0)


def test_openai_responses_incomplete_and_failed_events_carry_usage() -> None:
    for kind in (b"response.incomplete", b"response.failed"):
        stream = OPENAI_RESPONSES_STREAM.replace(b"response.completed", kind)
        assert observe("openai-responses", [stream]) == OPENAI_RESPONSES_USAGE


def test_openai_responses_failed_without_usage_is_unavailable() -> None:
    stream = (
        b"event: response.failed\n"
        b'data: {"type":"response.failed","response":{"object":"response","status":"failed",'
        b'"error":{"code":"server_error","message":"boom"},"usage":null}}\n\n'
    )
    assert observe("openai-responses", [stream]) is None


def test_a_usage_key_inside_generated_text_is_not_mistaken_for_usage() -> None:
    text = b'data: {"choices":[{"delta":{"content":"say \\"usage\\": {}"}}],"usage":null}\n\n'
    assert observe("openai-chat", [text, OPENAI_CHAT_STREAM]) == OPENAI_CHAT_USAGE


def test_the_stream_is_not_held_in_memory() -> None:
    filler = b'data: {"choices":[{"delta":{"content":"xxxxxxxxxxxxxxxx"}}],"usage":null}\n\n'
    chunks = [filler] * 2000 + [OPENAI_CHAT_STREAM]
    assert observe("openai-chat", chunks, max_buffer=1024) == OPENAI_CHAT_USAGE


def test_an_sse_line_longer_than_max_buffer_is_unavailable() -> None:
    assert (
        observe("openai-chat", [b"data: " + b"x" * 100, OPENAI_CHAT_STREAM], max_buffer=50) is None
    )


# --- UsageObserver: the byte-search fast path agrees with the decoder fed every byte -----------


def reference(
    api: str, chunks: list[bytes], content_encoding: str | None = None, max_buffer: int = 1 << 23
) -> Usage | None:
    """The observer as it was: every byte goes through SSEDecoder, every event is looked at."""
    observer = UsageObserver(api, SSE, content_encoding, max_buffer, batch=0, skim=False)
    for chunk in chunks:
        observer.feed(chunk)
    return observer.finish()


# Streams that poke at the byte search: a BOM, comments, blank lines before the first event,
# usage split over data lines, "usage":null on the key's line or the next, CR-only breaks.
TRICKY_STREAMS = {
    "bom-and-comments": b"\xef\xbb\xbf: hi\n\n" + ANTHROPIC_STREAM.replace(b"\n\n", b"\n: c\n\n"),
    "leading-blank-lines": b"\r\n\n\r" + ANTHROPIC_STREAM,
    "usage-over-two-data-lines": (
        b'data: {"object":"response","usage":\ndata: {"input_tokens":9,"output_tokens":2}}\n\n'
    ),
    "null-on-the-next-line-is-not-null": OPENAI_CHAT_STREAM
    + b'data: {"usage"\n:null\ndata: 5}\n\n',
    "usage-null-with-spaces": b'data: {"usage" :  null}\n\n' + OPENAI_CHAT_STREAM,
    "event-line-only-usage": b'event: "usage"\ndata: {"type":"ping"}\n\n' + ANTHROPIC_STREAM,
    "bom-twice": b"\xef\xbb\xbf\xef\xbb\xbf" + OPENAI_CHAT_STREAM,
    "bom-after-a-boundary": b"data: x\n\n\xef\xbb\xbf"
    + OPENAI_CHAT_STREAM.split(b"\n\n")[2]
    + b"\n\n",
    # Not UTF-8: the decoder reads U+FFFD there, so the event is still valid JSON.
    "invalid-utf8-in-a-usage-event": ANTHROPIC_STREAM.replace(
        b'"role":"assistant"', b'"role":"assistant\xff"', 1
    ),
    "data-without-colon-and-fields-around-usage": b"id: 7\nretry: 5\ndata\n"
    + ANTHROPIC_STREAM.replace(b"data: ", b"data:", 1),
    # A field that only starts with "data" is another field; usage on a line of its own.
    "datax-field-beside-usage": b'datax: {"usage":{"output_tokens":7}}\n'
    + ANTHROPIC_STREAM.replace(b"data: ", b"data:  ", 1),
    "usage-after-a-data-line": (
        b'data: {"type":"message_delta",\ndata: "usage":{"output_tokens":3}}\n\n' + ANTHROPIC_STREAM
    ),
    "usage-before-a-data-line": ANTHROPIC_STREAM.replace(
        b'"usage":{"output_tokens"', b'"usage":{"output_tokens"\ndata: ', 1
    ),
    # Each data line parses alone, but the event's data is both joined: not JSON at all.
    "usage-on-the-second-of-two-json-data-lines": ANTHROPIC_STREAM
    + b'data: {"type":"ping"}\ndata: {"type":"message_delta","usage":{"output_tokens":3}}\n\n',
    "usage-on-the-first-of-two-json-data-lines": ANTHROPIC_STREAM
    + b'data: {"type":"message_delta","usage":{"output_tokens":3}}\ndata: {"type":"ping"}\n\n',
    "data-hash-field-after-the-stream": ANTHROPIC_STREAM
    + b'data#{"type":"message_delta","usage":{"output_tokens":7}}\n\n',
    # Keys that only start like "usage" or "usageMetadata" (api "other" searches for both).
    "keys-that-only-start-like-usage": b'data: {"usages":{"n":1},"usageMeta":2}\n\n'
    + ANTHROPIC_STREAM,
    # After a boundary a BOM is kept, so "\ufeffdata" is no data field; an event the decoder
    # must read (two data lines, not UTF-8) there must not be read as the stream's start.
    "bom-after-a-boundary-before-an-event-to-decode": b"data: x\n\n\xef\xbb\xbf"
    + b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2},"t":\n'
    + b'data: "\xff"}\n\n',
}


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("name", sorted({**STREAMS, **TRICKY_STREAMS}))
def test_the_fast_path_agrees_with_the_reference_for_every_split(name: str, ending: str) -> None:
    stream = ENDINGS[ending]({**{k: v[0] for k, v in STREAMS.items()}, **TRICKY_STREAMS}[name])
    for api in ("other", name if name in STREAMS else "anthropic"):
        expected = reference(api, [stream])
        assert observe(api, [stream]) == expected
        assert observe(api, bytewise(stream)) == expected == reference(api, bytewise(stream))
        for i in range(len(stream) + 1):
            assert observe(api, [stream[:i], stream[i:]]) == expected, i


def test_the_fast_path_is_exercised_and_reads_the_tricky_streams() -> None:
    assert observe("openai-responses", [TRICKY_STREAMS["usage-over-two-data-lines"]]) == Usage(9, 2)
    assert observe("anthropic", [TRICKY_STREAMS["bom-and-comments"]]) == ANTHROPIC_USAGE
    # Only a BOM that starts the stream is dropped; later, "\ufeffdata" is an unknown field.
    assert observe("openai-chat", [TRICKY_STREAMS["bom-after-a-boundary"]]) is None
    assert observe("openai-chat", [TRICKY_STREAMS["bom-after-a-boundary"][9:]]) == Usage(
        93, 46, 1024
    )
    assert observe("openai-chat", [TRICKY_STREAMS["null-on-the-next-line-is-not-null"]]) is None
    stream = TRICKY_STREAMS["invalid-utf8-in-a-usage-event"]
    assert observe("anthropic", [stream]) == ANTHROPIC_USAGE


@pytest.mark.parametrize("max_buffer", [0, 1, 10, 40, 100, 300])
@pytest.mark.parametrize("name", STREAMS)
def test_max_buffer_is_enforced_exactly_as_by_the_reference(name: str, max_buffer: int) -> None:
    stream = crlf(STREAMS[name][0])
    splits = [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    for chunks in [[stream], bytewise(stream), *splits]:
        expected = reference(name, chunks, max_buffer=max_buffer)
        assert observe(name, chunks, max_buffer=max_buffer) == expected


SSE_PIECES = [
    b"\n",
    b"\r",
    b"\r\n",
    b"\xef\xbb\xbf",
    b"data: ",
    b"data:",
    b"data",
    b"datax: ",
    b"data:  ",
    b"event: message_delta",
    b": comment",
    b"id: 1",
    b'{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}',
    b'{"type":"message_delta","usage":{"output_tokens":5,"input_tokens":null}}',
    b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}',
    b'{"type":"response.completed","response":{"usage":{"input_tokens":4}}}',
    b'{"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1}}',
    b'"usage"',
    b'"usage":null',
    b'"usage": ',
    b'"usages":{',
    b'"usageMeta":1',
    b'"usageMetadata":null',
    b"null",
    b"\xf0\x9f",
    b"\x98\x80",
    b"\xff",
    b"x",
    b"{",
    b"}",
]


@settings(max_examples=400, deadline=None)
@given(
    api=st.sampled_from(API_NAMES),
    pieces=st.lists(st.sampled_from(SSE_PIECES), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
    max_buffer=st.sampled_from([0, 8, 64, 1 << 23]),
    encoding=st.sampled_from([None, "gzip"]),
)
def test_the_fast_path_agrees_with_the_reference_on_any_stream_and_chunking(
    api: str,
    pieces: list[bytes],
    cuts: list[int],
    max_buffer: int,
    encoding: str | None,
) -> None:
    stream = b"".join(pieces)
    if encoding:
        stream = gzip.compress(stream)
    chunks = split_at(stream, [c % (len(stream) + 1) for c in cuts])
    expected = reference(api, chunks, encoding, max_buffer)
    assert observe(api, chunks, SSE, encoding, max_buffer) == expected


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(sorted(STREAMS)),
    ending=st.sampled_from(sorted(ENDINGS)),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=40),
)
def test_the_fast_path_agrees_with_the_reference_on_any_chunking_of_a_stream(
    name: str, ending: str, cuts: list[int]
) -> None:
    stream = ENDINGS[ending](STREAMS[name][0])
    chunks = split_at(stream, [c % (len(stream) + 1) for c in cuts])
    assert observe(name, chunks) == reference(name, chunks) == STREAMS[name][1]


# --- UsageObserver: truncated and usage-less responses ------------------------------------------


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("batch", [1, 64, 64 * 1024])
def test_batched_reads_give_the_same_usage_as_each_read_on_its_own(name: str, batch: int) -> None:
    stream, usage = STREAMS[name]
    for i in range(0, len(stream) + 1, 7):
        chunks = [stream[:i], stream[i:]]
        assert observe(name, chunks, batch=batch) == observe(name, chunks) == usage, i
    chunks = bytewise(stream)
    assert observe(name, chunks, batch=batch) == usage


def test_reads_are_collected_until_a_batch_is_full_then_looked_at() -> None:
    observer = UsageObserver("anthropic", SSE, None, batch=100)
    observer.feed(b"x" * 60)
    assert observer.pending == 60  # not looked at yet
    observer.feed(b"x" * 60)
    assert observer.pending == 0  # past the batch: let go
    assert observer.buffered == 120  # looked at, held until its event ends, not dropped


@pytest.mark.parametrize(
    ("name", "cut_before"),
    [
        ("anthropic", b"event: message_delta"),
        (
            "openai-chat",
            b'data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":'
            b'"chat.completion.chunk","choices":[],"usage"',
        ),
        ("openai-responses", b"event: response.completed"),
        ("gemini", b"\r\n\r\n"),
    ],
)
def test_a_stream_cut_short_before_its_final_usage_is_unavailable(
    name: str, cut_before: bytes
) -> None:
    stream = STREAMS[name][0]
    assert observe(name, [stream[: stream.index(cut_before)]]) is None


def test_a_usage_event_without_its_terminating_blank_line_is_not_counted() -> None:
    assert observe("openai-chat", [OPENAI_CHAT_STREAM.rsplit(b"\n\ndata: [DONE]", 1)[0]]) is None


def test_an_anthropic_stream_that_errors_after_message_start_is_unavailable() -> None:
    stream = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: ping")] + (
        b"event: error\n"
        b'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    assert observe("anthropic", [stream]) is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}',
        b'{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}',
        b'{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}',
        b"",
        b"  \n",
        b"<html><body>502 Bad Gateway</body></html>",
        b'{"usage":{"input_tokens":1}}',  # no envelope says which API this is
    ],
)
def test_a_body_that_never_shows_usage_is_unavailable(body: bytes) -> None:
    assert observe("other", [body], JSON) is None


def test_nothing_fed_is_unavailable() -> None:
    assert observe("anthropic", []) is None


# --- UsageObserver: non-stream JSON -------------------------------------------------------------


@pytest.mark.parametrize("name", BODIES)
def test_a_json_body_reports_the_exact_usage(name: str) -> None:
    body, usage = BODIES[name]
    assert observe(name, [body], JSON) == usage
    assert observe(name, bytewise(body), JSON) == usage
    assert observe("other", [body], None) == usage


def test_a_json_body_larger_than_max_buffer_is_unavailable() -> None:
    body, usage = BODIES["anthropic"]
    assert observe("anthropic", [body], JSON, max_buffer=len(body)) == usage
    assert observe("anthropic", [body], JSON, max_buffer=len(body) - 1) is None


def test_a_truncated_json_body_is_unavailable() -> None:
    body = BODIES["openai-chat"][0]
    assert observe("openai-chat", [body[:-1]], JSON) is None


def test_a_gemini_json_array_stream_takes_the_last_element_with_usage() -> None:
    body = (
        b'[{"candidates":[{"content":{"parts":[{"text":"Ol\xc3\xa1"}]}}],"usageMetadata":'
        b'{"promptTokenCount":50,"candidatesTokenCount":1,"totalTokenCount":51}}\r\n'
        b',\r\n{"candidates":[{"content":{"parts":[{"text":"!"}]},"finishReason":"STOP"}],'
        b'"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":7,"thoughtsTokenCount":3,'
        b'"totalTokenCount":60}}\r\n'
        b',\r\n{"candidates":[{"content":{"parts":[{"text":""}]}}]}\r\n]'
    )
    expected = Usage(50, 10)
    assert observe("gemini", [body], JSON) == expected
    for i in range(len(body) + 1):
        assert (
            observe("gemini", [body[:i], body[i:]], "application/json; charset=UTF-8") == expected
        )


@pytest.mark.parametrize(
    ("name", "usage", "expected"),
    [
        ("anthropic", b'{"input_tokens":5,"output_tokens":null}', Usage(5, 0)),
        ("openai-chat", b'{"prompt_tokens":5,"prompt_tokens_details":null}', Usage(5, 0)),
        ("openai-chat", b'{"completion_tokens":3}', Usage(0, 3)),
        ("openai-responses", b'{"input_tokens":5,"output_tokens":2}', Usage(5, 2)),
    ],
)
def test_missing_or_null_counts_are_zero(name: str, usage: bytes, expected: Usage) -> None:
    envelope = {
        "anthropic": b'{"type":"message","usage":%s}',
        "openai-chat": b'{"object":"chat.completion","usage":%s}',
        "openai-responses": b'{"object":"response","usage":%s}',
    }[name]
    assert observe(name, [envelope % usage], JSON) == expected


@pytest.mark.parametrize(
    "usage",
    [
        b'{"input_tokens":"12","output_tokens":3}',
        b'{"input_tokens":1.5,"output_tokens":3}',
        b'{"input_tokens":true,"output_tokens":3}',
        b'{"input_tokens":-1,"output_tokens":3}',
        b'{"input_tokens":[1],"output_tokens":3}',
    ],
)
def test_junk_counts_are_unavailable(usage: bytes) -> None:
    assert observe("anthropic", [b'{"type":"message","usage":%s}' % usage], JSON) is None


def test_cached_tokens_exceeding_the_prompt_are_unavailable() -> None:
    body = b'{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":6}}}'
    assert observe("openai-chat", [body], JSON) is None


def test_an_unparsable_payload_that_mentions_usage_is_unavailable() -> None:
    assert observe("openai-chat", [OPENAI_CHAT_STREAM, b'data: {"usage": {oops\n\n']) is None


# --- UsageObserver: content encodings -----------------------------------------------------------


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


ENCODERS = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": _zstd,
    "identity": bytes,
}


@pytest.mark.parametrize("encoding", ENCODERS)
@pytest.mark.parametrize("name", STREAMS)
def test_an_encoded_stream_is_observed_through_a_decoded_copy(name: str, encoding: str) -> None:
    stream, usage = STREAMS[name]
    encoded = ENCODERS[encoding](stream)
    assert observe(name, [encoded], SSE, encoding) == usage
    assert observe(name, bytewise(encoded), SSE, encoding.upper()) == usage


@pytest.mark.parametrize("encoding", ENCODERS)
def test_an_encoded_json_body_is_observed_through_a_decoded_copy(encoding: str) -> None:
    body, usage = BODIES["gemini"]
    assert observe("gemini", bytewise(ENCODERS[encoding](body)), JSON, encoding) == usage


def test_raw_deflate_is_accepted_as_well_as_zlib_wrapped() -> None:
    stream, usage = STREAMS["anthropic"]
    assert observe("anthropic", bytewise(_raw_deflate(stream)), SSE, "deflate") == usage


def test_a_gzip_body_of_several_members_is_decoded_whole() -> None:
    stream, usage = STREAMS["openai-chat"]
    half = len(stream) // 2
    encoded = gzip.compress(stream[:half]) + gzip.compress(stream[half:])
    assert observe("openai-chat", bytewise(encoded), SSE, "gzip") == usage


def test_stacked_encodings_are_undone_in_reverse_order() -> None:
    stream, usage = STREAMS["gemini"]
    encoded = brotli.compress(gzip.compress(stream))
    assert observe("gemini", [encoded], SSE, "gzip, br") == usage


@pytest.mark.parametrize("encoding", ["compress", "gzip, compress", "bogus"])
def test_an_unknown_encoding_is_unavailable(encoding: str) -> None:
    assert observe("anthropic", [ANTHROPIC_STREAM], SSE, encoding) is None


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_bytes_that_do_not_decode_are_unavailable(encoding: str) -> None:
    assert observe("anthropic", [b"\x00\x01not compressed at all" * 4], SSE, encoding) is None


def test_a_corrupt_tail_after_good_usage_is_unavailable() -> None:
    encoded = gzip.compress(ANTHROPIC_STREAM)
    assert observe("anthropic", [encoded, b"junk that is not gzip"], SSE, "gzip") is None


def test_a_coded_response_that_inflates_past_max_decoded_is_unavailable() -> None:
    stream, usage = STREAMS["anthropic"]
    encoded = gzip.compress(stream)
    assert observe("anthropic", [encoded], SSE, "gzip", max_decoded=len(stream)) == usage
    assert observe("anthropic", [encoded], SSE, "gzip", max_decoded=len(stream) - 1) is None


@pytest.mark.parametrize("content_type", [SSE, JSON])
def test_a_small_gzip_answer_of_a_gibibyte_of_spaces_is_given_up_past_the_bound(
    content_type: str,
) -> None:
    # 1024 members of 1 MiB of spaces each: about 1 MB on the wire, 1 GiB decoded.
    member = gzip.compress(b" " * (1 << 20), mtime=0)
    observer = UsageObserver("anthropic", content_type, "gzip")
    for _ in range(1024):
        observer.feed(member)
    assert observer.finish() is None
    assert observer.buffered == 0


def test_max_decoded_bounds_the_decoded_bytes_not_the_bytes_relayed() -> None:
    stream, usage = STREAMS["openai-chat"]
    assert observe("openai-chat", [stream], max_decoded=0) == usage


# --- UsageObserver: never raises ----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    api=st.sampled_from([*API_NAMES, "nonsense"]),
    content_type=st.sampled_from([SSE, JSON, None, "text/html"]),
    content_encoding=st.sampled_from([None, "gzip", "deflate", "br", "zstd", "identity"]),
    chunks=st.lists(st.binary(max_size=64), max_size=8),
)
def test_garbage_never_raises(
    api: str, content_type: str | None, content_encoding: str | None, chunks: list[bytes]
) -> None:
    observer = UsageObserver(api, content_type, content_encoding)
    for chunk in chunks:
        observer.feed(chunk)
    assert observer.finish() is None or isinstance(observer.finish(), Usage)


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(sorted(STREAMS)),
    position=st.integers(min_value=0),
    junk=st.binary(min_size=1, max_size=16),
)
def test_junk_spliced_into_a_stream_never_raises(name: str, position: int, junk: bytes) -> None:
    stream = STREAMS[name][0]
    position %= len(stream) + 1
    result = observe(name, [stream[:position], junk, stream[position:]])
    assert result is None or isinstance(result, Usage)


def test_finish_is_idempotent_and_later_feeds_are_ignored() -> None:
    observer = UsageObserver("anthropic", SSE, None)
    observer.feed(ANTHROPIC_STREAM)
    assert observer.finish() == ANTHROPIC_USAGE
    observer.feed(b"event: message_delta\ndata: {}\n\n")
    assert observer.finish() == ANTHROPIC_USAGE
