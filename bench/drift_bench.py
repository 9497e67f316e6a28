"""Catalogue drift replayed (issue 17): N simulated Claude Code sessions on ten MCP servers that
connect in a random order, through `Pipeline([toolschema])` and `Pipeline([toolorder,
toolschema])`, in this one process.

Each session has built-in tools, then the servers' tools in the order the servers connected
(the shapes of ten published servers' `tools/list` answers, with text written here: names,
tool counts, `$schema` draft-07 from zod servers, pydantic `title`s from Python ones). Its first
request goes out before every server is connected (Claude Code's MCP_CONNECTION_NONBLOCKING
default), the later ones carry all; one server builds a default from a Python set (its text
differs per process, so per session), four tool descriptions carry the day's date, and in some
sessions one server reconnects mid-session with its tools in another order.

It reports:
- the distinct catalogues the upstream sees (its prompt-cache prefixes), across sessions and
  as changes within a session, with and without toolorder, and the client's drift by kind;
- the CPU drift tracking adds per request (session, compare, classify, advisories: what
  `exchange.Ledger._decide` calls) as a share of `Pipeline.run` on the same bodies. Goal < 3 %.

With `--workers N` (N > 1) it also replays the requests spread round-robin over N trackers
on one shared store (`observe/sessions.SharedSessions`, SQLite in a temporary directory), as N
workers see them when each request comes on a new connection: the drift found must be the
same as one tracker's, and the report gives what the store adds per request. It also times the
other state the workers share per request, the buffer budget (`budget.HostBudget` against
one process's `BufferBudget`): an 80 KB body read in two chunks, then given back.

Run: `python bench/drift_bench.py [--sessions N] [--turns N] [--rounds N] [--seed N]
[--workers N]`. The machine may be shared: the figures are ratios within one run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from multidict import CIMultiDict

from toolslim.core.pipeline import Pipeline, RunReport
from toolslim.observe import advice, drift, sessions
from toolslim.observe.stats import Stats
from toolslim.proxy import budget

# (server, tools, annotation style): the published servers' tool counts (203 in all).
SERVERS: tuple[tuple[str, int, str], ...] = (
    ("filesystem", 14, "zod"),
    ("memory", 9, "zod"),
    ("everything", 11, "zod"),
    ("sequential-thinking", 1, "zod"),
    ("git", 12, "pydantic"),
    ("fetch", 1, "pydantic"),
    ("time", 2, "pydantic"),
    ("excel", 25, "pydantic"),
    ("aws-docs", 4, "pydantic"),
    ("atlassian", 124, "pydantic"),
)
SET_SERVER = "time"  # its default is a Python set: another order in every process
DATED_SERVER, DATED_TOOLS = "atlassian", 4  # descriptions that say today's date
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")
BUILT_IN = 24
REORDER_SHARE = 0.25  # sessions where a server reconnects and lists its tools in another order
WORDS = (
    "read write list search the project file issue page branch commit value range sheet "
    "record entity relation summary query result status before after every each one"
).split()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def schema(rng: random.Random, style: str, title: str, default: Any = None) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for index in range(rng.randint(1, 6)):
        prop: dict[str, Any] = {"type": rng.choice(["string", "integer", "boolean"])}
        prop["description"] = text(rng, rng.randint(4, 14))
        if style == "pydantic":
            prop["title"] = f"Arg {index}"
        properties[f"arg_{index}"] = prop
    if default is not None:
        properties["zones"] = {"type": "array", "items": {"type": "string"}, "default": default}
    out: dict[str, Any] = {"type": "object", "properties": properties, "required": ["arg_0"]}
    if style == "zod":
        out["$schema"] = "http://json-schema.org/draft-07/schema#"
        out["additionalProperties"] = False
    else:
        out["title"] = f"{title}Arguments"
    return out


def server_tools(seed: int) -> dict[str, list[dict[str, Any]]]:
    """Each server's tools/list, as Claude Code forwards them (mcp__<server>__<tool>)."""
    rng = random.Random(seed)
    tools: dict[str, list[dict[str, Any]]] = {}
    for server, count, style in SERVERS:
        listed = []
        for index in range(count):
            name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{index}"
            listed.append(
                {
                    "name": f"mcp__{server}__{name}",
                    "description": text(rng, rng.randint(10, 40)),
                    "input_schema": schema(rng, style, name.title().replace("_", "")),
                }
            )
        tools[server] = listed
    return tools


