"""The tool-health families of /metrics, from a snapshot's `lint` section (docs/lint.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric


def families(lint: Mapping[str, Any]) -> list[Metric]:
    """Requests carrying a finding (in all, by rule and severity) and upstream rejections."""
    flagged = CounterMetricFamily(
        "toolslim_lint_flagged_requests",
        "Requests whose catalogue carries at least one lint finding.",
        value=lint["requests"],
    )
    requests = CounterMetricFamily(
        "toolslim_lint_requests",
        "Requests whose catalogue breaks a lint rule, by rule and severity (docs/lint.md).",
        labels=("rule", "severity"),
    )
    rejections = CounterMetricFamily(
        "toolslim_lint_upstream_rejections",
        "Upstream 400s to requests with a catalogue, by the lint rule that explains them,"
        " or unexplained.",
        labels=("rule",),
    )
    for rule, counts in lint["rules"].items():
        requests.add_metric([rule, counts["severity"]], counts["requests"])
        rejections.add_metric([rule], counts["upstream_rejections"])
    rejections.add_metric(["unexplained"], lint["upstream_rejections"]["unexplained"])
    return [flagged, requests, rejections]
