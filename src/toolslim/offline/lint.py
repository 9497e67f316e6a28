"""`toolslim lint`: the lint rules (core/lint) on tool catalogues in files, for the people who
write tools. Reads request bodies, `--capture` JSON Lines, bare tool arrays and MCP
`tools/list` results; prints one aligned line per finding; no network, no aiohttp.

Exit status: 2 when a file cannot be read as any of those, else 1 when a finding is
`rejected`, else 0: something an MCP server's CI can run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import orjson

from toolslim.core.lint import PROVIDERS, Finding, Provider, lint, shape_of
from toolslim.core.schema import JSON
from toolslim.offline.report import Requests, catalogues, read_file

OK, REJECTED, UNREADABLE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Found:
    """A finding in a file."""

    file: str
    finding: Finding

    def as_dict(self) -> dict[str, Any]:
        f = self.finding
        return {
            "file": self.file,
            "tool": f.tool,
            "server": f.server,
            "provider": f.provider,
            "rule": f.rule,
            "severity": f.severity,
            "detail": f.detail,
            "message": f.message,
            "fix": f.fix,
        }


def tool_lists(path: str) -> list[list[JSON]] | str:
    """The tool catalogues in the file at `path`, or why it cannot be read as holding any."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, list):
        return [document]  # a bare tools array
    if isinstance(document, dict) and not ("v" in document and "body_sha256" in document):
        found = _mcp_tools(document) or catalogues(document)
        return found or "it is a JSON object with no tools"
    requests = read_file(path)  # JSON Lines: a capture
    if not isinstance(requests, Requests):
        return requests.why
    found = []
    seen: set[bytes] = set()
    for body in requests.bodies:
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            continue
        for tools in catalogues(document):
            key = orjson.dumps(tools)  # a session sends one catalogue many times: lint it once
            if key not in seen:
                seen.add(key)
                found.append(tools)
    return found


def _mcp_tools(document: dict[str, JSON]) -> list[list[JSON]]:
    """The tools of an MCP `tools/list` result, bare or inside its JSON-RPC response."""
    result = document.get("result")
    if isinstance(result, dict):
        document = result
    tools = document.get("tools")
    if isinstance(tools, list) and tools and shape_of(tools) == "mcp":
        return [tools]
    return []


def findings(path: str, providers: Sequence[Provider]) -> Iterator[Found] | str:
    """Each finding of the file's catalogues for each provider, or why the file is unreadable."""
    lists = tool_lists(path)
    if isinstance(lists, str):
        return lists
    return (
        Found(path, finding)
        for tools in lists
        for provider in providers
        for finding in lint(tools, shape_of(tools), provider, offline=True)
    )


def run(
    paths: Sequence[str], providers: Sequence[str], as_json: bool, out: TextIO, err: TextIO
) -> int:
    """`toolslim lint`: print the findings of every file; the exit status (see the module)."""
    chosen: tuple[Provider, ...] = tuple(p for p in PROVIDERS if p in providers) or PROVIDERS
    found: list[Found] = []
    status = OK
    for path in paths:
        result = findings(path, chosen)
        if isinstance(result, str):
            print(f"toolslim lint: {path}: {result}", file=err)
            status = UNREADABLE
            continue
        found.extend(result)
    if as_json:
        out.write(orjson.dumps([f.as_dict() for f in found], option=orjson.OPT_INDENT_2).decode())
        out.write("\n")
    else:
        for line in aligned(found):
            print(line, file=out)
    rejected = sum(f.finding.severity == "rejected" for f in found)
    print(
        f"toolslim lint: {len(found)} findings ({rejected} rejected,"
        f" {len(found) - rejected} degraded) in {len(paths)} file{'' if len(paths) == 1 else 's'}",
        file=err,
    )
    if status == OK and rejected:
        status = REJECTED
    return status


def aligned(found: Sequence[Found]) -> list[str]:
    """One line per finding, its columns aligned: file, tool, server, provider, rule and
    severity, then what is wrong and the fix."""
    rows = [
        (
            _cell(f.file),
            _cell(f.finding.tool),
            _cell(f.finding.server),
            f.finding.provider,
            f"{f.finding.rule} ({f.finding.severity})",
            _cell(f"{f.finding.detail}. {f.finding.fix}"),
        )
        for f in found
    ]
    if not rows:
        return []
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[5]])
        for row in rows
    ]


def _cell(text: str) -> str:
    """`text` with what a terminal would act on (a newline, an escape) written as escapes: tool
    names are whatever a server sent."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
