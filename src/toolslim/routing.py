"""PURE. Where a request goes: the configured upstream, the target on it, the API it speaks,
and which headers travel with it.

Must not import aiohttp or prometheus_client: the shell hands plain values in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from multidict import CIMultiDict

from toolslim.catalog import Api
from toolslim.config import Settings, Upstream

# RFC 9110 section 7.6.1: never forwarded, in either direction (plus whatever Connection lists).
HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
)
# Request headers rebuilt for the upstream: Host and Content-Length by the client library;
# Expect was already answered by this server (it has the whole body).
REQUEST_REBUILT: Final = HOP_BY_HOP | {"host", "content-length", "expect"}

# Path prefixes that name an API by themselves (the upstream they imply, the API).
_API_PATHS: Final[tuple[tuple[str, Api], ...]] = (
    ("/v1/messages", "anthropic"),
    ("/v1/responses", "openai-responses"),
)
_GEMINI_FIRST: Final = frozenset({"v1beta", "v1alpha"})
_UPSTREAM_OF: Final[Mapping[Api, str]] = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
}


@dataclass(slots=True)  # one per request: not frozen, see pipeline.RunReport
class Route:
    """Where a request goes: the upstream, the target appended to its base URL, the API."""

    upstream: Upstream
    target: str  # raw path and query, prefix stripped
    api: Api


def route_request(target: str, headers: Mapping[str, str], settings: Settings) -> Route:
    """Pick the upstream for an origin-form request target (issue 3's routing table)."""
    path = target.partition("?")[0]
    upstreams = settings.upstreams
    first = path[1:].partition("/")[0]
    name: str | None = None
    if first in upstreams:  # /NAME/... picks upstream NAME; the prefix is stripped
        name = first
        target = target[len(first) + 1 :]
        if not target.startswith("/"):
            target = "/" + target
        path = target.partition("?")[0]
    api = api_of(path)
    if name is None:
        if first in _GEMINI_FIRST:
            name = "gemini"
        elif api in _UPSTREAM_OF:
            name = _UPSTREAM_OF[api]
        elif first == "v1":
            anthropic = "anthropic-version" in headers or "x-api-key" in headers
            name = "anthropic" if anthropic else "openai"
        else:
            name = settings.default_upstream
    if name == "gemini":
        # Gemini's OpenAI-compatible endpoint answers in OpenAI's shape (usage, errors).
        api = "openai-chat" if path.endswith("/chat/completions") else "gemini"
    return Route(upstreams[name], target, api)


def api_of(path: str) -> Api:
    """The API a path (without its query) belongs to, by its shape alone."""
    if path == "/v1/chat/completions":
        return "openai-chat"
    for prefix, api in _API_PATHS:
        if path.startswith(prefix):
            return api
    return "other"


def drop_hop_by_hop(headers: CIMultiDict[str], drop: frozenset[str]) -> CIMultiDict[str]:
    """Remove, in place, the hop-by-hop headers: `drop`, Proxy-*, and those Connection names."""
    listed = [t.strip() for v in headers.getall("Connection", ()) for t in v.split(",")]
    for name in drop:
        if name in headers:
            del headers[name]
    for name in listed:
        headers.popall(name, None)
    for name in [name for name in headers if name[:6].lower() == "proxy-"]:
        headers.popall(name, None)
    return headers
