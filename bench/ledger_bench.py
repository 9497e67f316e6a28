"""The tool ledger's cost per request (issue 22), in this one process: Claude Code's 230-tool
catalogue (captures/claude-code.mcp.anthropic.json, ten MCP servers), its answer streamed with
three tool calls, against `Pipeline(["toolschema"]).run` on the same body (a memo hit: a
session's usual request), measured in the same run. Goal: the ledger under 5 % of it.

What the ledger adds per request, each part timed on its own:
- reading the calls: the usage observer over the streamed answer, minus the same observer over
  the same answer with its three call blocks' type renamed (so that no call key is found: the
  usage is read either way);
- what `exchange.Ledger._offered` does once the response is counted: the client, the model
  and the session of the request, and `ToolLedger.record` with the calls.
Once per distinct catalogue (not per request) each tool's tokens are counted off the loop; the
bench prints that too, and what one /stats render of the ledger costs.

Then, in the same run, the share of what a whole request costs: `toolslim serve --pipeline
toolschema` in a child process before `fake_upstream.py` (a streamed answer), the same body
sent `--proxied` times (concurrency 4), the proxy's CPU (utime + stime from /proc) per request.

Run: `python bench/ledger_bench.py [--requests N] [--rounds N] [--proxied N]`.

`--observing` measures instead, in this process, what observing costs per memo-hit request
(issue 23): the Ledger and Stats as `toolslim serve` makes them, the 16 rotating 80 KB bench
bodies (`compact_bench.bodies`; with Claude Code's session header: `--session-header`), the
fake upstream's JSON answer (or its SSE answer, `--stream`), and per request
`Ledger.pipeline_ran`, a `UsageObserver` made, fed and finished, and `Ledger.count` (at INFO,
the line written nowhere), for `[]` and `[toolschema]` in alternating rounds, the least round
of each kept.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from common import ANTHROPIC_HEADERS, TICK, cpu_ticks, load, start_proxy, start_upstream, stop
from compact_bench import SIZES, bodies, catalogue
from fake_upstream import message_reply, sse_reply
from toolslim.config.settings import Settings
from toolslim.core.pipeline import Pipeline
from toolslim.core.tokens import count_tokens
from toolslim.core.toolfacts import tool_facts
from toolslim.observe import drift, logs
from toolslim.observe.exchange import Exchange, Ledger
from toolslim.observe.ledger import render, who
from toolslim.observe.ledger.book import ToolLedger
from toolslim.proxy.app import FORWARDING, make_app
from toolslim.proxy.transform import rewrite
from toolslim.wire.routing import route_request
from toolslim.wire.sse import UsageObserver

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "claude-code.mcp.anthropic.json"
CALLS = ("Read", "mcp__git__git_status", "mcp__files__read_text_file")
HEADERS = {
    "user-agent": "claude-cli/2.1.197 (external, cli)",
    "x-claude-code-session-id": "bench-session",
}


def event(obj: dict[str, Any]) -> bytes:
    return b"event: " + obj["type"].encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def answer() -> bytes:
    """A streamed answer: some text, then three tool calls with their input streamed."""
    usage = {"input_tokens": 12, "cache_read_input_tokens": 60_000, "output_tokens": 1}
    parts = [event({"type": "message_start", "message": {"type": "message", "usage": usage}})]
    parts.append(
        event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
    )
    for n in range(20):
        delta = {"type": "text_delta", "text": f"Looking at part {n} of the project now. "}
        parts.append(event({"type": "content_block_delta", "index": 0, "delta": delta}))
    parts.append(event({"type": "content_block_stop", "index": 0}))
    for index, name in enumerate(CALLS, start=1):
        block = {"type": "tool_use", "id": f"toolu_{index:024}", "name": name, "input": {}}
        parts.append(event({"type": "content_block_start", "index": index, "content_block": block}))
        for piece in ('{"path": "/src/', f"module_{index}", '.py"}'):
            delta = {"type": "input_json_delta", "partial_json": piece}
            parts.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
        parts.append(event({"type": "content_block_stop", "index": index}))
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use"},
        "usage": {"output_tokens": 180},
    }
    parts += [event(end), event({"type": "message_stop"})]
    return b"".join(parts)


def chunks(data: bytes, size: int = 1400) -> list[bytes]:
    return [data[at : at + size] for at in range(0, len(data), size)]


def per_call(function: Callable[[], object], count: int, rounds: int) -> float:
    """CPU seconds per call of `function`: the least of `rounds` runs of `count` calls."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(count):
            function()
        best = min(best, (time.process_time() - started) / count)
    return best


