"""Frozen Settings and ConfigError: YAML, environment and flags parsed once, failing closed.

`OPTIONS` declares each option once (mitmproxy's options.py habit); parsing, error messages,
the cli's flags and --help, and config.example.yaml all derive from it. An error names the
option (YAML key / env var / flag) and repeats the bad value.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import ipaddress
import os
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from toolslim import drift, pipeline
from toolslim.pipeline import MEMO_SIZE  # as a name: Settings.pipeline hides the module
from toolslim.stats import READ_MULTIPLIER, WRITE_MULTIPLIER

MiB: Final = 1024 * 1024
DEFAULT_UPSTREAMS: Final = MappingProxyType(
    {
        "anthropic": "https://api.anthropic.com",
        "openai": "https://api.openai.com",
        "gemini": "https://generativelanguage.googleapis.com",
    }
)
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
EVENT_LOOPS: Final = ("asyncio", "uvloop")
# An upstream name is also its path prefix (/NAME/...): it must not shadow a route of its own.
RESERVED_NAMES: Final = frozenset(
    {"dashboard", "healthz", "metrics", "readyz", "stats", "v1", "v1alpha", "v1beta"}
)
_NAME = re.compile(r"[a-z][a-z0-9_-]*")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the option and the bad value."""


@dataclass(frozen=True, slots=True)
class _Raw:
    """One value before validation, where it came from, and (in a mapping) its key."""

    value: Any
    origin: str
    key: str = ""


@dataclass(frozen=True, slots=True)
class Upstream:
    """A named upstream base URL (scheme://host[:port][/base/path], no trailing slash), and the
    forward proxy its connections go through (None: direct)."""

    name: str
    url: str
    proxy: str | None = None


def _fail(item: _Raw, expected: str) -> ConfigError:
    return ConfigError(f"{item.origin}: expected {expected}, got {item.value!r}")


def _string(item: _Raw) -> str:
    if not isinstance(item.value, str) or not item.value.strip():
        raise _fail(item, "a non-empty string")
    return item.value.strip()


def _optional_string(item: _Raw) -> str | None:
    return None if item.value is None else _string(item)


def _int(minimum: int) -> Callable[[_Raw], int]:
    def parse(item: _Raw) -> int:
        value = item.value
        if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _fail(item, f"an integer >= {minimum}")
        return value

    return parse


def _port(item: _Raw) -> int:
    port: int = _int(0)(item)
    if port > 65535:
        raise _fail(item, "a port number 0-65535")
    return port


_BOOLS: Final = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def _bool(item: _Raw) -> bool:
    value = item.value
    if isinstance(value, str) and value.strip().lower() in _BOOLS:
        return _BOOLS[value.strip().lower()]
    if not isinstance(value, bool):
        raise _fail(item, "true or false")
    return value


