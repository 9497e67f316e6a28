"""PURE. Where a request goes: the configured upstream, the target on it, the API it speaks,
and which headers travel with it.

Must not import aiohttp or prometheus_client: the shell hands plain values in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from multidict import CIMultiDict

from toolslim.core.catalog import Api
from toolslim.wire.apis import APIS, VERSIONS, api_of

# RFC 9110 section 7.6.1: never forwarded, in either direction (plus whatever Connection lists).
HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"}
)
# Request headers rebuilt for the upstream: Host and Content-Length by the client library;
# Expect was already answered by this server (it has the whole body).
REQUEST_REBUILT: Final = HOP_BY_HOP | {"host", "content-length", "expect"}

# The tables as route_request reads them per request (plain dicts: a lookup through a
# MappingProxyType costs more).
_UPSTREAM_OF: Final[dict[Api, str]] = {api: paths.upstream for api, paths in APIS.items()}
_IMPLIED: Final = dict(VERSIONS)

# The paths the proxy answers itself, /NAME and below (proxy/admin.py registers a handler for
# each): never forwarded, so no upstream may be named after one (config.checks).
ADMIN_ROUTES: Final = ("dashboard", "healthz", "metrics", "readyz", "stats")


# A `.` or `..` segment (RFC 3986 section 3.3), its dots raw or percent-encoded, between
# separators that some upstream somewhere also splits on: `/`, `\\`, their encodings, and `;`
# (path parameters: `..;` is `..` to Tomcat-style servers). An upstream that resolves one
# would serve from outside the configured base path (RFC 3986 section 5.2.4).
_DOT_SEGMENT: Final = re.compile(
    r"(?:^|/|\\|%2f|%5c)(?:\.|%2e){1,2}(?=$|/|\\|%2f|%5c|;)", re.IGNORECASE
)
# The server decodes header bytes as UTF-8 with surrogateescape, so a byte that is not part
# of a UTF-8 sequence arrives as a lone surrogate; the client library writes UTF-8 and drops
# those (a credential would arrive altered).
_NOT_UTF8: Final = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True, slots=True)
class Upstream:
    """A named upstream base URL (scheme://host[:port][/base/path], no trailing slash), and the
    forward proxy its connections go through (None: direct)."""

    name: str
    url: str
    proxy: str | None = None


class Upstreams(Protocol):
    """What routing reads of the settings: the configured upstreams and the default one."""

    @property
    def upstreams(self) -> Mapping[str, Upstream]: ...

    @property
    def default_upstream(self) -> str: ...


@dataclass(slots=True)  # one per request: not frozen, see pipeline.RunReport
class Route:
    """Where a request goes: the upstream, the target appended to its base URL, the API."""

    upstream: Upstream
    target: str  # raw path and query, prefix stripped
    api: Api


def route_request(target: str, headers: Mapping[str, str], settings: Upstreams) -> Route:
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
        implied = _IMPLIED.get(first)
        if implied is not None:
            name = implied
        elif api != "other":
            name = _UPSTREAM_OF[api]
        elif first in _IMPLIED:
            anthropic = "anthropic-version" in headers or "x-api-key" in headers
            name = "anthropic" if anthropic else "openai"
        else:
            name = settings.default_upstream
    if name == "gemini":
        # Gemini's OpenAI-compatible endpoint answers in OpenAI's shape (usage, errors).
        api = "openai-chat" if path.endswith("/chat/completions") else "gemini"
    return Route(upstreams[name], target, api)


def signed(headers: Mapping[str, str]) -> bool:
    """Whether a signature covers the body (AWS SigV4, as Bedrock clients and gateways sign):
    rewriting it would make the upstream reject the request, so it goes on byte-identical."""
    if headers.get("Authorization", "")[:16].upper() == "AWS4-HMAC-SHA256":
        return True
    payload = headers.get("x-amz-content-sha256")
    return payload is not None and payload != "UNSIGNED-PAYLOAD"


def drop_hop_by_hop(headers: CIMultiDict[str], drop: frozenset[str]) -> CIMultiDict[str]:
    """Remove, in place, the hop-by-hop headers: `drop`, Proxy-*, and those Connection names."""
    listed = [t.strip() for v in headers.getall("Connection", ()) for t in v.split(",")]
    for name in drop:
        if name in headers:
            del headers[name]
    for name in listed:
        headers.popall(name, None)
    # The first letter rules out almost every name before a lowered copy is made (it runs
    # twice a request, over every header).
    for name in [n for n in headers if n[:1] in "pP" and n[:6].lower() == "proxy-"]:
        headers.popall(name, None)
    return headers


def refusal(target: str, headers: Iterable[tuple[str, str]]) -> str | None:
    """Why a request cannot be forwarded faithfully (its 400 says so), or None.

    A path with a dot-segment is refused: an upstream that resolves it would serve outside
    its base path. A header whose bytes are not UTF-8 is refused: it would not arrive exactly
    (obs-text that is UTF-8 arrives byte for byte).
    """
    path = target.partition("?")[0]
    if ("." in path or "%" in path) and _DOT_SEGMENT.search(path) is not None:
        return (
            "toolslim refuses paths with . or .. segments (also percent-encoded): an upstream "
            "that resolves them would serve from outside its base path"
        )
    name = inexact_header(headers)
    if name is not None:
        return (
            f"the {name} header holds bytes that are not UTF-8; toolslim forwards headers "
            "byte for byte or not at all"
        )
    return None


def inexact_header(headers: Iterable[tuple[str, str]]) -> str | None:
    """The name of the first header that would not reach the upstream byte for byte (its
    name or value is not UTF-8), or None. The value is never part of the answer."""
    for name, value in headers:
        if not (name.isascii() and value.isascii()) and (
            _NOT_UTF8.search(value) is not None or _NOT_UTF8.search(name) is not None
        ):
            return _NOT_UTF8.sub("?", name)
    return None
