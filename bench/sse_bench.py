"""Cost of UsageObserver per SSE stream, as ratios to a byte search over the same chunks.

Feeds, chunk by chunk as the proxy's `_relay` does, a ~30-event Anthropic stream (one event per
chunk, usage in message_start and message_delta) and a ~200-chunk OpenAI chat stream (each chunk
says `"usage":null` until the last), each also as one chunk (a read under load often holds the
whole answer). For each it times, in this one process:

- baseline: `chunk.find(b"\\n\\n")` over every chunk, the floor any boundary search pays;
- reference: the observer with every byte through SSEDecoder (the path before the byte-search
  fast path, still the exact reference the tests compare against);
- fast: `UsageObserver` as the proxy uses it (reads collected, looked at 64 KB at a time).

Run: `python bench/sse_bench.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import orjson

from toolslim.wire.sse import UsageObserver
from toolslim.wire.usage import Usage

SSE = "text/event-stream"
WORDS = "the parser test passes now so we can run the linter and commit the refactor".split()


def anthropic_chunks(deltas: int = 25) -> list[bytes]:
    def event(kind: str, payload: object) -> bytes:
        return b"event: %s\ndata: %s\n\n" % (kind.encode(), orjson.dumps(payload))

    usage = {
        "input_tokens": 472,
        "cache_creation_input_tokens": 1024,
        "cache_read_input_tokens": 20480,
        "output_tokens": 1,
    }
    message = {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant"}
    chunks = [
        event("message_start", {"type": "message_start", "message": {**message, "usage": usage}}),
        event("content_block_start", {"type": "content_block_start", "index": 0}),
        event("ping", {"type": "ping"}),
    ]
    for i in range(deltas):
        text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(4)) + " é"
        delta = {"type": "text_delta", "text": text}
        chunks.append(event("content_block_delta", {"type": "content_block_delta", "delta": delta}))
    chunks += [
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 57},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]
    return chunks


def openai_chunks(deltas: int = 200) -> list[bytes]:
    head = {"id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk"}
    chunks = []
    for i in range(deltas):
        choice = {
            "index": 0,
            "delta": {"content": WORDS[i % len(WORDS)] + " "},
            "finish_reason": None,
        }
        chunks.append(b"data: %s\n\n" % orjson.dumps({**head, "choices": [choice], "usage": None}))
    usage = {
        "prompt_tokens": 1117,
        "completion_tokens": 200,
        "prompt_tokens_details": {"cached_tokens": 1024},
    }
    chunks.append(b"data: %s\n\n" % orjson.dumps({**head, "choices": [], "usage": usage}))
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def baseline(api: str, chunks: list[bytes]) -> object:
    for chunk in chunks:
        chunk.find(b"\n\n")
    return None


def reference(api: str, chunks: list[bytes]) -> Usage | None:
    # Each read looked at on its own, every byte through SSEDecoder, as before the fast path.
    observer = UsageObserver(api, SSE, None, batch=0, skim=False)
    for chunk in chunks:
        observer.feed(chunk)
    return observer.finish()


def fast(api: str, chunks: list[bytes]) -> Usage | None:
    observer = UsageObserver(api, SSE, None)
    for chunk in chunks:
        observer.feed(chunk)
    return observer.finish()


def per_stream(
    fn: Callable[[str, list[bytes]], object], api: str, chunks: list[bytes], rounds: int
) -> float:
    """Median microseconds per stream over 7 batches of `rounds` streams."""
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(rounds):
            fn(api, chunks)
        samples.append((time.perf_counter() - start) / rounds * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    streams = []
    for api, chunks in (("anthropic", anthropic_chunks()), ("openai-chat", openai_chunks())):
        streams.append((api, api, chunks, len(chunks)))
        # Under load one read often holds the whole answer: only its usage events are decoded.
        streams.append((f"{api}, one read", api, [b"".join(chunks)], len(chunks)))
    print(
        f"{'stream':<24}{'chunks':>7}{'baseline µs':>13}{'reference µs':>14}{'fast µs':>9}"
        f"{'ref/base':>10}{'fast/base':>11}{'speed-up':>10}"
    )
    for label, api, chunks, events in streams:
        assert fast(api, chunks) == reference(api, chunks) is not None
        rounds = max(1, args.rounds * 30 // events)
        base = per_stream(baseline, api, chunks, rounds)
        ref = per_stream(reference, api, chunks, rounds)
        new = per_stream(fast, api, chunks, rounds)
        print(
            f"{label:<24}{len(chunks):>7}{base:>13.1f}{ref:>14.1f}{new:>9.1f}"
            f"{ref / base:>9.1f}x{new / base:>10.1f}x{ref / new:>9.1f}x"
        )


if __name__ == "__main__":
    main()