def _number(item: _Raw) -> float:
    value = item.value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _fail(item, "a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise _fail(item, "a number")
    return float(value)


def _seconds(item: _Raw) -> float:
    value = _number(item)
    if not 0 < value < float("inf"):
        raise _fail(item, "a positive number of seconds")
    return value


def _positive(item: _Raw) -> float:
    value = _number(item)
    if not 0 < value < float("inf"):
        raise _fail(item, "a number > 0")
    return value


def _non_negative(item: _Raw) -> float:
    value = _number(item)
    if not 0 <= value < float("inf"):
        raise _fail(item, "a number >= 0")
    return value


_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*")
_UNITS: Final = {None: 1, "B": 1, "KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. `taskset` or a cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _workers(item: _Raw) -> int:
    if isinstance(item.value, str) and item.value.strip().lower() == "auto":
        return usable_cpus()
    try:
        return _int(1)(item)
    except ConfigError:
        raise _fail(item, "an integer >= 1 or auto") from None


def _event_loop(item: _Raw) -> str:
    if not isinstance(item.value, str) or item.value.strip().lower() not in EVENT_LOOPS:
        raise _fail(item, f"one of {', '.join(EVENT_LOOPS)}")
    loop = item.value.strip().lower()
    if loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise ConfigError(
            f"{item.origin}: uvloop is not installed (pip install 'toolslim[uvloop]'), "
            f"got {item.value!r}"
        )
    return loop


def _connections(item: _Raw) -> int | None:
    """`auto` (None: derived from the descriptor limit) or an integer >= 1."""
    if isinstance(item.value, str) and item.value.strip().lower() == "auto":
        return None
    try:
        return _int(1)(item)
    except ConfigError:
        raise _fail(item, "auto or an integer >= 1") from None


def _size(item: _Raw) -> int:
    if isinstance(item.value, str) and (match := _SIZE.fullmatch(item.value)):
        return int(match[1]) * _UNITS[match[2]]
    if isinstance(item.value, int) and not isinstance(item.value, bool) and item.value >= 0:
        return item.value
    raise _fail(item, "a size in bytes (an integer, or a string like '32MiB')")


def _log_level(item: _Raw) -> str:
    if not isinstance(item.value, str) or item.value.strip().lower() not in LOG_LEVELS:
        raise _fail(item, f"one of {', '.join(LOG_LEVELS)}")
    return item.value.strip().lower()


def _token(item: _Raw) -> str | None:
    value = item.value
    if value is None:
        return None
    # Never repeat a secret in an error message, not even a malformed one.
    if not isinstance(value, str) or not re.fullmatch(r"[\x21-\x7e]{16,}", value):
        raise ConfigError(
            f"{item.origin}: expected at least 16 printable ASCII characters without spaces "
            "(value not shown)"
        )
    return value


def _host(item: _Raw) -> str:
    host = _string(item)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not re.fullmatch(r"[A-Za-z0-9.:_-]+", host):
        raise _fail(item, "a host name or IP address")
    return host


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _pipeline(item: _Raw) -> tuple[str, ...]:
    value = item.value
    if isinstance(value, str):
        value = [n.strip() for n in value.split(",") if n.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(n, str) for n in value):
        raise _fail(item, "a list of component names")
    try:
        pipeline.check_names(value)
    except pipeline.UnknownComponent as exc:
        raise ConfigError(f"{item.origin} (pipeline): {exc}") from None
    return tuple(value)


def _components(item: _Raw) -> Mapping[str, Mapping[str, Any]]:
    if item.value is None:
        return MappingProxyType({})
    if not isinstance(item.value, Mapping):
        raise _fail(item, "a mapping")
    known = ", ".join(sorted(pipeline.KNOWN))
    result: dict[str, Mapping[str, Any]] = {}
    for name, options in item.value.items():
        if name not in pipeline.KNOWN:
            raise ConfigError(
                f"{item.origin}: unknown component {name!r}; known components: {known}"
            )
        if options is None:
            options = {}
        if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
            raise ConfigError(
                f"{item.origin}: options of {name!r} must be a mapping, got {options!r}"
            )
        try:  # options are checked even for a component not in the pipeline (a typo'd key)
            pipeline.KNOWN[name](options)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{item.origin} (components.{name}): {exc}") from None
        result[name] = MappingProxyType(dict(options))
    return MappingProxyType(result)


def _upstream_proxy(item: _Raw) -> str | None:
    """`none`, or an http(s) proxy URL (user:password@ allowed: it is never shown)."""
    value = item.value
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return "none" if value is not None else None
    if not isinstance(value, str):
        raise _fail(item, "an http:// or https:// proxy URL, or none")
    shown = repr(_without_password(value.strip()))
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        raise ConfigError(f"{item.origin}: {shown} is not a valid proxy URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{item.origin}: expected an http:// or https:// proxy URL, got {shown}")
    return value.strip()


def _without_password(url: str) -> str:
    """The URL as an error may repeat it: a user:password@ becomes ***@."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return scheme + sep + authority + slash + path


def proxy_for(url: str, setting: str | None, env: Mapping[str, str]) -> str | None:
    """The forward proxy for an upstream URL: `upstream_proxy` when set (`none`: direct),
    else the environment's as curl, httpx and the agents read it (https_proxy / HTTPS_PROXY
    for https, http_proxy / HTTP_PROXY for http, ALL_PROXY for either, NO_PROXY exempts)."""
    if setting == "none":
        return None
    if setting is not None:
        return setting
    parts = urlsplit(url)
    scheme = parts.scheme
    proxy = (
        env.get(f"{scheme}_proxy")
        or env.get(f"{scheme.upper()}_PROXY")
        or env.get("all_proxy")
        or env.get("ALL_PROXY")
    )
    if not proxy:
        return None
    no_proxy = env.get("no_proxy") or env.get("NO_PROXY") or ""
    return None if _exempt(parts.hostname or "", no_proxy) else proxy


def _exempt(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY names the host: `*`, the host itself, or a domain it is in (a leading
    dot optional, a port ignored), as curl reads it."""
    host = host.lower().rstrip(".")
    for entry in no_proxy.split(","):
        name = entry.strip().lower()
        if name == "*":
            return True
        if name.startswith("[") and "]" in name:  # [v6]:port
            name = name[1 : name.index("]")]
        elif name.count(":") == 1:
            name = name.partition(":")[0]
        name = name.lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _upstream(item: _Raw) -> Upstream:
    name = item.key
    if not _NAME.fullmatch(name) or name in RESERVED_NAMES:
        raise ConfigError(
            f"{item.origin}: upstream name {name!r} must be lower-case letters, digits, '-' "
            f"or '_', starting with a letter, and not one of {', '.join(sorted(RESERVED_NAMES))}"
        )
    url = item.value
    if not isinstance(url, str):
        raise _fail(item, "an http(s) URL")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise ConfigError(f"{item.origin}: {url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _fail(item, "an http:// or https:// URL with a host")
    if parts.query or parts.fragment or url.strip().endswith(("?", "#")):
        raise _fail(item, "a base URL without query string or fragment")
    if parts.username is not None or parts.password is not None:
        # Credentials belong to the client's requests, not to a URL that ends up in logs.
        raise ConfigError(f"{item.origin}: the URL must not contain user:password@ (not shown)")
    return Upstream(name, f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}")


@dataclass(frozen=True, slots=True)
class Option:
    """One option, declared once.

    `name` is the Settings field ("timeouts.connect" for a nested one), `yaml` the key path in
    the file, `env` and `flag` its other spellings (None: none). `type` is the word --help and
    the docs show for a value, `default` the value as the YAML file spells it, and `check`
    turns a given value into the typed field or raises ConfigError. With `per_key`, the value is
    a mapping merged key by key over the layers, and `check` sees each entry (key in `.key`).
    The first sentence of `doc` is the --help text; all of it is the example file's comment.
    """

    name: str
    yaml: str
    env: str | None
    flag: str | None
    type: str
    default: Any
    check: Callable[[_Raw], Any]
    doc: str
    per_key: bool = False

    @property
    def summary(self) -> str:
        """The first sentence of `doc`."""
        match = re.match(r"(.+?\.)(?:\s|$)", self.doc)
        return self.doc if match is None else match[1]

    @property
    def default_text(self) -> str:
        """The default as YAML spells it on one line."""
        return _yaml_text(self.default)


OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        name="host",
        yaml="listen.host",
        env="TOOLSLIM_HOST",
        flag="--host",
        type="host",
        default="127.0.0.1",
        check=_host,
        doc="Address to listen on. A non-loopback address requires admin_token, because /stats "
        "and /metrics would be open to the network.",
    ),
    Option(
        name="port",
        yaml="listen.port",
        env="TOOLSLIM_PORT",
        flag="--port",
        type="port",
        default=8788,
        check=_port,
        doc="Port to listen on; 0 picks a free port.",
    ),
    Option(
        name="workers",
        yaml="workers",
        env="TOOLSLIM_WORKERS",
        flag="--workers",
        type="count",
        default=1,
        check=_workers,
        doc="Worker processes serving the one listening port; auto starts one per CPU this "
        "process may use. Above 1, gunicorn runs them with aiohttp's worker class and "
        "replaces one that dies, and /stats, /metrics and the dashboard of any worker show "
        "the totals of all of them (docs/workers.md).",
    ),
    Option(
        name="event_loop",
        yaml="event_loop",
        env="TOOLSLIM_EVENT_LOOP",
        flag="--event-loop",
        type="loop",
        default="asyncio",
        check=_event_loop,
        doc="The event loop: asyncio's own, or uvloop (pip install 'toolslim[uvloop]'). "
        "uvloop did not measure faster here (bench/README.md, Workers), so it is not the "
        "default.",
    ),
    Option(
        name="upstreams",
        yaml="upstreams",
        env=None,
        flag="--upstream",
        type="name=url",
        default=dict(DEFAULT_UPSTREAMS),
        check=_upstream,
        per_key=True,
        doc="Named upstream base URLs; each one given sets that upstream and keeps the others. "
        "A URL is http(s), a host, an optional base path (prefixed to every forwarded path), "
        "no query string, fragment or user:password@; a name is lower-case letters, digits, "
        "'-' or '_'. Routing by path: /v1/messages* -> anthropic; /v1/chat/completions, "
        "/v1/responses* -> openai; other /v1/* -> anthropic when the request has an "
        "anthropic-version or x-api-key header, else openai; /v1beta/*, /v1alpha/* -> gemini; "
        "/NAME/... picks upstream NAME and strips the prefix (so extra upstreams added here "
        "are reachable as /NAME/...); anything else -> default_upstream.",
    ),
    Option(
        name="upstream_proxy",
        yaml="upstream_proxy",
        env="TOOLSLIM_UPSTREAM_PROXY",
        flag="--upstream-proxy",
        type="url",
        default=None,
        check=_upstream_proxy,
        doc="Forward proxy for every upstream connection, or none for direct ones. Unset "
        "(null), the environment decides, as for curl, httpx and the agents themselves: "
        "https_proxy/HTTPS_PROXY, http_proxy/HTTP_PROXY, ALL_PROXY, NO_PROXY. ~/.netrc is "
        "never read, and a proxy URL's user:password@ is never logged.",
    ),
    Option(
        name="default_upstream",
        yaml="default_upstream",
        env=None,
        flag=None,
        type="name",
        default="anthropic",
        check=_string,
        doc="Upstream for paths that no routing rule matches.",
    ),
    Option(
        name="websocket",
        yaml="websocket",
        env="TOOLSLIM_WEBSOCKET",
        flag="--websocket",
        type="bool",
        default=True,
        check=_bool,
        doc="Relay WebSocket upgrades (Codex's default transport); false answers every upgrade "
        "with 426 so clients fall back to HTTP.",
    ),
    Option(
        name="pipeline",
        yaml="pipeline",
        env="TOOLSLIM_PIPELINE",
        flag="--pipeline",
        type="name,...",
        default=["toolschema"],
        check=_pipeline,
        doc="Components run on each request body, in order; an empty list ([] here, "
        "--pipeline '' as a flag) forwards every body untouched. "
        "Known: toolschema (lossless annotation stripping), tooldefs (lossless: prunes "
        "unreachable $defs/definitions; put it first: [tooldefs, toolschema]), toolorder "
        "(lossless: puts the tools in one canonical order, so that the same tools in another "
        "order reach the provider as the same prompt prefix) and toolbudget "
        "(LOSSY: shrinks oversized schemas; it changes what the model is told, see "
        "docs/components.md before enabling it). Names of the wider design (format, dedup, "
        "failed_run, cmdfilter, cachesplit) are not implemented yet and are rejected.",
    ),
    Option(
        name="components",
        yaml="components",
        env=None,
        flag=None,
        type="mapping",
        default={},
        check=_components,
        doc="Options per component: component name -> mapping of options. Unknown component "
        "names and unknown or bad options are start-up errors, also for a component not in "
        "the pipeline. Only toolbudget has options: budget_bytes (default 5000) and "
        "exclude_tools (default []).",
    ),
    Option(
        name="timeouts.connect",
        yaml="timeouts.connect",
        env=None,
        flag=None,
        type="seconds",
        default=10,
        check=_seconds,
        doc="Seconds to open a TCP (+TLS) connection to an upstream; exceeded -> 504.",
    ),
    Option(
        name="timeouts.response_headers",
        yaml="timeouts.response_headers",
        env=None,
        flag=None,
        type="seconds",
        default=600,
        check=_seconds,
        doc="Seconds from sending the request to the upstream's response headers; exceeded -> 504.",
    ),
    Option(
        name="timeouts.idle_chunk",
        yaml="timeouts.idle_chunk",
        env=None,
        flag=None,
        type="seconds",
        default=300,
        check=_seconds,
        doc="Longest silence (seconds) between two chunks of a response; exceeded -> the "
        "stream ends. There is no total timeout: a stream lasts as long as it keeps flowing. "
        "This and response_headers are checked every quarter of the shorter one, and at least "
        "once a second: a wait is cut at most that much after its limit.",
    ),
    Option(
        name="timeouts.idle_websocket",
        yaml="timeouts.idle_websocket",
        env=None,
        flag=None,
        type="seconds",
        default=3600,
        check=_seconds,
        doc="A WebSocket with no message either way for this many seconds is closed with 1001.",
    ),
    Option(
        name="timeouts.client_headers",
        yaml="timeouts.client_headers",
        env=None,
        flag=None,
        type="seconds",
        default=60,
        check=_seconds,
        doc="Seconds a client has to send complete request headers, from the moment it "
        "connects or sends the first byte after a keep-alive pause; exceeded -> the "
        "connection is closed (nginx's client_header_timeout).",
    ),
    Option(
        name="timeouts.client_body_idle",
        yaml="timeouts.client_body_idle",
        env=None,
        flag=None,
        type="seconds",
        default=60,
        check=_seconds,
        doc="Longest silence (seconds) between two reads of a request body, also one that "
        "streams through; exceeded -> 408 and the connection is closed (nginx's "
        "client_body_timeout).",
    ),
    Option(
        name="timeouts.client_keepalive",
        yaml="timeouts.client_keepalive",
        env=None,
        flag=None,
        type="seconds",
        default=75,
        check=_seconds,
        doc="Seconds an idle keep-alive client connection stays open (nginx's keepalive_timeout).",
    ),
    Option(
        name="memo_size",
        yaml="memo_size",
        env=None,
        flag=None,
        type="integer",
        default=MEMO_SIZE,
        check=_int(0),
        doc="Catalogue rewrites remembered (LRU keyed by SHA-256 of the exact bytes); 0 "
        "disables the memo. An agent session sends one catalogue (a few with subagents); each "
        "entry holds a catalogue as sent, rewritten, and rewritten with the body's short rest "
        "for each of up to four sessions that share it (~190 KB for one session on Claude "
        "Code's 65 KB catalogue, ~380 KB for four). Raise it for a proxy many teams share.",
    ),
    Option(
        name="pool_size",
        yaml="pool_size",
        env=None,
        flag=None,
        type="integer",
        default=64,
        check=_int(1),
        doc="Pooled keep-alive connections per upstream host (at least 1).",
    ),
    Option(
        name="max_body_bytes",
        yaml="max_body_bytes",
        env=None,
        flag=None,
        type="size",
        default="32MiB",
        check=_size,
        doc="Largest request body the pipeline transforms (bytes, or '32MiB'); a larger body "
        "is streamed through untouched and counted as skipped `too_large` (also applies to "
        "the decoded size of a gzip/deflate/br/zstd request body).",
    ),
    Option(
        name="max_catalogue_bytes",
        yaml="max_catalogue_bytes",
        env=None,
        flag=None,
        type="size",
        default="8MiB",
        check=_size,
        doc="Largest (decoded) request body the pipeline looks at for a catalogue; a larger "
        "one is forwarded untouched and counted as skipped `too_large`. Parsing a body holds "
        "the interpreter for about 2 ms per MiB whatever thread does it, so this bounds the "
        "time one request can take from the others. Bodies over 1 MiB (64 KiB compressed) are "
        "decoded and compacted on a worker thread, not on the event loop.",
    ),
    Option(
        name="max_buffered_bytes",
        yaml="max_buffered_bytes",
        env=None,
        flag=None,
        type="size",
        default="256MiB",
        check=_size,
        doc="Most request body bytes held in memory at once, over every connection; a body "
        "that does not fit streams through untouched and is counted as skipped `busy` (it is "
        "never refused for it).",
    ),
    Option(
        name="max_connections",
        yaml="max_connections",
        env=None,
        flag=None,
        type="integer",
        default="auto",
        check=_connections,
        doc="Most client connections open at once; auto is half of what the descriptor limit "
        "(RLIMIT_NOFILE) leaves after 64, since a request being forwarded holds an upstream "
        "connection too (480 at 1,024). At the limit one is closed to make room: the one "
        "that has spent longest sending its request headers, or else the keep-alive one idle "
        "longest; only when every one is handling a request is a new one answered 503.",
    ),
    Option(
        name="shutdown_grace",
        yaml="shutdown_grace",
        env=None,
        flag=None,
        type="seconds",
        default=30,
        check=_non_negative,
        doc="Seconds in-flight requests and streams get to finish once the proxy stops "
        "accepting (after SIGTERM/SIGINT and shutdown_delay); the rest are cut then, and the "
        "process exits 0 within a second. A second signal exits at once with status 1.",
    ),
    Option(
        name="shutdown_delay",
        yaml="shutdown_delay",
        env=None,
        flag=None,
        type="seconds",
        default=0,
        check=_non_negative,
        doc="Seconds the proxy keeps accepting after SIGTERM/SIGINT while /readyz answers 503, "
        "so that load balancers stop sending first (on Kubernetes, a few seconds; set "
        "terminationGracePeriodSeconds above shutdown_delay + shutdown_grace + 1).",
    ),
    Option(
        name="log_level",
        yaml="log_level",
        env="TOOLSLIM_LOG_LEVEL",
        flag="--log-level",
        type="level",
        default="info",
        check=_log_level,
        doc=f"One of {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}. At info, one line per "
        "request on stderr, never a credential or a body. Lines are written in batches: "
        "within about a second, a warning or worse at once with the lines before it.",
    ),
    Option(
        name="admin_token",
        yaml="admin_token",
        env="TOOLSLIM_ADMIN_TOKEN",
        flag="--admin-token",
        type="token",
        default=None,
        check=_token,
        doc="Bearer token required on /stats and /metrics (the dashboard page itself is "
        "public); prefer TOOLSLIM_ADMIN_TOKEN to the flag, which shows up in `ps`. At least 16 "
        "printable ASCII characters, no spaces; the proxied API paths never need it.",
    ),
    Option(
        name="capture_dir",
        yaml="capture_dir",
        env="TOOLSLIM_CAPTURE_DIR",
        flag="--capture",
        type="dir",
        default=None,
        check=_optional_string,
        doc="Directory where each request is recorded as JSON Lines for `toolslim report`; "
        "null records nothing.",
    ),
    Option(
        name="capture_max_bytes",
        yaml="capture_max_bytes",
        env=None,
        flag=None,
        type="size",
        default="256MiB",
        check=_size,
        doc="Largest total size of the capture directory (bytes, or '256MiB').",
    ),
    Option(
        name="cache_read_multiplier",
        yaml="cache.read_multiplier",
        env=None,
        flag="--cache-read-multiplier",
        type="number",
        default=READ_MULTIPLIER,
        check=_positive,
        doc="Price of a cache read per token, as a multiple of a normal input token's (> 0). "
        "It and write_multiplier drive the savings arithmetic of /stats and `toolslim report`.",
    ),
    Option(
        name="cache_write_multiplier",
        yaml="cache.write_multiplier",
        env=None,
        flag="--cache-write-multiplier",
        type="number",
        default=WRITE_MULTIPLIER,
        check=_non_negative,
        doc="Price of a (5-minute) cache write per token, as a multiple of a normal input "
        "token's (>= 0).",
    ),
    Option(
        name="drift_max_sessions",
        yaml="drift.max_sessions",
        env=None,
        flag=None,
        type="integer",
        default=drift.MAX_SESSIONS,
        check=_int(1),
        doc="Sessions whose recent catalogues drift tracking remembers (an LRU of hashes; the "
        "least recently seen session goes first), to tell which catalogue changes within a "
        "session break the provider's prompt cache (/stats drift, docs/drift.md). Drift "
        "needs a pipeline with at least one component.",
    ),
)
OPTION: Final = MappingProxyType({option.name: option for option in OPTIONS})


