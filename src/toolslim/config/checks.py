"""The checks every option's value goes through: each turns one given value (with where it came
from) into a typed field or raises ConfigError naming the option and repeating the value; and
`Option`, the row that declares an option with its check (the table is `options.OPTIONS`).

Pure: no I/O but reading the CPU affinity for `workers: auto`.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from toolslim.core import pipeline
from toolslim.wire.apis import VERSIONS
from toolslim.wire.routing import ADMIN_ROUTES, Upstream

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
# An upstream name is also its path prefix (/NAME/...): it must not shadow a route of its own,
# the proxy's own pages or the APIs' first path segments.
RESERVED_NAMES: Final = frozenset(ADMIN_ROUTES) | frozenset(VERSIONS)
_NAME = re.compile(r"[a-z][a-z0-9_-]*")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the option and the bad value."""


@dataclass(frozen=True, slots=True)
class Raw:
    """One value before validation, where it came from, and (in a mapping) its key."""

    value: Any
    origin: str
    key: str = ""


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
    check: Callable[[Raw], Any]
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
        return yaml_text(self.default)


def yaml_text(value: Any) -> str:
    text: str = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 20)
    return text.removesuffix("...\n").strip()


def _fail(item: Raw, expected: str) -> ConfigError:
    return ConfigError(f"{item.origin}: expected {expected}, got {item.value!r}")


def string(item: Raw) -> str:
    if not isinstance(item.value, str) or not item.value.strip():
        raise _fail(item, "a non-empty string")
    return item.value.strip()


def optional_string(item: Raw) -> str | None:
    return None if item.value is None else string(item)


def integer(minimum: int) -> Callable[[Raw], int]:
    def parse(item: Raw) -> int:
        value = item.value
        if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise _fail(item, f"an integer >= {minimum}")
        return value

    return parse


def port(item: Raw) -> int:
    port: int = integer(0)(item)
    if port > 65535:
        raise _fail(item, "a port number 0-65535")
    return port


_BOOLS: Final = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def boolean(item: Raw) -> bool:
    value = item.value
    if isinstance(value, str) and value.strip().lower() in _BOOLS:
        return _BOOLS[value.strip().lower()]
    if not isinstance(value, bool):
        raise _fail(item, "true or false")
    return value


def _number(item: Raw) -> float:
    value = item.value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _fail(item, "a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise _fail(item, "a number")
    return float(value)


def seconds(item: Raw) -> float:
    value = _number(item)
    if not 0 < value < float("inf"):
        raise _fail(item, "a positive number of seconds")
    return value


def positive(item: Raw) -> float:
    value = _number(item)
    if not 0 < value < float("inf"):
        raise _fail(item, "a number > 0")
    return value


def non_negative(item: Raw) -> float:
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


def workers(item: Raw) -> int:
    if isinstance(item.value, str) and item.value.strip().lower() == "auto":
        return usable_cpus()
    try:
        return integer(1)(item)
    except ConfigError:
        raise _fail(item, "an integer >= 1 or auto") from None


def event_loop(item: Raw) -> str:
    if not isinstance(item.value, str) or item.value.strip().lower() not in EVENT_LOOPS:
        raise _fail(item, f"one of {', '.join(EVENT_LOOPS)}")
    loop = item.value.strip().lower()
    if loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise ConfigError(
            f"{item.origin}: uvloop is not installed (pip install 'toolslim[uvloop]'), "
            f"got {item.value!r}"
        )
    return loop


def connections(item: Raw) -> int | None:
    """`auto` (None: derived from the descriptor limit) or an integer >= 1."""
    if isinstance(item.value, str) and item.value.strip().lower() == "auto":
        return None
    try:
        return integer(1)(item)
    except ConfigError:
        raise _fail(item, "auto or an integer >= 1") from None


def size(item: Raw) -> int:
    if isinstance(item.value, str) and (match := _SIZE.fullmatch(item.value)):
        return int(match[1]) * _UNITS[match[2]]
    if isinstance(item.value, int) and not isinstance(item.value, bool) and item.value >= 0:
        return item.value
    raise _fail(item, "a size in bytes (an integer, or a string like '32MiB')")


def log_level(item: Raw) -> str:
    if not isinstance(item.value, str) or item.value.strip().lower() not in LOG_LEVELS:
        raise _fail(item, f"one of {', '.join(LOG_LEVELS)}")
    return item.value.strip().lower()


def token(item: Raw) -> str | None:
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


def host(item: Raw) -> str:
    host = string(item)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not re.fullmatch(r"[A-Za-z0-9.:_-]+", host):
        raise _fail(item, "a host name or IP address")
    return host


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pipeline_names(item: Raw) -> tuple[str, ...]:
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


def component_options(item: Raw) -> Mapping[str, Mapping[str, Any]]:
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


def upstream_proxy(item: Raw) -> str | None:
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


def upstream(item: Raw) -> Upstream:
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


def state_file(item: Raw) -> str | None:
    """A path, `none` (no state file) or `auto` (the user's state directory, resolved with
    the environment by load_settings)."""
    if item.value is None:
        return None
    value = string(item)
    if value.lower() in ("none", "auto"):
        return None if value.lower() == "none" else "auto"
    if not value.startswith("/"):
        raise _fail(item, "an absolute path, auto or none")
    return value


PRICE_KEYS: Final = ("input", "cache_read", "cache_write")


def model_prices(item: Raw) -> Mapping[str, Mapping[str, float]]:
    """Model -> its prices, USD per million tokens: input, and optionally cache_read and
    cache_write (missing: as input)."""
    if item.value is None:
        return MappingProxyType({})
    if not isinstance(item.value, dict):
        raise _fail(item, "a mapping of model -> prices")
    models = {}
    for model, value in item.value.items():
        if not isinstance(value, dict) or "input" not in value or set(value) - set(PRICE_KEYS):
            raise _fail(
                Raw(value, f"{item.origin}.{model}"),
                f"a mapping of {', '.join(PRICE_KEYS)} (USD per million tokens)",
            )
        prices = {k: non_negative(Raw(v, f"{item.origin}.{model}.{k}")) for k, v in value.items()}
        models[str(model)] = MappingProxyType(
            {key: prices.get(key, prices["input"]) for key in PRICE_KEYS}
        )
    return MappingProxyType(models)
