"""Frozen Settings and ConfigError: YAML, environment and flags parsed once, failing closed.

Every check lives here; an error names the option (YAML key / env var / flag) and repeats the
bad value. The request path reads only the validated, typed fields of `Settings`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from toolslim import pipeline
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
# An upstream name is also its path prefix (/NAME/...): it must not shadow a route of its own.
RESERVED_NAMES: Final = frozenset(
    {"dashboard", "healthz", "metrics", "readyz", "stats", "v1", "v1alpha", "v1beta"}
)
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
# Environment variables read here (TOOLSLIM_CONFIG, the file's path, is read by the cli).
ENV_VARS: Final = MappingProxyType(
    {
        "TOOLSLIM_HOST": "host",
        "TOOLSLIM_PORT": "port",
        "TOOLSLIM_PIPELINE": "pipeline",
        "TOOLSLIM_LOG_LEVEL": "log_level",
        "TOOLSLIM_ADMIN_TOKEN": "admin_token",
        "TOOLSLIM_CAPTURE_DIR": "capture_dir",
    }
)
FLAGS: Final = MappingProxyType(
    {
        "host": "--host",
        "port": "--port",
        "upstreams": "--upstream",
        "pipeline": "--pipeline",
        "log_level": "--log-level",
        "capture_dir": "--capture",
        "admin_token": "--admin-token",
    }
)


class ConfigError(ValueError):
    """The configuration is invalid; the message names the option and the bad value."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. There is deliberately no total timeout: a stream may last as long as it flows."""

    connect: float = 10.0
    response_headers: float = 600.0
    idle_chunk: float = 300.0


@dataclass(frozen=True, slots=True)
class Upstream:
    """A named upstream base URL (scheme://host[:port][/base/path], no trailing slash)."""

    name: str
    url: str


def _default_upstreams() -> Mapping[str, Upstream]:
    return MappingProxyType({n: Upstream(n, u) for n, u in DEFAULT_UPSTREAMS.items()})


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the proxy needs, validated. Build it with `load_settings`."""

    host: str = "127.0.0.1"
    port: int = 8788
    upstreams: Mapping[str, Upstream] = field(default_factory=_default_upstreams)
    default_upstream: str = "anthropic"
    pipeline: tuple[str, ...] = ("toolschema",)
    components: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    timeouts: Timeouts = field(default_factory=Timeouts)
    memo_size: int = MEMO_SIZE
    pool_size: int = 64
    max_body_bytes: int = 32 * MiB
    shutdown_grace: float = 30.0
    log_level: str = "info"
    admin_token: str | None = field(default=None, repr=False)
    capture_dir: str | None = None
    capture_max_bytes: int = 256 * MiB
    cache_read_multiplier: float = READ_MULTIPLIER
    cache_write_multiplier: float = WRITE_MULTIPLIER


# YAML layout: top-level key -> None for a scalar, or the allowed keys of a nested mapping
# (an empty tuple: any key, checked by the option's own parser).
_YAML_KEYS: Final[Mapping[str, tuple[str, ...] | None]] = {
    "listen": ("host", "port"),
    "upstreams": (),
    "default_upstream": None,
    "pipeline": None,
    "components": (),
    "timeouts": ("connect", "response_headers", "idle_chunk"),
    "memo_size": None,
    "pool_size": None,
    "max_body_bytes": None,
    "shutdown_grace": None,
    "log_level": None,
    "admin_token": None,
    "capture_dir": None,
    "capture_max_bytes": None,
    "cache": ("read_multiplier", "write_multiplier"),
}
# Option name (as Settings spells it) -> YAML key path.
_YAML_PATH: Final[Mapping[str, str]] = {
    "host": "listen.host",
    "port": "listen.port",
    "timeouts.connect": "timeouts.connect",
    "timeouts.response_headers": "timeouts.response_headers",
    "timeouts.idle_chunk": "timeouts.idle_chunk",
    "cache_read_multiplier": "cache.read_multiplier",
    "cache_write_multiplier": "cache.write_multiplier",
}


@dataclass(frozen=True, slots=True)
class _Raw:
    """One option's value before validation, and where it came from (for error messages)."""

    value: Any
    origin: str


def load_settings(
    config_path: str | None, flags: Mapping[str, Any], env: Mapping[str, str]
) -> Settings:
    """Settings from defaults < YAML file < environment < flags; raises ConfigError.

    `flags` keys: host, port, upstreams (name -> url), pipeline (names), log_level,
    capture_dir, admin_token; a missing key or None means "not given".
    """
    raw: dict[str, _Raw] = {}
    upstreams: dict[str, _Raw] = {}
    if config_path is not None:
        _read_yaml(config_path, raw, upstreams)
    for var, option in ENV_VARS.items():
        if env.get(var):  # an empty variable counts as unset
            raw[option] = _Raw(env[var], f"environment variable {var}")
    unknown_flags = sorted(set(flags) - set(FLAGS))
    if unknown_flags:
        raise ConfigError(f"unknown flag key(s) {', '.join(unknown_flags)} passed to load_settings")
    for option, flag in FLAGS.items():
        value = flags.get(option)
        if value is None:
            continue
        if option == "upstreams":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{flag}: expected NAME=URL pairs, got {value!r}")
            for name, url in value.items():
                upstreams[str(name)] = _Raw(url, f"flag {flag} {name}=URL")
        else:
            raw[option] = _Raw(value, f"flag {flag}")
    return _build(raw, upstreams)