def built_in(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed + 1)
    return [
        {
            "name": f"Tool{index:02}",
            "description": text(rng, rng.randint(30, 120)),
            "input_schema": {
                **schema(rng, "zod", f"Tool{index}"),
                "$schema": "https://json-schema.org/draft/2020-12/schema",
            },
        }
        for index in range(BUILT_IN)
    ]


@dataclass
class Request:
    session: int
    turn: int
    body: bytes
    headers: CIMultiDict[str]


def session_requests(
    index: int, turns: int, base: list[dict[str, Any]], servers: dict[str, list[Any]]
) -> list[Request]:
    rng = random.Random(index * 7919)
    order = [name for name, _, _ in SERVERS]
    rng.shuffle(order)  # the order servers connect in
    connected_first = rng.randint(1, len(order) - 1)  # before the first request went out
    zones = ["UTC", "Europe/Berlin", "America/New_York"]
    rng.shuffle(zones)  # a Python set's order: one per process
    day = rng.choice(DAYS)
    own = {name: list(tools) for name, tools in servers.items()}
    own[SET_SERVER] = [
        {**t, "input_schema": {**t["input_schema"], "properties": {
            **t["input_schema"]["properties"],
            "zones": {"type": "array", "items": {"type": "string"}, "default": zones}}}}
        for t in own[SET_SERVER]
    ]  # fmt: skip
    own[DATED_SERVER] = [
        {**t, "description": f"{t['description']} Today is {day}."} if i < DATED_TOOLS else t
        for i, t in enumerate(own[DATED_SERVER])
    ]
    reorder_at = rng.randrange(2, turns) if turns > 2 and rng.random() < REORDER_SHARE else None
    reconnected = rng.choice(order)
    headers = CIMultiDict(
        {
            "X-Claude-Code-Session-Id": f"session-{index}",
            "User-Agent": "claude-cli/2.1.197 (external, cli)",
            "anthropic-beta": "claude-code-20250219",
        }
    )
    system = [{"type": "text", "text": text(rng, 400)}]
    messages: list[dict[str, Any]] = []
    requests = []
    for turn in range(turns):
        if reorder_at is not None and turn == reorder_at:
            own[reconnected] = list(reversed(own[reconnected]))
        present = order[:connected_first] if turn == 0 else order
        catalogue = base + [t for name in present for t in own[name]]
        # A prompt or a tool's result (a file read, a search): 2-30 KB a turn.
        messages.append({"role": "user", "content": text(rng, rng.randint(300, 5000))})
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 32000,
            "system": system,
            "messages": messages,
            "tools": catalogue,
            "metadata": {"user_id": f"user-{index}"},
            "stream": True,
        }
        requests.append(Request(index, turn, orjson.dumps(body), headers))
        messages.append({"role": "assistant", "content": text(rng, rng.randint(50, 400))})
    return requests


def replay_order(sessions: Sequence[list[Request]], seed: int) -> list[Request]:
    """All sessions' requests interleaved at random, each session's in its own order."""
    rng = random.Random(seed)
    queues = [list(s) for s in sessions]
    out = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        out.append(queue.pop(0))
    return out


def forwarded_catalogue(report: RunReport) -> bytes:
    body = report.body
    start = body.index(b'"tools":') + len(b'"tools":')
    return body[start : body.rindex(b',"metadata":')]


@dataclass
class Result:
    distinct: int
    changes_within: int
    run_seconds: float
    decide_seconds: float
    hit_run_seconds: float
    hit_decide_seconds: float
    hits: int
    requests: int
    kinds: Counter[str]
    advised: int


def trackers(workers: int, folder: Path | None) -> list[drift.Tracker]:
    """One tracker per worker, each its own (`folder` None) or on a store made in `folder`."""
    if folder is None:
        return [drift.Tracker() for _ in range(workers)]
    path = folder / f"{time.monotonic_ns()}-{sessions.FILE}"
    sessions.create(path)
    return [drift.Tracker(sessions=sessions.SharedSessions(path)) for _ in range(workers)]