def _typed_default(option: Option) -> Any:
    origin = f"the default of {option.yaml}"
    if option.per_key:
        entries = {k: option.check(_Raw(v, origin, k)) for k, v in option.default.items()}
        return MappingProxyType(entries)
    return option.check(_Raw(option.default, origin))


# Typed defaults, from the table: Settings' fields take theirs from here, so there is one of each.
DEFAULTS: Final = MappingProxyType({option.name: _typed_default(option) for option in OPTIONS})


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. There is deliberately no total timeout: a stream may last as long as it flows."""

    connect: float = DEFAULTS["timeouts.connect"]
    response_headers: float = DEFAULTS["timeouts.response_headers"]
    idle_chunk: float = DEFAULTS["timeouts.idle_chunk"]
    idle_websocket: float = DEFAULTS["timeouts.idle_websocket"]
    client_headers: float = DEFAULTS["timeouts.client_headers"]
    client_body_idle: float = DEFAULTS["timeouts.client_body_idle"]
    client_keepalive: float = DEFAULTS["timeouts.client_keepalive"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the proxy needs, validated. Build it with `load_settings`."""

    host: str = DEFAULTS["host"]
    port: int = DEFAULTS["port"]
    workers: int = DEFAULTS["workers"]
    event_loop: str = DEFAULTS["event_loop"]
    upstreams: Mapping[str, Upstream] = field(default_factory=lambda: DEFAULTS["upstreams"])
    upstream_proxy: str | None = DEFAULTS["upstream_proxy"]  # resolved into each Upstream
    default_upstream: str = DEFAULTS["default_upstream"]
    websocket: bool = DEFAULTS["websocket"]
    pipeline: tuple[str, ...] = DEFAULTS["pipeline"]
    components: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: DEFAULTS["components"]
    )
    timeouts: Timeouts = field(default_factory=Timeouts)
    memo_size: int = DEFAULTS["memo_size"]
    pool_size: int = DEFAULTS["pool_size"]
    max_body_bytes: int = DEFAULTS["max_body_bytes"]
    max_catalogue_bytes: int = DEFAULTS["max_catalogue_bytes"]
    max_buffered_bytes: int = DEFAULTS["max_buffered_bytes"]
    max_connections: int | None = DEFAULTS["max_connections"]
    shutdown_grace: float = DEFAULTS["shutdown_grace"]
    shutdown_delay: float = DEFAULTS["shutdown_delay"]
    log_level: str = DEFAULTS["log_level"]
    admin_token: str | None = field(default=DEFAULTS["admin_token"], repr=False)
    capture_dir: str | None = DEFAULTS["capture_dir"]
    capture_max_bytes: int = DEFAULTS["capture_max_bytes"]
    cache_read_multiplier: float = DEFAULTS["cache_read_multiplier"]
    cache_write_multiplier: float = DEFAULTS["cache_write_multiplier"]
    drift_max_sessions: int = DEFAULTS["drift_max_sessions"]


