"""PURE. The one boundary where a failure to reach the upstream becomes what the client sees:
a status, a kind for the counters, and an error body in the shape of the API it called; and
every other error body toolslim answers with (a refusal, an upgrade refused, the admin's 401).

Must not import aiohttp or prometheus_client. aiohttp's errors are told apart by what they
are underneath (OSError, TimeoutError, an `os_error`), so this room needs none of its types.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

import orjson

from toolslim.wire.routing import Route

# What went wrong with the upstream, as counted in `upstream_errors`.
Failure = Literal["connect", "reset", "timeout"]


class HeadersTimeout(TimeoutError):
    """The upstream sent no response headers within `timeouts.response_headers`.

    The client library raises a plain TimeoutError only while connecting (the one limit it
    is given), so any other TimeoutError is a connect timeout.
    """


class Timeouts(Protocol):
    """The two limits a failure's message names (the settings' `timeouts`)."""

    @property
    def connect(self) -> float: ...

    @property
    def response_headers(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Translated:
    status: int
    kind: Failure
    message: str  # names the cause, never a URL, an address, a header or a key


def translate(exc: BaseException, upstream: str, timeouts: Timeouts) -> Translated:
    """The status, kind and message for a failure before the upstream's response headers."""
    if isinstance(exc, HeadersTimeout):
        why = f"sent no response headers within {timeouts.response_headers:g} s"
        return Translated(504, "timeout", f"the {upstream} upstream {why}")
    if isinstance(exc, TimeoutError):
        why = f"timed out connecting to the {upstream} upstream ({timeouts.connect:g} s)"
        return Translated(504, "timeout", f"toolslim {why}")
    os_error = getattr(exc, "os_error", None)  # the client library's connector errors
    if isinstance(os_error, OSError):
        # os_error's text may name the address; its errno does not.
        # socket.gaierror, named rather than imported (this room does no I/O): its errno is
        # a resolver code, not an OS errno
        if any(c.__name__ == "gaierror" for c in type(os_error).__mro__):
            why = "its host name did not resolve"
        elif os_error.errno:
            why = os.strerror(os_error.errno).lower()
        else:
            why = type(os_error).__name__
        message = f"toolslim could not connect to the {upstream} upstream ({why})"
        return Translated(502, "connect", message)
    why = f"failed before a response ({type(exc).__name__})"
    return Translated(502, "reset", f"the connection to the {upstream} upstream {why}")


def error_body(route: Route, status: int, message: str) -> bytes:
    """An error in the shape of the API the client called (or its upstream's, for "other")."""
    shape = route.api if route.api != "other" else route.upstream.name
    body: dict[str, Any]
    if shape == "anthropic":
        body = {"type": "error", "error": {"type": "api_error", "message": message}}
    elif shape == "gemini":
        grpc = "DEADLINE_EXCEEDED" if status == 504 else "UNAVAILABLE"
        body = {"error": {"code": status, "message": message, "status": grpc}}
    else:
        code = _OPENAI_CODES.get(status, "upstream_unavailable")
        body = {
            "error": {"message": message, "type": "upstream_error", "param": None, "code": code}
        }
    return orjson.dumps(body)


_OPENAI_CODES: Final = {504: "upstream_timeout"}


def refusal_body(message: str) -> bytes:
    """A request toolslim refuses itself (not an open proxy, a malformed target, a stalled
    body)."""
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})


def upgrade_required_body(message: str) -> bytes:
    """426 for a WebSocket upgrade, in the OpenAI shape: a client falls back to HTTP at once."""
    return (
        b'{"error":{"message":'
        + orjson.dumps(message)
        + b',"type":"invalid_request_error","param":null,"code":"upgrade_required"}}'
    )


def unauthorized_body(message: str) -> bytes:
    """401 from an admin endpoint without its bearer token."""
    return orjson.dumps({"error": message})
