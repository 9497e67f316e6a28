"""The tool ledger's families of /metrics, from a snapshot's `tools` section (docs/stats.md):
per MCP server (summed over clients) and tier; per tool only with `ledger.tool_metrics`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from toolslim.observe.ledger.series import series


def families(tools: Mapping[str, Any]) -> list[Metric]:
    """Every family of ledger/series.py's series, as Prometheus families."""
    made: list[Metric] = []
    for kind, name, doc, labels, values in series(tools, tools["tool_metrics"]):
        family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
            name, doc, labels=labels
        )
        for label_values, value in values:
            family.add_metric(list(label_values), value)
        made.append(family)
    return made
