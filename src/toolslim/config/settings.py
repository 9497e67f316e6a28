"""Frozen Settings and ConfigError: YAML, environment and flags parsed once, failing closed.

`options.OPTIONS` declares each option once; `checks` holds what each value goes through. An
error names the option (YAML key / env var / flag) and repeats the bad value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import yaml

from toolslim.config.checks import (
    DEFAULT_UPSTREAMS,
    EVENT_LOOPS,
    LOG_LEVELS,
    RESERVED_NAMES,
    ConfigError,
    MiB,
    Option,
    Raw,
    is_loopback,
    proxy_for,
    usable_cpus,
)
from toolslim.config.docs import render_docs, render_example
from toolslim.config.options import LAYOUT, OPTION, OPTIONS
from toolslim.wire.routing import Upstream

__all__ = [
    "DEFAULTS",
    "DEFAULT_UPSTREAMS",
    "EVENT_LOOPS",
    "LOG_LEVELS",
    "OPTION",
    "OPTIONS",
    "RESERVED_NAMES",
    "ConfigError",
    "MiB",
    "Option",
    "Settings",
    "Timeouts",
    "Upstream",
    "load_settings",
    "proxy_for",
    "render_docs",
    "render_example",
    "usable_cpus",
]


def _typed_default(option: Option) -> Any:
    origin = f"the default of {option.yaml}"
    if option.per_key:
        entries = {k: option.check(Raw(v, origin, k)) for k, v in option.default.items()}
        return MappingProxyType(entries)
    return option.check(Raw(option.default, origin))


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
    memo_bytes: int = DEFAULTS["memo_bytes"]
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
    # None: no file. load_settings resolves the option's `auto` with the environment (which
    # is how the table's default reads when no home is known).
    state_file: str | None = None
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: DEFAULTS["prices"])
    ledger_min_requests: int = DEFAULTS["ledger_min_requests"]
    ledger_min_sessions: int = DEFAULTS["ledger_min_sessions"]
    ledger_tool_metrics: bool = DEFAULTS["ledger_tool_metrics"]


# The groups of dotted option names: "timeouts.connect" is Settings.timeouts.connect.
_GROUPS: Final = {"timeouts": Timeouts}


def load_settings(
    config_path: str | None, flags: Mapping[str, Any], env: Mapping[str, str]
) -> Settings:
    """Settings from defaults < YAML file < environment < flags; raises ConfigError.

    `flags` keys are the names of the options that have a flag (an `upstreams` value maps
    name -> url); None means "not given". Every given value is checked, also one that a later
    layer overrides.
    """
    given: dict[str, list[Raw]] = {option.name: [] for option in OPTIONS}
    if config_path is not None:
        _read_yaml(config_path, given)
    for option in OPTIONS:
        if option.env is not None and env.get(option.env):  # an empty variable is unset
            given[option.name].append(Raw(env[option.env], f"environment variable {option.env}"))
    _read_flags(flags, given)
    return _build(given, env)


def _read_yaml(path: str, given: dict[str, list[Raw]]) -> None:
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
        entry = LAYOUT.get(key)
        if entry is None:
            raise ConfigError(
                f"{path}: unknown key {key!r}; known keys: {', '.join(sorted(LAYOUT))}"
            )
        origin = f"{key} in {path}"
        if isinstance(entry, Option) and not entry.per_key:
            given[entry.name].append(Raw(value, origin))
            continue
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ConfigError(f"{origin}: expected a mapping, got {value!r}")
        for sub, sub_value in value.items():
            item = Raw(sub_value, f"{key}.{sub} in {path}", str(sub))
            if isinstance(entry, Option):
                given[entry.name].append(item)
            elif sub in entry:
                given[entry[sub].name].append(item)
            else:
                raise ConfigError(
                    f"{path}: unknown key {key}.{sub}; known keys under {key}: {', '.join(entry)}"
                )


def _read_flags(flags: Mapping[str, Any], given: dict[str, list[Raw]]) -> None:
    known = {option.name for option in OPTIONS if option.flag is not None}
    unknown = sorted(set(flags) - known)
    if unknown:
        raise ConfigError(f"unknown flag key(s) {', '.join(unknown)} passed to load_settings")
    for name, value in flags.items():
        option = OPTION[name]
        if value is None:
            continue
        if not option.per_key:
            given[name].append(Raw(value, f"flag {option.flag}"))
            continue
        metavar = option.type.upper()
        if not isinstance(value, Mapping):
            raise ConfigError(f"{option.flag}: expected {metavar} pairs, got {value!r}")
        what = metavar.partition("=")[2]
        for key, item in value.items():
            given[name].append(Raw(item, f"flag {option.flag} {key}={what}", str(key)))


def default_state_file(env: Mapping[str, str]) -> str | None:
    """`state_file: auto`: $XDG_STATE_HOME/toolslim/state.sqlite3, else under ~/.local/state;
    None when neither variable names a home."""
    base = env.get("XDG_STATE_HOME") or (f"{env['HOME']}/.local/state" if env.get("HOME") else "")
    return f"{base}/toolslim/state.sqlite3" if base.startswith("/") else None


def _build(given: Mapping[str, list[Raw]], env: Mapping[str, str]) -> Settings:
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
    if values["admin_token"] is None and not is_loopback(host):
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
    if values["state_file"] == "auto":
        values["state_file"] = default_state_file(env)
    top = {name: value for name, value in values.items() if "." not in name}
    for group, cls in _GROUPS.items():
        prefix = f"{group}."
        top[group] = cls(
            **{n.removeprefix(prefix): v for n, v in values.items() if n.startswith(prefix)}
        )
    return Settings(**top)