# The groups of dotted option names: "timeouts.connect" is Settings.timeouts.connect.
_GROUPS: Final = {"timeouts": Timeouts}


def _yaml_layout() -> dict[str, Option | dict[str, Option]]:
    """Top-level YAML key -> its option, or (a section such as `listen`) sub-key -> option."""
    layout: dict[str, Option | dict[str, Option]] = {}
    for option in OPTIONS:
        key, dot, sub = option.yaml.partition(".")
        if dot:
            section = layout.setdefault(key, {})
            assert isinstance(section, dict)  # a key is a section or an option, never both
            section[sub] = option
        else:
            layout[key] = option
    return layout


_LAYOUT: Final = _yaml_layout()


def load_settings(
    config_path: str | None, flags: Mapping[str, Any], env: Mapping[str, str]
) -> Settings:
    """Settings from defaults < YAML file < environment < flags; raises ConfigError.

    `flags` keys are the names of the options that have a flag (an `upstreams` value maps
    name -> url); None means "not given". Every given value is checked, also one that a later
    layer overrides.
    """
    given: dict[str, list[_Raw]] = {option.name: [] for option in OPTIONS}
    if config_path is not None:
        _read_yaml(config_path, given)
    for option in OPTIONS:
        if option.env is not None and env.get(option.env):  # an empty variable is unset
            given[option.name].append(_Raw(env[option.env], f"environment variable {option.env}"))
    _read_flags(flags, given)
    return _build(given, env)


