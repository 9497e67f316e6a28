"""`toolslim tools`: the tool ledger from its state file, no server needed: per client and MCP
server what its tools cost, the unused ones, and what turning each unused server off saves."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from toolslim.observe.ledger import render
from toolslim.observe.ledger.book import DAY_SECONDS, day_of
from toolslim.observe.ledger.state import StateError, StateFile

_SINCE = re.compile(r"(\d+)d|(\d{4}-\d{2}-\d{2})")
SERVER_COLUMNS = (
    "client",
    "server",
    "tools",
    "tokens/request",
    "% of input",
    "calls",
    "unused",
    "cost (tokens)",
    "USD",
    "USD today",
)
UNUSED_COLUMNS = ("client", "server", "tool", "requests", "sessions", "tokens")
OFF_COLUMNS = ("client", "server", "saves tokens/request", "saves USD/request", "saves USD/day")


class UsageError(ValueError):
    """The command line asks for something the command cannot do (the message says why)."""


def first_day(since: str | None, now: float) -> str:
    """The first UTC day `--since` keeps: `7d` is today and the 6 days before, a date is
    itself; None keeps every day."""
    if since is None:
        return ""
    match = _SINCE.fullmatch(since.strip())
    if match is None or match.group(1) == "0":
        raise UsageError(f"--since expects Nd (days, at least 1) or YYYY-MM-DD, got {since!r}")
    if match.group(2):
        return match.group(2)
    return day_of(now - (int(match.group(1)) - 1) * DAY_SECONDS)


def run_tools(
    path: str | None,
    *,
    since: str | None,
    as_json: bool,
    unused_after: tuple[int, int],
    out: TextIO,
    err: TextIO,
    now: float | None = None,
) -> int:
    """Print the ledger of the state file at `path`; the exit status."""
    now = time.time() if now is None else now
    try:
        if path is None:
            raise UsageError("no state file: pass --state FILE (or set state_file)")
        if not Path(path).is_file():
            raise UsageError(f"no state file at {path}: `toolslim serve` writes it there")
        state = StateFile(path)
        try:
            export = state.load(first_day(since, now))
        finally:
            state.close()
    except (UsageError, StateError) as exc:
        print(f"toolslim tools: {exc}", file=err)
        return 2
    requests, sessions = unused_after
    tools = render.render(export, now, min_requests=requests, min_sessions=sessions)
    if as_json:
        json.dump(tools, out, indent=2)
        out.write("\n")
    else:
        out.write(text(tools) + "\n")
    return 0


def text(tools: dict[str, Any]) -> str:
    """The ledger as aligned tables of integers (USD to the cent)."""
    share = tools["input_tokens_per_request"]
    rows = [
        [
            row["client"],
            row["server"],
            _integer(row["tools"]),
            _integer(row["tokens_per_request"]),
            f"{100 * row['tokens_per_request'] / share:.1f}%" if share else "-",
            _integer(row["calls"]),
            _integer(row["unused_tools"]),
            _integer(row["cost"]["equivalents"]),
            _usd(row["cost"]["usd"]),
            _usd(row["cost_today"]["usd"]),
        ]
        for row in tools["servers"]
    ]
    sections = [
        [
            "What your tools cost, per client and MCP server (cost in input-token equivalents:",
            "cache reads and writes at their multipliers; USD at the models' published prices)",
            "",
            *aligned(SERVER_COLUMNS, rows, "<<>>>>>>>>"),
        ]
    ]
    off = [
        [
            entry["client"],
            entry["server"],
            _integer(entry["tokens_per_request"]),
            _usd(entry["cost_per_request"]["usd"], 4),
            _usd(entry["cost_per_day"]["usd"]),
        ]
        for entry in tools["advice"]
    ]
    if off:
        fixes = [f"  {entry['fix']}" for entry in tools["advice"]]
        sections.append(
            [
                "MCP servers none of whose tools was called: turning each off saves",
                "",
                *aligned(OFF_COLUMNS, off, "<<>>>"),
                "",
                *fixes,
            ]
        )
    unused = [
        [
            item["client"],
            item["server"],
            item["tool"],
            _integer(item["requests"]),
            _integer(item["sessions"]),
            _integer(item["tokens"]),
        ]
        for item in tools["unused"]
    ]
    if unused:
        sections.append(
            ["Unused tools (offered, never called)", "", *aligned(UNUSED_COLUMNS, unused, "<<<>>>")]
        )
    unknown, unpriced = tools["unknown_calls"], tools["unpriced"]
    sections.append(
        [
            f"Calls to tools the request did not offer: {unknown['total']:,}",
            f"Model calls without a price (USD not counted): {unpriced['requests']:,}",
        ]
    )
    return "\n\n".join("\n".join(lines) for lines in sections)


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """An aligned table: `align` says per column `<` (text, left) or `>` (numbers, right)."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(width) if side == "<" else cell.rjust(width)
            for cell, width, side in zip(row, widths, align, strict=True)
        ).rstrip()
        for row in (header, *rows)
    ]


def _integer(value: float) -> str:
    return f"{round(value):,}"


def _usd(value: float, places: int = 2) -> str:
    return f"${value:,.{places}f}"
