"""Offline compaction for `toolslim compact`: run a pipeline on one request body (or a bare
tools array) and count tokens synchronously."""

from __future__ import annotations

from toolslim.core.pipeline import Pipeline, RunReport, count_tokens
from toolslim.core.tokens import count_tokens as count

_WRAP_HEAD, _WRAP_TAIL = b'{"tools":', b"}"


def compact_input(
    pipeline: Pipeline, data: bytes
) -> tuple[bytes, RunReport, dict[str, tuple[int, int]]]:
    """(output bytes, report, tokens before/after per component) for a body or tools array.

    A bare array is wrapped as `{"tools": ...}` so it takes exactly the proxy's path; the
    wrapper is removed again, so the output is the array alone.
    """
    bare = data.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"["
    body = _WRAP_HEAD + data + _WRAP_TAIL if bare else data
    report = pipeline.run(body)
    tokens = count_tokens(report, count)
    if not report.changed(body):
        return data, report, tokens
    joined = report.body  # joins the pieces: once
    output = joined[len(_WRAP_HEAD) : -len(_WRAP_TAIL)] if bare else joined
    return output, report, tokens


def summary(report: RunReport, tokens: dict[str, tuple[int, int]]) -> str:
    """One line: tools, changed, bytes and tokens before -> after, and skip reasons if any."""
    if not report.runs:
        return "toolslim: empty pipeline, input passed through"
    parts = []
    for run in report.runs:
        if run.outcome == "applied":
            before, after = tokens.get(run.component, (0, 0))
            parts.append(
                f"{run.component}: applied, tools {run.tools_seen}, changed {run.tools_changed}, "
                f"bytes {run.bytes_before} -> {run.bytes_after}, tokens {before} -> {after}"
            )
        else:
            parts.append(
                f"{run.component}: {run.outcome} ({run.reason}), tools {run.tools_seen}, "
                f"changed {run.tools_changed}"
            )
    return "toolslim: " + "; ".join(parts)