def _read_yaml(path: str, given: dict[str, list[_Raw]]) -> None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path!r}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path!r} is not valid YAML: {exc}") from None
    if data is None:
        return
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r}: expected a mapping of keys, got {data!r}")
    for key, value in data.items():
        entry = _LAYOUT.get(key)
        if entry is None:
            raise ConfigError(
                f"{path}: unknown key {key!r}; known keys: {', '.join(sorted(_LAYOUT))}"
            )
        origin = f"{key} in {path}"
        if isinstance(entry, Option) and not entry.per_key:
            given[entry.name].append(_Raw(value, origin))
            continue
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{origin}: expected a mapping, got {value!r}")
        for sub, sub_value in value.items():
            item = _Raw(sub_value, f"{key}.{sub} in {path}", str(sub))
            if isinstance(entry, Option):
                given[entry.name].append(item)
            elif sub in entry:
                given[entry[sub].name].append(item)
            else:
                raise ConfigError(
                    f"{path}: unknown key {key}.{sub}; known keys under {key}: {', '.join(entry)}"
                )


def _read_flags(flags: Mapping[str, Any], given: dict[str, list[_Raw]]) -> None:
    known = {option.name for option in OPTIONS if option.flag is not None}
    unknown = sorted(set(flags) - known)
    if unknown:
        raise ConfigError(f"unknown flag key(s) {', '.join(unknown)} passed to load_settings")
    for name, value in flags.items():
        option = OPTION[name]
        if value is None:
            continue
        if not option.per_key:
            given[name].append(_Raw(value, f"flag {option.flag}"))
            continue
        metavar = option.type.upper()
        if not isinstance(value, Mapping):
            raise ConfigError(f"{option.flag}: expected {metavar} pairs, got {value!r}")
        what = metavar.partition("=")[2]
        for key, item in value.items():
            given[name].append(_Raw(item, f"flag {option.flag} {key}={what}", str(key)))


