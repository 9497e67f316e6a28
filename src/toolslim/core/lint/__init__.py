"""PURE. Tool health: which tool of a catalogue a provider will refuse (or quietly change),
which MCP server it comes from, which rule it breaks and how to fix it. Lint only observes:
nothing here changes a catalogue.

`rules` holds the table, `view` reads a catalogue as a provider would, `schemas` what the rules
read inside a schema. Must not import aiohttp, prometheus_client or logging.
"""

from __future__ import annotations

import orjson

from toolslim.core.lint.rules import RULES, SEVERITIES, Finding, Rule, Severity, check
from toolslim.core.lint.view import PROVIDER_OF, PROVIDERS, Provider, Shape, View, read, shape_of
from toolslim.core.schema import JSON, TooDeep

__all__ = [
    "PROVIDERS",
    "PROVIDER_OF",
    "RULES",
    "SEVERITIES",
    "Finding",
    "Provider",
    "Rule",
    "Severity",
    "Shape",
    "View",
    "lint",
    "lint_raw",
    "read",
    "shape_of",
]


def lint(
    catalogue: list[JSON], shape: Shape, provider: Provider, *, offline: bool = False
) -> tuple[Finding, ...]:
    """The findings of `catalogue`, a tool list sent in `shape`, for `provider`."""
    return check(read(catalogue, shape, provider), offline=offline)


def lint_raw(raw: bytes, api: str) -> tuple[Finding, ...]:
    """The proxy's findings for the catalogue bytes `raw` sent to `api` (a routing API name);
    () for an API without a provider, or bytes that are not a tool list. Never raises."""
    provider = PROVIDER_OF.get(api)
    if provider is None:
        return ()
    try:
        catalogue = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ()
    if not isinstance(catalogue, list):
        return ()
    try:
        return lint(catalogue, api, provider)  # type: ignore[arg-type]  # an API is a Shape
    except (TooDeep, RecursionError):
        return ()
    except Exception:  # lint only observes: a rule that trips on odd input costs no request
        return ()
