"""forward: the HTTP request path end to end through real sockets: a real aiohttp upstream on
127.0.0.1 records what it receives, the proxy is `make_app(settings)` on its own port.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.http_writer import StreamWriter
from multidict import CIMultiDict

from proxy_harness import (
    ANTHROPIC,
    APIS,
    CANONICAL_TOOLS,
    COMPACT_SCHEMA,
    GZIPPED,
    KEY,
    SCHEMA,
    FakeUpstream,
    Proxy,
    assert_components_agree,
    assert_error_shape,
    closed_port,
    dumps,
    raw_url,
    schema_of,
    stats_of,
    tools_span,
    total_is,
)
from toolslim.config.settings import Timeouts
from toolslim.core.pipeline import Pipeline
from toolslim.proxy.forward import ONE_WRITE, Pieces

# --- compaction and faithful forwarding ----------------------------------------------------


@pytest.mark.parametrize("api", list(APIS))
async def test_request_is_compacted_and_every_byte_outside_the_tools_value_is_identical(
    api: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    path, payload, seen_path, _ = APIS[api]
    body = dumps(payload)
    headers = {"Content-Type": "application/json", "x-api-key": KEY}
    async with client.post(server.make_url(path), data=body, headers=headers) as response:
        assert response.status == 200
        answer = await response.read()
    assert json.loads(answer)["id"] == "msg_1"

    [received] = upstream.received
    assert received.method == "POST" and received.target == seen_path
    assert received.headers["Content-Length"] == str(len(received.body))
    start, end = tools_span(body)
    new_start, new_end = tools_span(received.body)
    assert received.body[:new_start] == body[:start]
    assert received.body[new_end:] == body[end:]
    tools = json.loads(received.body[new_start:new_end])
    assert schema_of(api, tools) == COMPACT_SCHEMA
    assert len(received.body) < len(body)

    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["by_api"] == {api: 1}
    component = snapshot["components"]["toolschema"]
    assert component["applied"] == 1
    assert component["bytes_saved"] == len(body) - len(received.body)
    assert component["tokens_saved"] > 0
    assert snapshot["requests"]["bytes_received"] == len(body)
    assert snapshot["requests"]["bytes_forwarded"] == len(received.body)


def tool_search_body() -> dict[str, Any]:
    """A Claude Code turn with tool search on: a ToolSearch tool, a found tool sent deferred,
    and the search's result as tool_reference blocks in the transcript."""
    deferred = {"name": "mcp__notes__add", "input_schema": SCHEMA, "defer_loading": True}
    search = {
        "name": "ToolSearch",
        "description": "Find tools by keyword.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
            "required": ["query"],
        },
    }
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "tool_reference", "tool_name": "mcp__notes__add"}],
    }
    return {
        **ANTHROPIC,
        "tools": [search, deferred],
        "messages": [
            {"role": "user", "content": "add a note"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {}}
                ],
            },
            {"role": "user", "content": [result]},
        ],
    }