def _build(given: Mapping[str, list[_Raw]], env: Mapping[str, str]) -> Settings:
    values = dict(DEFAULTS)
    origins: dict[str, str] = {}
    for option in OPTIONS:
        if option.per_key:
            merged = dict(values[option.name])
            merged.update((item.key, option.check(item)) for item in given[option.name])
            values[option.name] = MappingProxyType(merged)
            continue
        for item in given[option.name]:
            values[option.name] = option.check(item)  # each layer checked; the last one wins
            origins[option.name] = item.origin
    # Checks across options, on the values that won.
    default, upstreams = values["default_upstream"], values["upstreams"]
    if default not in upstreams:
        raise ConfigError(
            f"{origins.get('default_upstream', 'default_upstream')}: {default!r} is not a "
            f"configured upstream; configured: {', '.join(sorted(upstreams))}"
        )
    host = values["host"]
    if values["admin_token"] is None and not _is_loopback(host):
        raise ConfigError(
            f"{origins.get('host', 'listen.host')}: {host!r} is not a loopback address; "
            "listening on it would expose /stats and /metrics to the network: set admin_token "
            "(or TOOLSLIM_ADMIN_TOKEN) to protect them, or listen on 127.0.0.1"
        )
    setting = values["upstream_proxy"]
    values["upstreams"] = MappingProxyType(
        {
            name: dataclasses.replace(upstream, proxy=proxy_for(upstream.url, setting, env))
            for name, upstream in upstreams.items()
        }
    )
    top = {name: value for name, value in values.items() if "." not in name}
    for group, cls in _GROUPS.items():
        prefix = f"{group}."
        top[group] = cls(
            **{n.removeprefix(prefix): v for n, v in values.items() if n.startswith(prefix)}
        )
    return Settings(**top)


