"""Recorded-style answers of each API, streamed (SSE) and whole, with the usage each reports:
the cases the SSE decoder's and the usage readers' tests share."""

from __future__ import annotations

from toolslim.wire.usage import Usage

SSE = "text/event-stream"
JSON = "application/json"

# Recorded-style streams, trimmed to a few events so that every-boundary loops stay fast.
# Each carries a multi-byte character (é, —, 😀) inside a delta.

ANTHROPIC_STREAM = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL",'
    b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
    b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,'
    b'"cache_creation_input_tokens":1024,"cache_read_input_tokens":20480,"output_tokens":1}}}\n'
    b"\n"
    b"event: ping\n"
    b'data: {"type": "ping"}\n'
    b"\n"
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Caf\xc3\xa9 \xf0\x9f\x98\x80"}}\n'
    b"\n"
    b"event: message_delta\n"
    b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
    b'"usage":{"output_tokens":57}}\n'
    b"\n"
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n'
    b"\n"
)
ANTHROPIC_USAGE = Usage(472, 57, cache_read_input_tokens=20480, cache_creation_input_tokens=1024)

OPENAI_CHAT_STREAM = (
    b'data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk",'
    b'"created":1741569952,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":"Ol\xc3\xa1 \xf0\x9f\x98\x80"},"finish_reason":null}],"usage":null}\n'
    b"\n"
    b'data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n'
    b"\n"
    b'data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk",'
    b'"choices":[],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,'
    b'"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},'
    b'"completion_tokens_details":{"reasoning_tokens":0}}}\n'
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)
OPENAI_CHAT_USAGE = Usage(93, 46, cache_read_input_tokens=1024)

OPENAI_RESPONSES_STREAM = (
    b"event: response.created\n"
    b'data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdce",'
    b'"object":"response","status":"in_progress","model":"gpt-4.1","output":[],"usage":null}}\n'
    b"\n"
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_67c9fdcf",'
    b'"output_index":0,"content_index":0,'
    b'"delta":"R\xc3\xa9sum\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80"}\n'
    b"\n"
    b"event: response.completed\n"
    b'data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_67c9fdce",'
    b'"object":"response","status":"completed","model":"gpt-4.1","output":[],'
    b'"usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1536},'
    b'"output_tokens":120,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":2168}}}\n'
    b"\n"
)
OPENAI_RESPONSES_USAGE = Usage(512, 120, cache_read_input_tokens=1536)

# Gemini alt=sse ends its lines with CRLF.
GEMINI_STREAM = (
    b'data: {"candidates": [{"content": {"parts": [{"text": "Ol\xc3\xa1"}],"role": "model"},'
    b'"index": 0}],"usageMetadata": {"promptTokenCount": 4213,"candidatesTokenCount": 2,'
    b'"totalTokenCount": 4215,"cachedContentTokenCount": 4000},"modelVersion": "gemini-2.5-flash"}'
    b"\r\n\r\n"
    b'data: {"candidates": [{"content": {"parts": [{"text": " \xf0\x9f\x98\x80 mundo"}],'
    b'"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": '
    b'{"promptTokenCount": 4213,"candidatesTokenCount": 17,"totalTokenCount": 4258,'
    b'"cachedContentTokenCount": 4000,"thoughtsTokenCount": 28},"modelVersion": "gemini-2.5-flash"}'
    b"\r\n\r\n"
)
GEMINI_USAGE = Usage(213, 45, cache_read_input_tokens=4000)

STREAMS = {
    "anthropic": (ANTHROPIC_STREAM, ANTHROPIC_USAGE),
    "openai-chat": (OPENAI_CHAT_STREAM, OPENAI_CHAT_USAGE),
    "openai-responses": (OPENAI_RESPONSES_STREAM, OPENAI_RESPONSES_USAGE),
    "gemini": (GEMINI_STREAM, GEMINI_USAGE),
}

BODIES = {
    "anthropic": (
        b'{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",'
        b'"content":[{"type":"text","text":"Caf\xc3\xa9"}],"stop_reason":"end_turn",'
        b'"usage":{"input_tokens":12,"cache_creation_input_tokens":300,'
        b'"cache_read_input_tokens":4000,"output_tokens":6}}',
        Usage(12, 6, cache_read_input_tokens=4000, cache_creation_input_tokens=300),
    ),
    "openai-chat": (
        b'{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":'
        b'{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":'
        b'2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":'
        b'{"cached_tokens":1920}}}',
        Usage(86, 300, cache_read_input_tokens=1920),
    ),
    "openai-responses": (
        b'{"id":"resp_1","object":"response","status":"completed","output":[],'
        b'"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":0},'
        b'"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}',
        Usage(328, 52),
    ),
    "gemini": (
        b'{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},'
        b'"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":900,'
        b'"candidatesTokenCount":40,"thoughtsTokenCount":10,"cachedContentTokenCount":100,'
        b'"totalTokenCount":950}}',
        Usage(800, 50, cache_read_input_tokens=100),
    ),
}