def replay(
    names: Sequence[str],
    requests: Sequence[Request],
    memo_size: int,
    workers: int = 1,
    folder: Path | None = None,
) -> Result:
    """One replay through a fresh pipeline and fresh drift trackers (request i goes to
    tracker i mod workers)."""
    pipeline = Pipeline(names, memo_size=memo_size)
    each = trackers(workers, folder)
    stats = Stats(names)
    stats.track_drift_sessions(each[0].__len__)
    warned: set[tuple[str, bytes]] = set()
    seen: set[bytes] = set()
    last: dict[int, bytes] = {}
    changes = 0
    run_total = decide_total = hit_run = hit_decide = 0.0
    hits = 0
    clock = time.perf_counter
    for index, request in enumerate(requests):
        tracker = each[index % len(each)]
        started = clock()
        report = pipeline.run(request.body, "anthropic")
        ran = clock()
        # What exchange.Ledger._decide does for each request counted.
        catalogues = report.catalogues
        session = tracker.session("/v1/messages", request.headers, request.body)
        change = tracker.observe(session, "anthropic", catalogues, None, 0.0)
        if change is not None:
            stats.record_catalogue_change(change)
        for name, size in advice.advise("anthropic", request.headers, request.body, catalogues):
            stats.record_advice(name, size)
            warned.add((name, drift.identity_of(catalogues)))
        decided = clock()
        run_total += ran - started
        decide_total += decided - ran
        if report.memo_hits and change is None:
            hits += 1
            hit_run += ran - started
            hit_decide += decided - ran
        sent = forwarded_catalogue(report)
        seen.add(sent)
        if last.get(request.session, sent) != sent:
            changes += 1
        last[request.session] = sent
    snapshot = stats.snapshot()
    return Result(
        len(seen),
        changes,
        run_total,
        decide_total,
        hit_run,
        hit_decide,
        hits,
        len(requests),
        Counter(snapshot["drift"]["changes"]),
        snapshot["advice"]["claude_code_tool_search_off"]["requests"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200, help="simulated sessions")
    parser.add_argument("--turns", type=int, default=8, help="requests per session")
    parser.add_argument("--rounds", type=int, default=3, help="replays per pipeline (min kept)")
    parser.add_argument(
        "--memo-size",
        type=int,
        default=1024,
        help="memo entries (the default 64 is for one team: the sessions here would thrash it)",
    )
    parser.add_argument("--seed", type=int, default=17, help="seed of the servers' tool text")
    parser.add_argument("--workers", type=int, default=1, help="also replay over N workers")
    args = parser.parse_args()

    servers = server_tools(args.seed)
    base = built_in(args.seed)
    sessions = [session_requests(i, args.turns, base, servers) for i in range(args.sessions)]
    requests = replay_order(sessions, args.seed)
    sizes = [len(r.body) for r in requests]
    full = next(r for r in requests if r.turn > 0)
    tools = len(orjson.loads(full.body)["tools"])
    print(
        f"{args.sessions} sessions x {args.turns} requests = {len(requests)} requests; "
        f"{tools} tools when all servers are connected; bodies {min(sizes) // 1000}-"
        f"{max(sizes) // 1000} KB (median {statistics.median(sizes) / 1000:.0f} KB);"
        f" memo_size {args.memo_size}"
    )
    print()
    header = (
        f"{'pipeline':<24} {'distinct':>8} {'changes':>8} {'other run':>10} {'drift':>8}"
        f" {'hit run':>8} {'drift':>6} {'hit share':>10} {'all share':>10}"
    )
    print(header)
    print("-" * len(header))
    results = {}
    for names in (("toolschema",), ("toolorder", "toolschema")):
        rounds = [replay(names, requests, args.memo_size) for _ in range(args.rounds)]
        best = min(rounds, key=lambda r: r.run_seconds + r.decide_seconds)
        results[names] = best
        others = best.requests - best.hits
        print(
            f"{'[' + ', '.join(names) + ']':<24} {best.distinct:>8} {best.changes_within:>8}"
            f" {(best.run_seconds - best.hit_run_seconds) / others * 1e3:>7.2f} ms"
            f" {(best.decide_seconds - best.hit_decide_seconds) / others * 1e3:>5.2f} ms"
            f" {best.hit_run_seconds / best.hits * 1e6:>5.0f} us"
            f" {best.hit_decide_seconds / best.hits * 1e6:>3.1f} us"
            f" {min(r.hit_decide_seconds / r.hit_run_seconds for r in rounds) * 100:>9.2f}%"
            f" {min(r.decide_seconds / r.run_seconds for r in rounds) * 100:>9.2f}%"
        )
    print()
    plain, ordered = results[("toolschema",)], results[("toolorder", "toolschema")]
    print(
        "distinct: catalogues the upstream saw (prompt-cache prefixes); changes: requests whose"
        " catalogue differed from their session's previous one upstream"
    )
    print(
        f"toolorder: {plain.distinct} -> {ordered.distinct} distinct catalogues,"
        f" {plain.changes_within} -> {ordered.changes_within} changes within sessions"
    )
    kinds = ", ".join(f"{k} {plain.kinds[k]}" for k in drift.KINDS)
    print(f"client drift (the same with and without toolorder): {kinds}")
    print(f"claude_code_tool_search_off advised on {plain.advised} of {len(requests)} requests")
    if args.workers > 1:
        shared_report(args, requests)
    print(
        f"hit: the {plain.hits} memo hits without a change (a session's usual request); other:"
        " the rest (new catalogues, read once; changes, classified). run: Pipeline.run per"
        " request; drift: what drift tracking and the advisories add to it; share: drift / run"
        " (goal < 3 % on the usual request)"
    )


def shared_report(args: argparse.Namespace, requests: Sequence[Request]) -> None:
    """The same replay alone and over `args.workers` trackers on one store, alternated per
    round so that both see the same machine; then the buffer budgets."""
    names = ("toolschema",)
    workers = args.workers
    runs: dict[str, list[Result]] = {"one process": [], "apart": [], "shared": []}
    with tempfile.TemporaryDirectory(prefix="toolslim-drift-bench-") as name:
        folder = Path(name)
        for _ in range(args.rounds):
            runs["one process"].append(replay(names, requests, args.memo_size))
            runs["apart"].append(replay(names, requests, args.memo_size, workers))
            runs["shared"].append(replay(names, requests, args.memo_size, workers, folder))
        best = {label: min(results, key=decide_time) for label, results in runs.items()}
        print()
        print(
            f"[toolschema], request i on worker i mod {workers} (best of {args.rounds} rounds"
            f" each): one process; {workers} workers apart (each its own sessions, as before"
            f" issue 23); {workers} workers sharing one store"
        )
        per = 1e6 / len(requests)
        for label, result in best.items():
            print(
                f"  {label:<12} drift {result.decide_seconds * per:>6.1f} us per request"
                f" ({result.decide_seconds / result.run_seconds * 100:>5.2f}% of Pipeline.run),"
                f" on a memo hit {hit_drift(result):>5.1f} us"
                f" ({result.hit_decide_seconds / result.hit_run_seconds * 100:.2f}%);"
                f" changes {dict(result.kinds)}"
            )
        shared, apart = best["shared"], best["apart"]
        print(
            f"  sharing adds {hit_drift(shared) - hit_drift(apart):.1f} us to a memo hit's drift"
            f" ({hit_drift(shared) / hit_drift(apart):.2f}x); the changes found equal one"
            f" process's: {dict(shared.kinds) == dict(best['one process'].kinds)}"
        )
        budget_report(folder)


def decide_time(result: Result) -> float:
    return result.hit_decide_seconds / max(1, result.hits)


def hit_drift(result: Result) -> float:
    """Microseconds drift adds to a memo hit without a change (a session's usual request)."""
    return result.hit_decide_seconds / max(1, result.hits) * 1e6


def budget_report(folder: Path, requests: int = 200_000) -> None:
    """An 80 KB body's takes (two chunks) and give, one process's budget and the host's."""
    path = folder / budget.FILE
    budget.HostBudget.create(path)
    host = budget.HostBudget(path, 256 << 20)
    local = budget.BufferBudget(256 << 20)
    timings = {}
    for label, held in (("one process", local), ("host (workers)", host)):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(requests):
                held.take(65536)
                held.take(16384)
                held.give(81920)
            best = min(best, time.perf_counter() - started)
        timings[label] = best / requests * 1e6
    host.close()
    print(
        "buffer budget per 80 KB request (2 takes, 1 give): "
        + ", ".join(f"{label} {us:.2f} us" for label, us in timings.items())
    )


if __name__ == "__main__":
    main()