def proxy_cpu(body: bytes, count: int) -> float:
    """CPU seconds per request of `toolslim serve --pipeline toolschema` (the ledger in it)."""
    with tempfile.TemporaryDirectory(prefix="toolslim-ledgerbench-") as tmp:
        upstream, port = start_upstream(Path(tmp))
        processes = [upstream]
        try:
            flags = ["--pipeline", "toolschema", "--log-level", "warning", "--state-file", "none"]
            proxy = start_proxy("[toolschema]", Path(tmp), {"anthropic": port}, flags)
            processes.append(proxy.process)
            url = f"http://127.0.0.1:{proxy.port}/v1/messages"
            headers = {"Content-Type": "application/json"}
            warm = asyncio.run(load(url, [body], 100, 4, headers))  # the memo, the tokens
            time.sleep(1)
            before = cpu_ticks(proxy.process.pid)
            sent = asyncio.run(load(url, [body], count, 4, headers))
            time.sleep(0.5)  # the last counts
            if warm.failed or sent.failed:
                raise SystemExit(f"{warm.failed + sent.failed} requests were not answered 200")
            return (cpu_ticks(proxy.process.pid) - before) / TICK / count
        finally:
            stop(processes)


class Nowhere(io.StringIO):
    """Where the request lines go: made and flushed as serving, kept nowhere."""

    def write(self, text: str) -> int:
        return len(text)


async def observer_of(
    pipeline: tuple[str, ...], stream: bool, session: bool
) -> Callable[[int], float]:
    """A round of `count` memo-hit requests of `pipeline`: seconds of observing per request."""
    settings = Settings(pipeline=pipeline)
    lines = logs.BatchedLines(Nowhere())
    lines.setFormatter(logs.LineFormatter(logs.FORMAT))
    logging.getLogger("toolslim").setLevel(logging.INFO)
    state = make_app(settings, lines)[FORWARDING]
    ledger = Ledger(
        state.stats,
        asyncio.get_running_loop(),
        state.pending,
        lines,
        drift_kept_bytes=settings.memo_bytes // drift.KEPT_SHARE,
    )
    items = bodies(catalogue(), SIZES["80KB"], 16, seed=SIZES["80KB"])
    if not stream:
        items = [body.replace(b',"stream":true}', b',"stream":false}') for body in items]
    answer, kind = (
        (sse_reply(5), "text/event-stream") if stream else (message_reply(), "application/json")
    )
    named = {"X-Claude-Code-Session-Id": "bench-session"} if session else {}
    sent = []
    for body in items:
        headers = CIMultiDictProxy(
            CIMultiDict({**ANTHROPIC_HEADERS, "User-Agent": "toolslim-bench/1", **named})
        )
        sent.append((body, headers, route_request("/v1/messages", headers, settings)))

    def one(body: bytes, headers: Any, route: Any) -> float:
        exchange = Exchange(route, "POST", "/v1/messages", time.perf_counter(), headers=headers)
        done = rewrite(body, "", state.pipeline, settings.max_body_bytes, route.api, None, True)
        assert done is not None
        exchange.body = body
        started = time.perf_counter()
        ledger.pipeline_ran(exchange, done.report)
        ran = time.perf_counter()
        exchange.bytes_in, exchange.bytes_out = len(body), sum(map(len, done.pieces))
        exchange.overhead, exchange.sent, exchange.status = 0.0002, True, 200
        answered = time.perf_counter()
        exchange.observer = UsageObserver(route.api, kind, None)
        exchange.observer.feed(answer)
        ledger.count(exchange)
        return ran - started + time.perf_counter() - answered

    for _ in range(3):  # the memo, the catalogue's tokens and its tools' tokens
        for item in sent:
            one(*item)
        if state.pending:
            await asyncio.wait(set(state.pending))

    def round_of(count: int) -> float:
        return sum(one(*sent[n % len(sent)]) for n in range(count)) / count

    return round_of


