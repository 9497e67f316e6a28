"""PURE. The paths of each API the proxy knows, in one table: the path that names an API by
itself, the upstream that path implies, and how a call that asks a model for an answer ends.

`routing` reads it to route, `observe.exchange` to tell model calls apart, `config.checks` for
the names an upstream may not take. Must not import aiohttp or prometheus_client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from toolslim.core.catalog import Api


@dataclass(frozen=True, slots=True)
class ApiPaths:
    """How one API's paths look. `names` is the path (without query, prefix stripped) that
    names the API by itself: the whole path when `exact`, else its start; "" when only the
    upstream tells it. `model_calls` are how the path of a call that asks a model for an
    answer ends: its response reports the usage a provider bills."""

    upstream: str
    names: str
    model_calls: tuple[str, ...]
    exact: bool = False


APIS: Final[Mapping[Api, ApiPaths]] = MappingProxyType(
    {
        "anthropic": ApiPaths("anthropic", "/v1/messages", ("/v1/messages",)),
        # Gemini's OpenAI-compatible endpoint (/v1beta/openai/chat/completions) is this API.
        "openai-chat": ApiPaths(
            "openai", "/v1/chat/completions", ("/chat/completions",), exact=True
        ),
        "openai-responses": ApiPaths("openai", "/v1/responses", ("/v1/responses",)),
        "gemini": ApiPaths("gemini", "", (":generateContent", ":streamGenerateContent")),
    }
)

# The first path segment of the APIs' paths, and the upstream it implies by itself (None:
# `v1` is Anthropic's and OpenAI's both; the headers tell them apart, see routing).
VERSIONS: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "v1": None,
        "v1alpha": "gemini",
        "v1beta": "gemini",
    }
)

# How a model call's path ends, per API (prefix stripped, no query): what `exchange` asks.
MODEL_CALLS: Final[Mapping[Api, tuple[str, ...]]] = MappingProxyType(
    {api: paths.model_calls for api, paths in APIS.items()}
)


# The table as `api_of` reads it per request: whole paths first, then starts.
_WHOLE: Final = {paths.names: api for api, paths in APIS.items() if paths.names and paths.exact}
_STARTS: Final = tuple(
    (paths.names, api) for api, paths in APIS.items() if paths.names and not paths.exact
)


def api_of(path: str) -> Api:
    """The API a path (without its query) belongs to, by its shape alone."""
    api = _WHOLE.get(path)
    if api is not None:
        return api
    for start, api in _STARTS:
        if path.startswith(start):
            return api
    return "other"
