"""A clock tests set by hand, and Stats that counted a realistic mixed batch through it: the
fakes the stats, fleet, metrics and dashboard tests share."""

from __future__ import annotations

import json
from typing import Any

from toolslim.core.facts import CatalogueFacts
from toolslim.core.pipeline import ComponentRun, RunReport, skipped_report
from toolslim.observe.drift import Change, identity_of
from toolslim.observe.stats import Stats
from toolslim.wire.usage import Usage


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def applied(name: str = "toolschema", before: int = 1000, after: int = 600, **kw: Any) -> RunReport:
    run = ComponentRun(name, "applied", bytes_before=before, bytes_after=after, **kw)
    return RunReport((b"{}",), (run,))


def catalogue(*names: str) -> CatalogueFacts:
    """The facts of a catalogue of tools with these names."""
    tools = [{"name": name, "input_schema": {"type": "object", "title": name}} for name in names]
    return CatalogueFacts(json.dumps(tools).encode())


# The catalogues the mixed batch's requests carry: Claude Code's, and two OpenAI Chat ones.
CLAUDE = catalogue("Read", "Bash", "mcp__git__git_log")


CHAT = catalogue("read_file")


CHAT_OTHER = catalogue("read_file", "write_file")


def record_mixed_batch(stats: Stats, clock: FakeClock) -> None:
    """A realistic mix: compacted, nothing to strip, not JSON, GET, too large, upstream errors,
    a streamed response with usage, a component error. Used by the metrics and dashboard tests.
    """
    compacted = RunReport(
        (b"{}",),
        (
            ComponentRun(
                "toolschema",
                "applied",
                tools_seen=25,
                tools_changed=23,
                removed={"$schema": 25, "title": 140, "examples": 9},
                bytes_before=65_536,
                bytes_after=48_012,
            ),
        ),
        memo_misses=1,
    )
    memo_hit = RunReport((b"{}",), compacted.runs, memo_hits=1)
    # (seconds after start, upstream, api, status, report, tokens before/after, usage)
    batch: list[tuple[float, str, str, int, RunReport, tuple[int, int] | None, Usage | None]] = [
        (0, "anthropic", "anthropic", 200, compacted, (16_000, 12_100), Usage(3, 410, 0, 21_000)),
        (4, "anthropic", "anthropic", 200, memo_hit, (16_000, 12_100), Usage(5, 388, 21_000, 0)),
        (12, "anthropic", "anthropic", 200, memo_hit, (16_000, 12_100), Usage(2, 95, 21_000, 640)),
        (
            15,
            "openai",
            "openai-chat",
            200,
            RunReport((b"{}",), (ComponentRun("toolschema", "skipped", "nothing_to_strip", 4),)),
            None,
            Usage(1_200, 300, 0, 0),
        ),
        (
            21,
            "openai",
            "openai-responses",
            400,
            skipped_report(b"x", ["toolschema"], "not_json"),
            None,
            None,
        ),
        (33, "gemini", "gemini", 200, skipped_report(b"", ["toolschema"], "no_body"), None, None),
        (
            34,
            "anthropic",
            "anthropic",
            502,
            skipped_report(b"", ["toolschema"], "too_large"),
            None,
            None,
        ),
        (
            47,
            "openai",
            "openai-chat",
            504,
            RunReport((b"{}",), (ComponentRun("toolschema", "error", "ValueError", 3),)),
            None,
            None,
        ),
        (58, "anthropic", "anthropic", 200, memo_hit, (16_000, 12_100), Usage(7, 1_024, 21_000, 0)),
        (61, "anthropic", "anthropic", 429, memo_hit, (16_000, 12_100), None),
    ]
    # The catalogue each request carried, by its offset; the others carried none.
    carries = {0: CLAUDE, 4: CLAUDE, 12: CLAUDE, 15: CHAT, 47: CHAT_OTHER, 58: CLAUDE, 61: CLAUDE}
    start = clock.now
    for offset, upstream, api, status, report, tokens, usage in batch:
        clock.now = start + offset
        stats.record_pipeline(report)
        carried = None
        if (facts := carries.get(offset)) is not None:
            carried = (api, identity_of((facts,)))
            stats.record_catalogue(api, carried[1], (facts,))
        saved = stats.record_tokens({"toolschema": tokens} if tokens else {}, carried)
        stats.record_request(
            upstream=upstream,
            api=api,
            status=status,
            bytes_in=70_000,
            bytes_out=70_000 - report.runs[0].bytes_saved,
        )
        stats.record_usage(usage, saved)
    stats.record_upstream_error("connect")
    stats.record_upstream_error("timeout")
    stats.record_client_disconnect()
    stats.stream_opened()
    stats.stream_opened()
    stats.stream_closed()
    for ms in (0.12, 0.2, 0.31, 0.45, 0.5, 0.8, 1.4, 2.2, 7.5, 40.0):
        stats.observe_overhead(ms / 1000)
    for s in (0.35, 0.6, 0.9, 1.7, 2.4, 4.8):
        stats.observe_ttfb(s)
    # A late MCP server in one session, a reorder in another; Claude Code without tool search.
    for change in (
        Change(start + 12, "5e55a1", "anthropic", "added", ("mcp__git__git_log",), ("git",), 640),
        Change(start + 58, "5e55b2", "anthropic", "order_only", ("Read", "Bash"), (), 21_000),
    ):
        stats.record_catalogue_change(change)
    stats.track_drift_sessions(lambda: 2)
    stats.record_advice("claude_code_tool_search_off", 5_186)
    stats.record_websocket_refused()
    clock.now = start + 65


def mixed_stats() -> tuple[Stats, FakeClock]:
    clock = FakeClock()
    stats = Stats(["toolschema"], clock=clock, memo_gauges=lambda: (3, 256))
    record_mixed_batch(stats, clock)
    return stats, clock
