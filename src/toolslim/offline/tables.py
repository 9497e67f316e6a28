"""The text of `toolslim report`: one aligned table of every file's savings, the totals across
files, the per-tool schema tokens, the tools and tokens per server and the component outcomes
(pure: values in, text out)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, get_args

from toolslim.core.entry import Outcome

PERCENTILES = (50, 90, 99)
LOSSY = "toolbudget"  # the one component that changes what the model is told


def render(summaries: Sequence[dict[str, Any]], total: dict[str, Any]) -> str:
    """The report as text: one table of every file's savings, the totals, then the per-tool
    schema tokens, the tools and tokens per server and the component outcomes of every file."""
    first = summaries[0]
    caption = [
        "Savings per request: means over each file's requests, in tiktoken cl100k_base tokens.",
        "Break-even: warm requests until the saving repays the one cache write it causes"
        f" (r={first['cache_read_multiplier']:g}, w={first['cache_write_multiplier']:g}).",
    ]
    sections = [
        [
            *caption,
            "",
            *_table(SAVINGS_COLUMNS, [_savings_row(s) for s in summaries], "<" + ">" * 9),
        ],
        _totals(total),
        ["Per-tool schema tokens (each tool of each request)", "", *_tool_table(summaries)],
    ]
    servers = _server_rows(summaries)
    if servers and total["files"] > 1:  # then the servers over every request of every file
        servers += _server_rows([{"file": f"all {total['files']} files", **total}])
    if servers:
        sections.append(
            [
                "Per server: the MCP server a tool's name names, else builtin"
                " (means per request; calls: in all, as captured)",
                "",
                *_table(SERVER_COLUMNS, servers, "<<>>>>>"),
            ]
        )
    components = _component_rows(summaries)
    if components:
        sections.append(["Components", "", *_table(COMPONENT_COLUMNS, components, "<<>>><")])
    return "\n\n".join("\n".join(lines) for lines in sections)


SAVINGS_COLUMNS = (
    "file",
    "requests",
    "changed",
    "tools",
    "deferred",
    "catalogue tokens",
    "saved",
    "% of input",
    "deferred saved",
    "break-even",
)
TOOL_COLUMNS = ("file", "stage", "tools", *(f"p{p}" for p in PERCENTILES), "max")
COMPONENT_COLUMNS = ("file", "component", "applied", "skipped", "error", "skip reasons")
SERVER_COLUMNS = ("file", "server", "tools", "deferred", "tokens", "% of input", "calls")


def _savings_row(summary: dict[str, Any]) -> list[str]:
    even = summary["break_even_requests"]
    return [
        summary["file"],
        _integer(summary["requests"]),
        _integer(summary["requests_changed"]),
        _mean(summary["tools_per_request"]),
        _mean(summary["deferred_tools_per_request"]),
        f"{_integer(summary['catalogue_tokens_before'])} -> "
        f"{_integer(summary['catalogue_tokens_after'])}",
        _integer(summary["tokens_saved_per_request"]),
        _percent(summary["saved_percent_of_input"]),
        _integer(summary["deferred_tokens_saved_per_request"]),
        # The first warm request by which the saving has paid for the cache write.
        "never" if even is None else _integer(math.ceil(even)),
    ]


def _totals(total: dict[str, Any]) -> list[str]:
    files = total["files"]
    rows = [
        ("requests", f"{total['requests']:,} ({total['requests_changed']:,} changed)"),
        (
            "catalogue tokens before -> after, all requests",
            f"{_integer(total['catalogue_tokens_before'])} -> "
            f"{_integer(total['catalogue_tokens_after'])}",
        ),
        ("tokens saved per request", _integer(total["tokens_saved_per_request"])),
        ("% of request input tokens", _percent(total["saved_percent_of_input"])),
        (
            "deferred tokens saved per request (not in the prompt until loaded)",
            _integer(total["deferred_tokens_saved_per_request"]),
        ),
    ]
    width = max(len(label) for label, _ in rows)
    value_width = max(len(value) for _, value in rows)
    lines = [f"Totals over {files} file{'s' if files != 1 else ''}", ""]
    lines += [f"  {label:<{width}}  {value:>{value_width}}" for label, value in rows]
    return lines


def _tool_table(summaries: Sequence[dict[str, Any]]) -> list[str]:
    rows = []
    for summary in summaries:
        tool_tokens = summary["tool_tokens"]
        name = summary["file"]
        for side in ("before", "after", f"after_without_{LOSSY}"):
            if side not in tool_tokens:
                continue
            values = tool_tokens[side]
            cells = [_integer(values[f"p{p}"]) for p in PERCENTILES] + [_integer(values["max"])]
            rows.append([name, side.replace("_", " "), _integer(tool_tokens["tools"]), *cells])
            name = ""  # the file is named on its first row only
    return _table(TOOL_COLUMNS, rows, "<<>>>>>")


def _server_rows(summaries: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for summary in summaries:
        name = summary["file"]
        for server in summary["servers"]:
            rows.append(
                [
                    name,
                    server["server"],
                    _mean(server["tools_per_request"]),
                    _mean(server["deferred_tools_per_request"]),
                    f"{_integer(server['tokens_before_per_request'])} -> "
                    f"{_integer(server['tokens_after_per_request'])}",
                    _percent(server["percent_of_input"]),
                    _integer(server["calls"]),
                ]
            )
            name = ""  # the file is named on its first row only
    return rows


def _component_rows(summaries: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for summary in summaries:
        name = summary["file"]
        for component, counts in summary["components"].items():
            reasons = ", ".join(f"{r} {n}" for r, n in counts["skip_reasons"].items())
            counted = [_integer(counts[outcome]) for outcome in get_args(Outcome)]
            rows.append([name, component, *counted, reasons])
            name = ""
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """An aligned table: `align` says per column `<` (text, left) or `>` (numbers, right)."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [
            cell.ljust(width) if side == "<" else cell.rjust(width)
            for cell, width, side in zip(row, widths, align, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _integer(value: float | None) -> str:
    """A count, rounded to the nearest integer, with thousands separators."""
    return "-" if value is None else f"{round(value):,}"


def _mean(value: float) -> str:
    """A mean count of tools: a whole number as one, else to one decimal."""
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"