def _read_yaml(path: str, raw: dict[str, _Raw], upstreams: dict[str, _Raw]) -> None:
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
        if key not in _YAML_KEYS:
            raise ConfigError(
                f"{path}: unknown key {key!r}; known keys: {', '.join(sorted(_YAML_KEYS))}"
            )
        nested = _YAML_KEYS[key]
        origin = f"{key} in {path}"
        if nested is None:
            raw[key] = _Raw(value, origin)
            continue
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{origin}: expected a mapping, got {value!r}")
        if key == "upstreams":
            for name, url in value.items():
                upstreams[str(name)] = _Raw(url, f"upstreams.{name} in {path}")
        elif key == "components":
            raw["components"] = _Raw(value, origin)
        else:
            for sub, sub_value in value.items():
                if sub not in nested:
                    raise ConfigError(
                        f"{path}: unknown key {key}.{sub}; known keys under {key}: "
                        f"{', '.join(nested)}"
                    )
                option = next(
                    (o for o, p in _YAML_PATH.items() if p == f"{key}.{sub}"), f"{key}.{sub}"
                )
                raw[option] = _Raw(sub_value, f"{key}.{sub} in {path}")


def _build(raw: Mapping[str, _Raw], upstreams_raw: Mapping[str, _Raw]) -> Settings:
    defaults = Settings()

    def get(option: str, parse: Callable[[_Raw], Any], default: Any) -> Any:
        item = raw.get(option)
        return default if item is None else parse(item)

    upstreams = dict(defaults.upstreams)
    for name, item in upstreams_raw.items():
        upstreams[name] = _upstream(name, item)
    default_upstream = get("default_upstream", _string, defaults.default_upstream)
    if default_upstream not in upstreams:
        item = raw["default_upstream"]
        raise ConfigError(
            f"{item.origin}: {default_upstream!r} is not a configured upstream; "
            f"configured: {', '.join(sorted(upstreams))}"
        )
    names = get("pipeline", _names, defaults.pipeline)
    try:
        pipeline.check_names(names)
    except pipeline.UnknownComponent as exc:
        origin = raw["pipeline"].origin if "pipeline" in raw else "pipeline"
        raise ConfigError(f"{origin} (pipeline): {exc}") from None
    components = get("components", _components, defaults.components)
    memo_size = get("memo_size", _int(0), defaults.memo_size)
    host = get("host", _host, defaults.host)
    admin_token = get("admin_token", _token, defaults.admin_token)
    if admin_token is None and not _is_loopback(host):
        raise ConfigError(
            f"{raw['host'].origin}: {host!r} is not a loopback address; listening on it would "
            "expose /stats and /metrics to the network: set admin_token (or "
            "TOOLSLIM_ADMIN_TOKEN) to protect them, or listen on 127.0.0.1"
        )
    return Settings(
        host=host,
        port=get("port", _port, defaults.port),
        upstreams=MappingProxyType(upstreams),
        default_upstream=default_upstream,
        pipeline=names,
        components=components,
        timeouts=Timeouts(
            connect=get("timeouts.connect", _seconds, defaults.timeouts.connect),
            response_headers=get(
                "timeouts.response_headers", _seconds, defaults.timeouts.response_headers
            ),
            idle_chunk=get("timeouts.idle_chunk", _seconds, defaults.timeouts.idle_chunk),
        ),
        memo_size=memo_size,
        pool_size=get("pool_size", _int(1), defaults.pool_size),
        max_body_bytes=get("max_body_bytes", _size, defaults.max_body_bytes),
        shutdown_grace=get("shutdown_grace", _non_negative, defaults.shutdown_grace),
        log_level=get("log_level", _log_level, defaults.log_level),
        admin_token=admin_token,
        capture_dir=get("capture_dir", _optional_string, defaults.capture_dir),
        capture_max_bytes=get("capture_max_bytes", _size, defaults.capture_max_bytes),
        cache_read_multiplier=get(
            "cache_read_multiplier", _non_negative, defaults.cache_read_multiplier
        ),
        cache_write_multiplier=get(
            "cache_write_multiplier", _non_negative, defaults.cache_write_multiplier
        ),
    )


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


def _non_negative(item: _Raw) -> float:
    value = _number(item)
    if not 0 <= value < float("inf"):
        raise _fail(item, "a number >= 0")
    return value


_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*")
_UNITS: Final = {None: 1, "B": 1, "KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}


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


def _names(item: _Raw) -> tuple[str, ...]:
    value = item.value
    if isinstance(value, str):
        value = [n.strip() for n in value.split(",") if n.strip()]
    if not isinstance(value, Sequence) or not all(isinstance(n, str) for n in value):
        raise _fail(item, "a list of component names")
    return tuple(value)


def _components(item: _Raw) -> Mapping[str, Mapping[str, Any]]:
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


def _upstream(name: str, item: _Raw) -> Upstream:
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