@pytest.mark.parametrize("path", ["/v1/messages?beta=true", "/v1/messages/count_tokens?beta=true"])
async def test_tool_search_requests_keep_their_beta_header_and_tool_references_untouched(
    path: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    body = dumps(tool_search_body())
    beta = "claude-code-20250219,advanced-tool-use-2025-11-20"
    headers = {"x-api-key": KEY, "anthropic-beta": beta, "anthropic-version": "2023-06-01"}
    async with client.post(server.make_url(path), data=body, headers=headers) as response:
        assert response.status == 200
    [received] = upstream.received
    assert received.target == "/a" + path  # count_tokens goes to Anthropic's own endpoint
    assert received.headers["anthropic-beta"] == beta
    start, end = tools_span(body)
    new_start, new_end = tools_span(received.body)
    # The transcript (tool_use, tool_reference blocks) is byte-identical; the catalogue is
    # compacted as for any request, so count_tokens counts what the request will carry.
    assert received.body[new_end:] == body[end:]
    assert received.body[:new_start] == body[:start]
    tools = json.loads(received.body[new_start:new_end])
    assert tools[1]["defer_loading"] is True and tools[1]["input_schema"] == COMPACT_SCHEMA
    assert [t["name"] for t in tools] == ["ToolSearch", "mcp__notes__add"]


@pytest.mark.parametrize(
    ("case", "method", "body", "content_type", "reason"),
    [
        ("json without tools", "POST", b'{"model": "m", "messages": []}', "application/json", None),
        (
            "nothing to strip",
            "POST",
            b'{"tools": ' + CANONICAL_TOOLS + b"}",
            "application/json",
            "nothing_to_strip",
        ),
        ("not json", "POST", b"\x00\x01binary\xff" * 100, "application/octet-stream", "not_json"),
        (
            "multipart",
            "POST",
            b'--b\r\nContent-Disposition: form-data; name="f"\r\n\r\n{"tools":[]}\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
            None,
        ),
        ("get", "GET", b"", None, "no_body"),
        ("empty post", "POST", b"", None, "no_body"),
    ],
    ids=["json without tools", "nothing to strip", "not json", "multipart", "get", "empty post"],
)
async def test_bodies_the_pipeline_does_not_change_are_forwarded_byte_identical(
    case: str,
    method: str,
    body: bytes,
    content_type: str | None,
    reason: str | None,
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
) -> None:
    server = await proxy()
    headers = {"Content-Type": content_type} if content_type else {}
    url = raw_url(server, "/v1/messages/count_tokens?x=1&y=%2F")
    async with client.request(method, url, data=body or None, headers=headers) as response:
        assert response.status == 200
    [received] = upstream.received
    assert received.method == method
    assert received.target == "/a/v1/messages/count_tokens?x=1&y=%2F"
    assert received.body == body
    if content_type:
        assert received.headers["Content-Type"] == content_type
    if method == "GET":
        assert "Content-Length" not in received.headers
    snapshot = await stats_of(client, server, total_is(1))
    component = snapshot["components"]["toolschema"]
    assert component["applied"] == 0 and component["skipped"] == 1
    if reason:
        assert component["skip_reasons"] == {reason: 1}


async def test_pure_pass_through_pipeline_forwards_everything_untouched(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(pipeline=())
    body = dumps(ANTHROPIC)
    async with client.post(server.make_url("/v1/messages"), data=body) as response:
        assert response.status == 200
    assert upstream.received[0].body == body
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["components"] == {}


async def test_headers_reach_upstream_with_credentials_but_without_hop_by_hop_and_with_its_host(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    headers = {
        "x-api-key": KEY,
        "Authorization": "Bearer sk-openai-like",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "prompt-caching-2024-07-31,tools-2024-05-16",
        "OpenAI-Organization": "org-1",
        "x-goog-api-key": "goog-key",
        "User-Agent": "claude-cli/2.0 (external, cli)",
        "Accept": "application/json",
        "Cookie": "a=b",
        "X-Custom-Hop": "drop me",
        "Connection": "keep-alive, X-Custom-Hop",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic Zm9vOmJhcg==",
        "TE": "trailers",
    }
    async with client.post(
        raw_url(server, "/v1/models?limit=5&after_id=x%20y&q=%2F"), data=b"{}", headers=headers
    ) as response:
        assert response.status == 200
        assert response.headers["request-id"] == "req_123"
        for hop in ("X-Up-Hop", "Keep-Alive", "Proxy-Authenticate"):
            assert hop not in response.headers
    [received] = upstream.received
    assert received.target == "/a/v1/models?limit=5&after_id=x%20y&q=%2F"
    assert received.headers["Host"] == f"127.0.0.1:{upstream.server.port}"  # type: ignore[union-attr]
    for name in (
        "x-api-key",
        "Authorization",
        "anthropic-version",
        "anthropic-beta",
        "OpenAI-Organization",
        "x-goog-api-key",
        "User-Agent",
        "Accept",
        "Cookie",
    ):
        assert received.headers.getall(name) == [headers[name]], name
    for hop in ("X-Custom-Hop", "Keep-Alive", "Proxy-Authorization", "TE"):
        assert hop not in received.headers
    assert received.headers.get("Connection", "keep-alive").lower() == "keep-alive"


async def test_upstream_connections_are_kept_alive_and_reused(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    for _ in range(5):
        async with client.post(server.make_url("/v1/messages"), data=b"{}") as response:
            await response.read()
    assert len({r.peer_port for r in upstream.received}) == 1


# --- compressed request bodies -------------------------------------------------------------


def brotli_compress(data: bytes) -> bytes:
    brotli = pytest.importorskip("brotli")
    result: bytes = brotli.compress(data)
    return result


def zstd_compress(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    result: bytes = zstandard.ZstdCompressor().compress(data)
    return result


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli_compress,
    "zstd": zstd_compress,
}


@pytest.mark.parametrize("coding", list(ENCODERS))
async def test_encoded_body_that_changed_is_forwarded_decoded_without_the_header(
    coding: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    body = dumps(ANTHROPIC)
    encoded = ENCODERS[coding](body)
    headers = {"Content-Encoding": coding, "Content-Type": "application/json"}
    async with client.post(server.make_url("/v1/messages"), data=encoded, headers=headers) as r:
        assert r.status == 200
    [received] = upstream.received
    assert "Content-Encoding" not in received.headers
    assert received.headers["Content-Length"] == str(len(received.body))
    start, end = tools_span(body)
    new_start, new_end = tools_span(received.body)
    assert (received.body[:new_start], received.body[new_end:]) == (body[:start], body[end:])
    assert schema_of("anthropic", json.loads(received.body[new_start:new_end])) == COMPACT_SCHEMA


@pytest.mark.parametrize(
    ("case", "encoded", "coding", "reason"),
    [
        ("unchanged", gzip.compress(b'{"messages": []}'), "gzip", "no_tools"),
        ("corrupt", b"\x1f\x8b\x08\x00garbage" + bytes(range(40)), "gzip", "undecodable"),
        ("truncated", gzip.compress(dumps(ANTHROPIC))[:-20], "gzip", "undecodable"),
        ("unknown coding", b"compressed?", "lzma", "undecodable"),
        ("bomb", gzip.compress(b" " * 50_000), "gzip", "too_large"),
    ],
    ids=["unchanged", "corrupt", "truncated", "unknown coding", "bomb"],
)
async def test_encoded_body_unchanged_or_undecodable_is_forwarded_as_sent_with_the_header(
    case: str,
    encoded: bytes,
    coding: str,
    reason: str,
    upstream: FakeUpstream,
    proxy: Proxy,
    client: aiohttp.ClientSession,
) -> None:
    server = await proxy(max_body_bytes=10_000)
    headers = {"Content-Encoding": coding, "Content-Type": "application/json"}
    async with client.post(server.make_url("/v1/messages"), data=encoded, headers=headers) as r:
        assert r.status == 200
    [received] = upstream.received
    assert received.body == encoded
    assert received.headers["Content-Encoding"] == coding
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["components"]["toolschema"]["skip_reasons"] == {reason: 1}


# --- large bodies --------------------------------------------------------------------------


async def test_body_over_the_transform_limit_is_streamed_through_untouched(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(max_body_bytes=1024)
    body = dumps({**ANTHROPIC, "messages": [{"role": "user", "content": "x" * 5000}]})

    async def chunked() -> AsyncIterator[bytes]:
        for offset in range(0, len(body), 700):
            yield body[offset : offset + 700]

    async with client.post(server.make_url("/v1/messages"), data=body) as response:
        assert response.status == 200
    async with client.post(server.make_url("/v1/messages"), data=chunked()) as response:
        assert response.status == 200
    assert [r.body for r in upstream.received] == [body, body]
    assert upstream.received[0].headers["Content-Length"] == str(len(body))
    snapshot = await stats_of(client, server, total_is(2))
    component = snapshot["components"]["toolschema"]
    assert component["skip_reasons"] == {"too_large": 2}
    assert snapshot["requests"]["bytes_received"] == 2 * len(body)
    assert snapshot["requests"]["bytes_forwarded"] == 2 * len(body)


@pytest.mark.parametrize(
    "text", [ONE_WRITE - 3000, ONE_WRITE + 3000, 1_500_000], ids=["one write", "two", "1.5MB"]
)
async def test_compacted_bodies_of_every_size_are_forwarded_exactly_with_their_length(
    text: int, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    body = dumps({**ANTHROPIC, "messages": [{"role": "user", "content": "y" * text}]})
    async with client.post(server.make_url("/v1/messages"), data=io.BytesIO(body)) as response:
        assert response.status == 200
    [received] = upstream.received
    assert received.headers["Content-Length"] == str(len(received.body))
    assert received.body == Pipeline(("toolschema",)).run(body, "anthropic").body
    assert len(received.body) < len(body)


class Recorded(asyncio.Transport):
    """A transport that keeps every write, for what a writer puts on the wire."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False


class Wire:
    """The protocol side a StreamWriter needs: its transport, never paused."""

    def __init__(self) -> None:
        self.transport = Recorded()
        self._paused = False

    async def _drain_helper(self) -> None:
        return None


@pytest.mark.parametrize("chunked", [False, True], ids=["sized", "chunked"])
async def test_a_body_in_pieces_goes_out_exactly_and_a_sized_one_in_one_write_with_its_headers(
    chunked: bool,
) -> None:
    wire = Wire()
    writer = StreamWriter(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    body = Pieces((memoryview(b'{"messages":[],"tools":'), b'[{"name":"Read"}]', b"}"))
    head = "POST /v1/messages HTTP/1.1"
    if chunked:
        writer.enable_chunking()
        await writer.write_headers(head, CIMultiDict({"Transfer-Encoding": "chunked"}))
    else:
        writer.length = body.size
        await writer.write_headers(head, CIMultiDict({"Content-Length": str(body.size)}))
    await body.write_with_length(writer, None)
    await writer.write_eof()
    sent = b"".join(wire.transport.writes)
    head_sent, _, rest = sent.partition(b"\r\n\r\n")
    assert head_sent.startswith(head.encode())
    whole = b'{"messages":[],"tools":[{"name":"Read"}]}'
    if chunked:
        assert rest == b"%x\r\n%s\r\n0\r\n\r\n" % (len(whole), whole)
    else:
        assert rest == whole
        assert len(wire.transport.writes) == 1  # headers and body in one send


# --- responses -----------------------------------------------------------------------------


async def test_sse_events_reach_the_client_as_the_upstream_sends_them(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    arrivals: list[float] = []
    raw = b""
    headers = {"X-Fake": "sse:5:200", "Accept": "text/event-stream"}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        async for line in r.content:
            raw += line
            if line.startswith(b"event: delta"):
                arrivals.append(time.perf_counter())
    assert len(arrivals) == 5
    # The first event is seen long before the upstream sends the last one (4 x 200 ms later).
    assert arrivals[0] < upstream.event_sent[-1]
    assert arrivals[-1] - arrivals[0] > (upstream.event_sent[-1] - upstream.event_sent[0]) / 2
    assert raw.count(b"\n\n") == 7
    snapshot = await stats_of(client, server, lambda s: s["usage"]["responses_with_usage"] == 1)
    assert snapshot["usage"]["tokens"]["input"] == 11
    assert snapshot["usage"]["tokens"]["output"] == 5
    assert snapshot["requests"]["active_streams"] == 0


async def test_compressed_response_is_relayed_compressed(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    expected = gzip.compress(GZIPPED)
    headers = {"X-Fake": "gzip", "Accept-Encoding": "gzip"}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.headers["Content-Encoding"] == "gzip"
        assert await r.read() == expected
    snapshot = await stats_of(client, server, lambda s: s["usage"]["responses_with_usage"] == 1)
    assert snapshot["usage"]["tokens"]["output"] == 4


async def test_upstream_errors_are_relayed_exactly(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    for status in (400, 429, 500, 529):
        headers = {"X-Fake": f"status:{status}"}
        async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
            assert r.status == status
            assert r.headers["retry-after"] == "7"
            body = await r.read()
        assert body == b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
    snapshot = await stats_of(client, server, total_is(4))
    assert snapshot["requests"]["by_status"]["4xx"] == 2
    assert snapshot["requests"]["by_status"]["5xx"] == 2
    assert snapshot["requests"]["upstream_errors"] == {"connect": 0, "reset": 0, "timeout": 0}


async def test_client_disconnect_cancels_the_upstream_request_at_once(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    headers = {"X-Fake": "hang:30"}
    response = await client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers)
    assert await response.content.readline() == b"event: ping\n"
    response.close()
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, lambda s: s["requests"]["client_disconnects"] == 1)
    assert snapshot["requests"]["client_disconnects"] == 1
    assert snapshot["requests"]["active_streams"] == 0
    assert_components_agree(snapshot)


async def test_client_disconnect_while_waiting_for_headers_cancels_upstream(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    headers = {"X-Fake": "slow:30000"}
    with pytest.raises(asyncio.TimeoutError):
        async with client.post(
            server.make_url("/v1/messages"),
            data=b"{}",
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=0.3),
        ):
            pass
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["by_status"]["4xx"] == 1  # counted as 499
    assert snapshot["requests"]["client_disconnects"] == 1


@pytest.mark.parametrize("api", list(APIS))
async def test_upstream_down_is_502_in_the_apis_error_shape(
    api: str, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(f"http://127.0.0.1:{closed_port()}")
    path, payload, _, _ = APIS[api]
    headers = {"x-api-key": KEY}
    async with client.post(server.make_url(path), data=dumps(payload), headers=headers) as r:
        assert r.status == 502
        assert r.content_type == "application/json"
        body = await r.json()
    upstream_name = "gemini" if api == "gemini" else "anthropic" if api == "anthropic" else "openai"
    assert_error_shape(api, 502, body, f"could not connect to the {upstream_name} upstream")
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["connect"] == 1
    assert snapshot["requests"]["by_status"]["5xx"] == 1
    assert_components_agree(snapshot)


async def test_an_upstream_host_that_does_not_resolve_is_a_502_saying_so(
    proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    # `.invalid` never resolves (RFC 6761); the message must not be "unknown error -2".
    server = await proxy("http://toolslim-test.invalid")
    async with client.post(server.make_url("/v1/messages"), data=dumps(ANTHROPIC)) as r:
        assert r.status == 502
        body = await r.json()
    message = body["error"]["message"]
    assert message.endswith("(its host name did not resolve)"), message
    assert "toolslim-test.invalid" not in message


@pytest.mark.parametrize("api", list(APIS))
async def test_slow_upstream_is_504_in_the_apis_error_shape(
    api: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=0.2, idle_chunk=5))
    path, payload, _, _ = APIS[api]
    headers = {"X-Fake": "slow:5000"}
    async with client.post(server.make_url(path), data=dumps(payload), headers=headers) as r:
        assert r.status == 504
        body = await r.json()
    assert_error_shape(api, 504, body, "sent no response headers within 0.2 s")
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 1


async def test_wait_for_headers_is_held_to_response_headers_not_to_idle_chunk(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=5, idle_chunk=0.2))
    headers = {"X-Fake": "slow:600"}  # headers after 0.6 s: three idle_chunks, within 5 s
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert r.status == 200
        await r.read()
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 0


async def test_upstream_reset_mid_stream_ends_the_clients_stream_and_counts_reset(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()
    async with client.post(
        server.make_url("/v1/messages"), data=b"{}", headers={"X-Fake": "reset"}
    ) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["reset"] == 1
    assert snapshot["requests"]["active_streams"] == 0


@pytest.mark.parametrize(
    "hang",
    ["hang:5", "hang:5:600"],  # the second sends headers after three idle_chunks, then stalls
    ids=["stall", "stall after slow headers"],
)
async def test_idle_gap_longer_than_idle_chunk_ends_the_stream_and_counts_timeout(
    hang: str, upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    """Cut at idle_chunk into the stall, however long the headers took within their limit."""
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=10, idle_chunk=0.2))
    headers = {"X-Fake": hang}
    async with client.post(server.make_url("/v1/messages"), data=b"{}", headers=headers) as r:
        assert await r.content.readline() == b"event: ping\n"
        with pytest.raises(aiohttp.ClientPayloadError):
            await r.read()
    # Cut inside the 5 s stall: an upstream left to finish its stall would write its late
    # event and return, never cancelled; and no limit but idle_chunk is shorter than 5 s.
    await asyncio.wait_for(upstream.cancelled.wait(), 5)
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 1


async def test_stream_longer_than_idle_chunk_with_shorter_gaps_completes_intact(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy(timeouts=Timeouts(connect=5, response_headers=5, idle_chunk=0.3))
    async with client.post(
        server.make_url("/v1/messages"), data=b"{}", headers={"X-Fake": "sse:8:100"}
    ) as response:
        raw = await response.read()
    # Eight events with a 100 ms sleep before each but the first: the whole stream outlasted
    # idle_chunk twice over, each gap within it.
    assert len(upstream.event_sent) == 8
    assert len([line for line in raw.split(b"\n") if line.startswith(b"data: ")]) == 10
    snapshot = await stats_of(client, server, total_is(1))
    assert snapshot["requests"]["upstream_errors"]["timeout"] == 0


async def test_hundred_concurrent_streams_all_complete_intact(
    upstream: FakeUpstream, proxy: Proxy, client: aiohttp.ClientSession
) -> None:
    server = await proxy()

    async def stream(tag: int) -> bytes:
        url = server.make_url(f"/v1/messages?tag={tag}")
        headers = {"X-Fake": "sse:3:20"}
        async with client.post(url, data=dumps(ANTHROPIC), headers=headers) as response:
            assert response.status == 200
            return await response.read()

    connector = client.connector
    assert connector is not None
    results = await asyncio.wait_for(
        asyncio.gather(*(stream(tag) for tag in range(100))), timeout=30
    )
    for tag, raw in enumerate(results):
        events = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
        assert len(events) == 5
        assert all(json.loads(e[6:])["tag"] == str(tag) for e in events[1:4])
    snapshot = await stats_of(client, server, total_is(100))
    assert snapshot["requests"]["total"] == 100
    assert snapshot["requests"]["active_streams"] == 0
    assert snapshot["components"]["toolschema"]["applied"] == 100
    assert snapshot["memo"]["hits"] == 99