def observing(requests: int, rounds: int, stream: bool, session: bool) -> None:
    """Print what observing costs per memo-hit request, `[]` and `[toolschema]`."""

    async def run() -> dict[str, float]:
        rounds_of = {
            "[]": await observer_of((), stream, session),
            "[toolschema]": await observer_of(("toolschema",), stream, session),
        }
        best = dict.fromkeys(rounds_of, float("inf"))
        for _ in range(rounds):
            for name, round_of in rounds_of.items():
                best[name] = min(best[name], round_of(requests))
        return best

    best = asyncio.run(run())
    empty, schema = best["[]"], best["[toolschema]"]
    print(
        f"observing per memo-hit request ({'SSE' if stream else 'JSON'} answer,"
        f" {'a' if session else 'no'} session header, least of"
        f" {rounds} rounds of {requests}): [] {empty * 1e6:.1f} us, [toolschema]"
        f" {schema * 1e6:.1f} us ({schema / empty:.2f}x, +{(schema - empty) * 1e6:.1f} us)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the least kept)")
    parser.add_argument("--proxied", type=int, default=2000, help="requests through serve")
    parser.add_argument("--observing", action="store_true", help="observing per request")
    parser.add_argument("--stream", action="store_true", help="--observing an SSE answer")
    parser.add_argument(
        "--session-header", action="store_true", help="--observing with Claude Code's header"
    )
    args = parser.parse_args()
    if args.observing:
        observing(args.requests, args.rounds, args.stream, args.session_header)
        return

    body = CAPTURE.read_bytes()
    pipeline = Pipeline(["toolschema"])
    report = pipeline.run(body, "anthropic")  # the memo now holds the catalogue
    [catalogue] = report.catalogues
    streamed = chunks(answer())
    hidden = chunks(answer().replace(b'"type":"tool_use"', b'"type":"tool_xse"'))
    book = ToolLedger(read_multiplier=0.1, write_multiplier=1.25)
    started = time.process_time()
    facts = tool_facts(catalogue.forwarded, count_tokens)
    counted = time.process_time() - started
    book.known(catalogue.digest, facts)

    def observe(pieces: list[bytes]) -> Callable[[], object]:
        def run() -> object:
            observer = UsageObserver("anthropic", "text/event-stream", None)
            for piece in pieces:
                observer.feed(piece)
            return observer.finish(), observer.calls

        return run

    observer = UsageObserver("anthropic", "text/event-stream", None)
    for piece in streamed:
        observer.feed(piece)
    usage = observer.finish()
    calls = observer.calls
    assert [name for name, _ in calls] == list(CALLS), calls
    assert usage is not None and usage.cache_read_input_tokens == 60_000

    def offered() -> object:
        return book.record(
            client=who.client_of(HEADERS["user-agent"]),
            api="anthropic",
            model=who.model_of("/v1/messages", body),
            session=who.session_of("/v1/messages", HEADERS, body),
            catalogues=report.catalogues,
            usage=usage,
            calls=calls,
            cache_miss=None,
        )

    n, rounds = args.requests, args.rounds
    run = per_call(lambda: pipeline.run(body, "anthropic"), n, rounds)
    seen = per_call(observe(streamed), n, rounds)
    unseen = per_call(observe(hidden), n, rounds)
    record = per_call(offered, n, rounds)
    shown = per_call(
        lambda: render.render(book.export(), time.time(), min_requests=50, min_sessions=3),
        max(1, n // 100),
        rounds,
    )
    reading = max(0.0, seen - unseen)
    ledger = reading + record
    tools = len(facts.names)
    print(
        f"body {len(body) // 1000} KB, {tools} tools ({len(set(facts.servers)) - 1} MCP servers,"
        f" {sum(facts.tokens):,} tokens); answer {sum(map(len, streamed)):,} B in"
        f" {len(streamed)} chunks with {len(calls)} tool calls; {n} requests x {rounds} rounds"
    )
    print()
    print(f"{'per request (CPU)':<44} {'us':>8} {'of [toolschema]':>16}")
    for label, seconds in (
        ("[toolschema] Pipeline.run (memo hit)", run),
        ("usage observer over the answer", seen),
        ("  of it: reading the 3 calls", reading),
        ("ledger record (client, model, session, calls)", record),
        ("ledger in all (calls read + record)", ledger),
    ):
        print(f"{label:<44} {seconds * 1e6:>8.1f} {seconds / run * 100:>15.2f}%")
    print()
    print(f"once per distinct catalogue, off the loop: each tool's tokens, {counted * 1e3:.0f} ms")
    print(f"one /stats render of the ledger ({tools} tools): {shown * 1e3:.2f} ms")
    whole = proxy_cpu(body, args.proxied)
    print(
        f"`toolslim serve` [toolschema], CPU per request ({args.proxied} streamed requests):"
        f" {whole * 1e6:.0f} us; the ledger's share of it: {ledger / whole * 100:.2f}%"
        f" (goal < 5 %: {'met' if ledger / whole < 0.05 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
