"""What lint adds to a request, as ratios measured in this one process (issue 24).

For Claude Code's catalogue (captures/claude-code.anthropic.json, no finding) and the same
with one MCP tool whose input_schema has a root anyOf (one finding, counted on every request),
at the capture's body size:

- memo hit: `Pipeline(["toolschema"]).run(body)` with the catalogue memoized, alone, against
  the same followed by what `transform` and `Ledger.transformed` add for lint (the memo-miss
  check, `Linter.request` on its catalogues): lint's share of a memo hit, ~1.00x;
- first sight: `lint_raw` of the catalogue bytes (what a new catalogue costs once), against a
  memo miss of the same body (the compaction it rides along with).

The two variants of each pair alternate round by round and the median of each is taken, so a
shared, noisy machine moves both alike. Run: `python bench/lint_bench.py [--rounds N]`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from toolslim.core.lint import lint_raw
from toolslim.core.pipeline import Pipeline
from toolslim.observe.health import Linter
from toolslim.observe.stats import Stats

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "claude-code.anthropic.json"
ROOT_ANY_OF = {
    "name": "mcp__gitlab__get_resource",
    "description": "Get a CI catalog resource by id or by path.",
    "input_schema": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "path": {"type": "string"}},
        "anyOf": [{"required": ["id"]}, {"required": ["path"]}],
    },
}


def bodies() -> dict[str, bytes]:
    body = json.loads(CAPTURE.read_bytes())
    with_finding = {**body, "tools": [*body["tools"], ROOT_ANY_OF]}
    return {"clean": orjson.dumps(body), "one finding": orjson.dumps(with_finding)}


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def pair(
    a: Callable[[], object], b: Callable[[], object], rounds: int, calls: int
) -> tuple[float, float]:
    """Median seconds per call of `a` and of `b`, alternating round by round."""
    times_a, times_b = [], []
    for _ in range(rounds):
        times_a.append(per_call(a, calls))
        times_b.append(per_call(b, calls))
    return statistics.median(times_a), statistics.median(times_b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the linter's first-sight WARNINGs
    print(f"{'catalogue':<12} {'hit':>9} {'hit+lint':>9} {'ratio':>6}   "
          f"{'miss':>9} {'lint once':>9} {'ratio':>6}")  # fmt: skip
    for name, body in bodies().items():
        measure(name, body, args.rounds, args.calls)


def measure(name: str, body: bytes, rounds: int, calls: int) -> None:
    pipeline = Pipeline(["toolschema"])
    linter = Linter(Stats([]).health)
    report = pipeline.run(body, "anthropic")  # memoized from here on
    linter.request("anthropic", report.catalogues, "POST", "/v1/messages")
    raw = orjson.dumps(json.loads(body)["tools"])

    def hit() -> object:
        return pipeline.run(body, "anthropic")

    def hit_and_lint() -> object:  # what transform() and Ledger.transformed add
        run = pipeline.run(body, "anthropic")
        if run.memo_misses:
            for facts in run.catalogues:
                facts.findings("anthropic")
        return linter.request("anthropic", run.catalogues, "POST", "/v1/messages")

    def miss() -> object:
        pipeline.memo.clear()
        return pipeline.run(body, "anthropic")

    def lint_once() -> object:
        return lint_raw(raw, "anthropic")

    plain, linted = pair(hit, hit_and_lint, rounds, calls)
    compacted, first = pair(miss, lint_once, rounds, max(1, calls // 20))
    print(
        f"{name:<12} {plain * 1e6:>7.1f}µs {linted * 1e6:>7.1f}µs {linted / plain:>5.2f}x"
        f"   {compacted * 1e6:>7.0f}µs {first * 1e6:>7.0f}µs {first / compacted:>5.2f}x"
    )


if __name__ == "__main__":
    main()