def _yaml_text(value: Any) -> str:
    text: str = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 20)
    return text.removesuffix("...\n").strip()


def _spellings(option: Option) -> list[str]:
    """How to set `option` besides the file, as the example's comments and docs say it."""
    spellings = []
    if option.flag is not None and option.type == "bool":
        spellings.append(f"{option.flag}/--no-{option.flag.removeprefix('--')}")
    elif option.flag is not None and option.per_key:
        spellings.append(f"{option.flag} {option.type.upper()}")
    elif option.flag is not None:
        spellings.append(option.flag)
    if option.env is not None:
        spellings.append(option.env)
    return spellings


def _comment(text: str, indent: str) -> list[str]:
    lines = textwrap.wrap(
        text, width=100 - len(indent) - 2, break_long_words=False, break_on_hyphens=False
    )
    return [f"{indent}# {line}" for line in lines]


_EXAMPLE_HEADER: Final = (
    "toolslim configuration: every key with its default. Pass it with `toolslim serve --config "
    "FILE` (or TOOLSLIM_CONFIG=FILE). Precedence: flags > environment > this file > defaults. "
    "An unknown key is an error; so is a bad value in any layer, even one a flag overrides "
    "(the message names the key and the value). Generated from toolslim.config.OPTIONS."
)


def render_example() -> str:
    """config.example.yaml: every option at its default, its doc and spellings as comments."""
    lines = _comment(_EXAMPLE_HEADER, "")
    for key, entry in _LAYOUT.items():
        lines.append("")
        options = {key: entry} if isinstance(entry, Option) else entry
        indent = "" if isinstance(entry, Option) else "  "
        if indent:
            lines.append(f"{key}:")
        for sub, option in options.items():
            spellings = ", ".join(_spellings(option))
            lines += _comment(f"{option.doc} ({spellings})" if spellings else option.doc, indent)
            if option.per_key and option.default:
                lines.append(f"{indent}{sub}:")
                lines += [f"{indent}  {k}: {_yaml_text(v)}" for k, v in option.default.items()]
            else:
                lines.append(f"{indent}{sub}: {option.default_text}")
    return "\n".join(lines) + "\n"


_DOCS_HEADER: Final = """\
# Configuration

Settings come from flags, then environment variables, then a YAML file (`--config FILE` or
`TOOLSLIM_CONFIG`), then the defaults. Every given value is validated once at start-up, also one
that a later layer overrides; an unknown key or a bad value stops the proxy with an error that
names the key, variable or flag and repeats the value (never a secret). `toolslim report` reads
the same file and takes `--pipeline` and the two `--cache-*-multiplier` flags.

This table and [config.example.yaml](../config.example.yaml) are generated from
`toolslim.config.OPTIONS`; a test holds them equal.

| YAML key | Type | Default | Flag, environment | What it does |
|---|---|---|---|---|
"""


def render_docs() -> str:
    """docs/configuration.md: one table row per option."""
    rows = []
    for option in OPTIONS:
        default = "`" + option.default_text.replace("|", "\\|") + "`"
        spellings = ", ".join(f"`{s}`" for s in _spellings(option))
        doc = option.doc.replace("*", "\\*")  # /v1/messages* is a path, not emphasis
        rows.append(f"| `{option.yaml}` | {option.type} | {default} | {spellings} | {doc} |")
    return _DOCS_HEADER + "\n".join(rows) + "\n"
