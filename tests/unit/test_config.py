"""config: one table row per option; defaults, precedence flags > env > YAML > defaults, every
given value checked (also one a later layer overrides), errors naming key and value; the flags,
--help, config.example.yaml and docs/configuration.md are renderings of the table."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from toolslim import cli
from toolslim.config.checks import PRICE_KEYS
from toolslim.config.settings import (
    OPTION,
    OPTIONS,
    ConfigError,
    MiB,
    Option,
    Settings,
    Timeouts,
    Upstream,
    load_settings,
    proxy_for,
    render_docs,
    render_example,
)
from toolslim.core.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.yaml"
DOCS = ROOT / "docs" / "configuration.md"
TOKEN = "0123456789abcdef-secret"
REGENERATE = (
    "regenerate with: .venv/bin/python -c 'from toolslim.config import settings as config; "
    'open("config.example.yaml", "w").write(config.render_example()); '
    'open("docs/configuration.md", "w").write(config.render_docs())\''
)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "toolslim.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def error(tmp_path: Path, text: str | None = None, **kwargs: Any) -> str:
    path = None if text is None else write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, kwargs.get("flags", {}), kwargs.get("env", {}))
    return str(caught.value)


def test_defaults_without_file_flags_or_env() -> None:
    settings = load_settings(None, {}, {})
    assert settings == Settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8788)
    assert settings.upstreams["anthropic"] == Upstream("anthropic", "https://api.anthropic.com")
    assert settings.upstreams["openai"].url == "https://api.openai.com"
    assert settings.upstreams["gemini"].url == "https://generativelanguage.googleapis.com"
    assert settings.default_upstream == "anthropic"
    assert settings.pipeline == ("toolschema",)
    assert settings.timeouts == Timeouts(connect=10, response_headers=600, idle_chunk=300)
    assert (settings.memo_size, settings.pool_size) == (64, 64)
    assert Pipeline([]).memo_gauges()[1] == settings.memo_size  # one default, not two
    assert settings.max_body_bytes == 32 * MiB
    assert settings.shutdown_grace == 30
    assert (settings.cache_read_multiplier, settings.cache_write_multiplier) == (0.1, 1.25)
    assert settings.admin_token is None and settings.capture_dir is None


def test_example_file_documents_every_key_with_its_default() -> None:
    assert load_settings(str(EXAMPLE), {}, {}) == Settings()
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    options = {option.yaml for option in OPTIONS}
    paths = set()
    for key, value in data.items():
        paths |= {key} if key in options else {f"{key}.{sub}" for sub in value}
    assert paths == options


def test_settings_are_frozen() -> None:
    settings = load_settings(None, {}, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.upstreams["x"] = Upstream("x", "http://x")  # type: ignore[index]


def test_yaml_values_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
listen: {host: localhost, port: 9000}
upstreams:
  anthropic: http://127.0.0.1:8080/base/
  azure: https://example.openai.azure.com/openai
default_upstream: azure
pipeline: []
timeouts: {connect: 1.5, response_headers: 2, idle_chunk: 3}
memo_size: 0
pool_size: 8
max_body_bytes: 1KiB
shutdown_grace: 0
log_level: DEBUG
capture_dir: /tmp/captures
capture_max_bytes: 1000
cache: {read_multiplier: 0.25, write_multiplier: 2}
""",
    )
    settings = load_settings(path, {}, {})
    assert (settings.host, settings.port) == ("localhost", 9000)
    assert settings.upstreams["anthropic"].url == "http://127.0.0.1:8080/base"
    assert settings.upstreams["azure"].url == "https://example.openai.azure.com/openai"
    assert settings.upstreams["openai"].url == "https://api.openai.com"
    assert settings.default_upstream == "azure"
    assert settings.pipeline == ()
    assert settings.timeouts == Timeouts(1.5, 2.0, 3.0)
    assert (settings.memo_size, settings.pool_size, settings.max_body_bytes) == (0, 8, 1024)
    assert settings.shutdown_grace == 0
    assert settings.log_level == "debug"
    assert (settings.capture_dir, settings.capture_max_bytes) == ("/tmp/captures", 1000)
    assert (settings.cache_read_multiplier, settings.cache_write_multiplier) == (0.25, 2.0)


def test_flags_beat_env_and_env_beats_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "listen: {port: 1111}\nlog_level: error\npipeline: [toolschema]\n")
    env = {"TOOLSLIM_PORT": "2222", "TOOLSLIM_LOG_LEVEL": "warning", "TOOLSLIM_PIPELINE": ""}
    settings = load_settings(path, {"port": 3333}, env)
    assert settings.port == 3333
    assert settings.log_level == "warning"
    assert settings.pipeline == ("toolschema",)  # an empty variable counts as unset
    assert load_settings(path, {}, env).port == 2222
    assert load_settings(path, {"pipeline": []}, env).pipeline == ()


def test_upstream_flag_overrides_one_upstream_and_keeps_the_others() -> None:
    settings = load_settings(None, {"upstreams": {"openai": "http://127.0.0.1:9/v1/"}}, {})
    assert settings.upstreams["openai"].url == "http://127.0.0.1:9/v1"
    assert settings.upstreams["anthropic"].url == "https://api.anthropic.com"


def test_admin_token_comes_from_env_and_is_not_in_repr() -> None:
    settings = load_settings(None, {}, {"TOOLSLIM_ADMIN_TOKEN": TOKEN})
    assert settings.admin_token == TOKEN
    assert TOKEN not in repr(settings)


def test_component_options_reach_settings(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "components: {toolschema: {}}\n"), {}, {})
    assert dict(settings.components) == {"toolschema": {}}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("listen: {host: 127.0.0.1, prot: 1}\n", ["listen.prot", "host, port"]),
        ("pipelines: [toolschema]\n", ["'pipelines'", "pipeline"]),
        ("timeouts: {total: 5}\n", ["timeouts.total", "idle_chunk"]),
        ("cache: {read: 0.1}\n", ["cache.read", "read_multiplier"]),
    ],
)
def test_unknown_yaml_key_is_an_error_naming_the_key(
    tmp_path: Path, text: str, names: list[str]
) -> None:
    message = error(tmp_path, text)
    assert "unknown key" in message
    for name in names:
        assert name in message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://api.anthropic.com", "http"),
        ("https://", "host"),
        ("api.anthropic.com", "http"),
        ("https://api.anthropic.com/?beta=1", "query"),
        ("https://api.anthropic.com/#x", "fragment"),
        ("https://api.anthropic.com:99999", "valid URL"),
    ],
)
def test_bad_upstream_url_names_the_key_and_value(tmp_path: Path, url: str, why: str) -> None:
    message = error(tmp_path, f"upstreams:\n  anthropic: '{url}'\n")
    assert "upstreams.anthropic" in message
    assert repr(url) in message
    assert why in message


def test_bad_upstream_url_from_flag_names_the_flag() -> None:
    message = error(Path("."), flags={"upstreams": {"gemini": "gopher://x"}})
    assert "--upstream gemini=URL" in message and "'gopher://x'" in message


def test_upstream_url_with_credentials_is_refused_without_showing_them(tmp_path: Path) -> None:
    message = error(tmp_path, "upstreams: {openai: 'https://user:hunter2@api.openai.com'}\n")
    assert "upstreams.openai" in message
    assert "hunter2" not in message


@pytest.mark.parametrize("name", ["stats", "V1", "v1beta", "1st", "a/b"])
def test_upstream_name_that_would_shadow_a_route_is_refused(name: str) -> None:
    message = error(Path("."), flags={"upstreams": {name: "http://127.0.0.1:1"}})
    assert repr(name) in message


def test_default_upstream_must_be_configured(tmp_path: Path) -> None:
    message = error(tmp_path, "default_upstream: bedrock\n")
    assert "default_upstream" in message and "'bedrock'" in message
    assert "anthropic, gemini, openai" in message


@pytest.mark.parametrize(
    ("source", "port", "named"),
    [
        ("yaml", "70000", "listen.port"),
        ("yaml", "-1", "listen.port"),
        ("yaml", "eighty", "listen.port"),
        ("env", "80a", "TOOLSLIM_PORT"),
        ("flag", "true", "--port"),
    ],
)
def test_bad_port_names_the_option_and_the_value(
    tmp_path: Path, source: str, port: str, named: str
) -> None:
    if source == "yaml":
        message = error(tmp_path, f"listen: {{port: {port}}}\n")
        shown = repr(yaml.safe_load(port))
    elif source == "env":
        message = error(Path("."), env={"TOOLSLIM_PORT": port})
        shown = repr(port)
    else:
        message = error(Path("."), flags={"port": True})
        shown = "True"
    assert named in message
    assert shown in message


def test_unknown_pipeline_name_lists_the_known_ones(tmp_path: Path) -> None:
    message = error(tmp_path, "pipeline: [toolschema, compress]\n")
    assert "pipeline" in message and "'compress'" in message and "toolschema" in message


@pytest.mark.parametrize("name", ["format", "dedup", "failed_run", "cmdfilter", "cachesplit"])
def test_planned_pipeline_name_is_a_clear_error_not_a_no_op(name: str) -> None:
    message = error(Path("."), flags={"pipeline": [name]})
    assert "--pipeline" in message and repr(name) in message and "not implemented" in message


def test_duplicate_pipeline_name_is_an_error() -> None:
    message = error(Path("."), env={"TOOLSLIM_PIPELINE": "toolschema,toolschema"})
    assert "TOOLSLIM_PIPELINE" in message and "twice" in message


def test_options_for_an_unknown_component_are_an_error(tmp_path: Path) -> None:
    message = error(tmp_path, "components: {dedup: {window: 3}}\n")
    assert "components" in message and "'dedup'" in message


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("components: {toolbudget: {budget: 3}}\n", "'budget'"),
        ("components: {toolbudget: {budget_bytes: -5}}\n", "-5"),
        ("components: {tooldefs: {depth: 2}}\n", "'depth'"),
    ],
)
def test_bad_options_are_an_error_even_for_a_component_not_in_the_pipeline(
    tmp_path: Path, text: str, named: str
) -> None:
    message = error(tmp_path, "pipeline: [toolschema]\n" + text)
    assert "components" in message and named in message


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "proxy.internal"])
def test_non_loopback_host_without_admin_token_is_refused_saying_why(host: str) -> None:
    message = error(Path("."), flags={"host": host})
    assert "--host" in message and repr(host) in message
    assert "admin_token" in message and "loopback" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_hosts_need_no_token(host: str) -> None:
    assert load_settings(None, {"host": host}, {}).host == host.strip("[]")


def test_non_loopback_host_with_admin_token_is_accepted() -> None:
    settings = load_settings(None, {"host": "0.0.0.0"}, {"TOOLSLIM_ADMIN_TOKEN": TOKEN})
    assert settings.host == "0.0.0.0"


def test_weak_admin_token_is_refused_without_repeating_it() -> None:
    message = error(Path("."), flags={"admin_token": "short secret"})
    assert "--admin-token" in message and "short secret" not in message


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("timeouts: {connect: 0}\n", "timeouts.connect"),
        ("timeouts: {idle_chunk: soon}\n", "timeouts.idle_chunk"),
        ("memo_size: -5\n", "memo_size"),
        ("pool_size: 0\n", "pool_size"),
        ("max_body_bytes: 32 MB\n", "max_body_bytes"),
        ("shutdown_grace: -1\n", "shutdown_grace"),
        ("log_level: loud\n", "log_level"),
        ("cache: {read_multiplier: cheap}\n", "cache.read_multiplier"),
        ("pipeline: 5\n", "pipeline"),
        ("upstreams: [anthropic]\n", "upstreams"),
        ("components: {toolschema: [1]}\n", "components"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    assert named in error(tmp_path, text)


def test_missing_or_malformed_file_is_a_config_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        load_settings(missing, {}, {})
    assert "not valid YAML" in error(tmp_path, "listen: [unclosed\n")
    assert "mapping" in error(tmp_path, "- just\n- a list\n")


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "# nothing\n"), {}, {}) == Settings()


def test_unknown_flag_key_is_a_programming_error() -> None:
    with pytest.raises(ConfigError, match="bogus"):
        load_settings(None, {"bogus": 1}, {})


# --- The table: one row per option, and everything else rendered from it ---------------------


def leaf_fields(cls: type, prefix: str = "") -> list[str]:
    """Settings' field names, a nested dataclass's as `timeouts.connect`."""
    names = []
    for item in dataclasses.fields(cls):
        default = item.default_factory() if callable(item.default_factory) else item.default
        if dataclasses.is_dataclass(default):
            names += leaf_fields(type(default), f"{prefix}{item.name}.")
        else:
            names.append(prefix + item.name)
    return names


def field_of(settings: Settings, name: str) -> Any:
    return functools.reduce(getattr, name.split("."), settings)


def test_there_is_one_row_per_settings_field_and_each_spelling_is_unique() -> None:
    assert [option.name for option in OPTIONS] == leaf_fields(Settings)
    for spelling in ("yaml", "env", "flag"):
        given = [getattr(o, spelling) for o in OPTIONS if getattr(o, spelling) is not None]
        assert len(given) == len(set(given)), spelling
    assert all(o.env is None or o.env.startswith("TOOLSLIM_") for o in OPTIONS)


@pytest.mark.parametrize("name", [option.name for option in OPTIONS])
def test_each_default_as_the_example_writes_it_is_the_settings_default(
    tmp_path: Path, name: str
) -> None:
    option = OPTION[name]
    settings = load_settings(write(tmp_path, yaml_for(option, option.default_text)), {}, {})
    assert field_of(settings, name) == field_of(Settings(), name)


def test_the_websocket_options_default_to_on_and_an_hour() -> None:
    assert Settings().websocket is True
    assert Settings().timeouts.idle_websocket == 3600


def test_example_file_is_the_rendering_of_the_table() -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == render_example(), REGENERATE


def test_docs_configuration_is_the_rendering_of_the_table() -> None:
    assert DOCS.read_text(encoding="utf-8") == render_docs(), REGENERATE
    for option in OPTIONS:
        assert f"| `{option.yaml}` |" in render_docs()


def test_example_file_names_each_options_flag_and_env_var() -> None:
    text = render_example()
    for option in OPTIONS:
        for spelling in (option.flag, option.env):
            assert spelling is None or spelling in text


def test_serve_help_shows_each_flag_with_its_summary_key_and_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", "--help"], env={})
    assert caught.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    for option in OPTIONS:
        if option.flag is None:
            continue
        assert option.flag in shown
        assert option.summary in shown
        assert option.yaml in shown
        if not option.per_key:
            assert f"default {option.default_text}" in shown
    assert "--no-websocket" in shown


# --- Each option in each layer: what a good value gives and that a bad one is named -----------


class Case(NamedTuple):
    good: str  # as written in YAML, in an environment variable or after a flag
    value: Any  # the Settings field that gives
    bad: str  # refused by the option's check in every layer


CASES: dict[str, Case] = {
    "host": Case("localhost", "localhost", "a/b"),
    "port": Case("9000", 9000, "eighty"),
    "default_upstream": Case("openai", "openai", "bedrock"),
    "upstream_proxy": Case("http://127.0.0.1:3128", "http://127.0.0.1:3128", "ftp://x"),
    "websocket": Case("false", False, "maybe"),
    "workers": Case("3", 3, "many"),
    "event_loop": Case("uvloop", "uvloop", "trio"),
    "pipeline": Case("tooldefs,toolschema", ("tooldefs", "toolschema"), "compress"),
    "components": Case(
        "{toolbudget: {budget_bytes: 100}}", {"toolbudget": {"budget_bytes": 100}}, "x"
    ),
    "timeouts.connect": Case("2.5", 2.5, "soon"),
    "timeouts.response_headers": Case("60", 60.0, "0"),
    "timeouts.idle_chunk": Case("30", 30.0, "-1"),
    "timeouts.idle_websocket": Case("90", 90.0, "inf"),
    "timeouts.client_headers": Case("20", 20.0, "never"),
    "timeouts.client_body_idle": Case("15", 15.0, "-3"),
    "timeouts.client_keepalive": Case("5", 5.0, "forever"),
    "memo_size": Case("0", 0, "-5"),
    "memo_bytes": Case("8MiB", 8 * 1024 * 1024, "lots"),
    "pool_size": Case("8", 8, "0"),
    "max_body_bytes": Case("1KiB", 1024, "32 MB"),
    "max_catalogue_bytes": Case("2MiB", 2 * 1024 * 1024, "huge"),
    "max_buffered_bytes": Case("64MiB", 64 * 1024 * 1024, "-1"),
    "max_connections": Case("500", 500, "0"),
    "shutdown_grace": Case("0", 0.0, "-1"),
    "shutdown_delay": Case("5", 5.0, "later"),
    "log_level": Case("critical", "critical", "loud"),
    "admin_token": Case(TOKEN, TOKEN, "short secret"),
    "capture_dir": Case("/tmp/captures", "/tmp/captures", "   "),
    "capture_max_bytes": Case("1000", 1000, "1 TB"),
    "cache_read_multiplier": Case("0.25", 0.25, "0"),
    "cache_write_multiplier": Case("0", 0.0, "nan"),
    "drift_max_sessions": Case("500", 500, "0"),
    "state_file": Case("/var/lib/toolslim.sqlite3", "/var/lib/toolslim.sqlite3", "x.db"),
    "prices": Case("{m: {input: 2}}", {"m": dict.fromkeys(PRICE_KEYS, 2)}, "[1]"),
    "ledger_min_requests": Case("10", 10, "0"),
    "ledger_min_sessions": Case("2", 2, "0"),
    "ledger_tool_metrics": Case("true", True, "maybe"),
}
SECRET = {"admin_token"}  # an error names the option but never repeats the value
WITH_ENV = [o.name for o in OPTIONS if o.env is not None]
WITH_FLAG = [o.name for o in OPTIONS if o.flag is not None and not o.per_key]


def yaml_for(option: Option, text: str) -> str:
    key, _, sub = option.yaml.partition(".")
    return f"{key}:\n  {sub}: {text}\n" if sub else f"{key}: {text}\n"


def flag_argv(option: Option, text: str) -> list[str]:
    assert option.flag is not None
    if option.type == "bool":
        return [option.flag if yaml.safe_load(text) else f"--no-{option.flag[2:]}"]
    return [option.flag, text]


def assert_names(message: str, named: str, name: str, bad: str) -> None:
    assert named in message
    if name in SECRET:
        assert bad not in message
    else:
        assert repr(bad) in message


def test_every_option_has_a_case_except_the_per_key_upstreams() -> None:
    assert set(CASES) == {o.name for o in OPTIONS if not o.per_key}
    assert [o.name for o in OPTIONS if o.per_key] == ["upstreams"]
    assert OPTION["upstreams"].env is None  # one variable cannot spell a mapping


@pytest.mark.parametrize("name", list(CASES))
def test_each_yaml_key_sets_its_option(tmp_path: Path, name: str) -> None:
    settings = load_settings(write(tmp_path, yaml_for(OPTION[name], CASES[name].good)), {}, {})
    assert field_of(settings, name) == CASES[name].value


@pytest.mark.parametrize("name", WITH_ENV)
def test_each_environment_variable_sets_its_option(name: str) -> None:
    option = OPTION[name]
    assert option.env is not None
    settings = load_settings(None, {}, {option.env: CASES[name].good})
    assert field_of(settings, name) == CASES[name].value


@pytest.mark.parametrize("name", WITH_FLAG)
def test_each_serve_flag_sets_its_option(name: str) -> None:
    settings = cli.serve_settings(flag_argv(OPTION[name], CASES[name].good), env={})
    assert field_of(settings, name) == CASES[name].value


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_yaml_value_is_named_by_its_key(tmp_path: Path, name: str) -> None:
    option, bad = OPTION[name], CASES[name].bad
    message = error(tmp_path, yaml_for(option, json.dumps(bad)))
    assert_names(message, f"{option.yaml} in ", name, bad)


@pytest.mark.parametrize("name", WITH_ENV)
def test_a_bad_environment_value_is_named_by_its_variable(name: str) -> None:
    option, bad = OPTION[name], CASES[name].bad
    assert option.env is not None
    message = error(Path("."), env={option.env: bad})
    assert_names(message, f"environment variable {option.env}", name, bad)


@pytest.mark.parametrize("name", WITH_FLAG)
def test_a_bad_flag_value_is_named_by_its_flag(name: str) -> None:
    option, bad = OPTION[name], CASES[name].bad
    message = error(Path("."), flags={name: bad})
    assert_names(message, f"flag {option.flag}", name, bad)


@pytest.mark.parametrize("name", WITH_FLAG)
def test_a_bad_yaml_value_is_an_error_even_when_a_flag_overrides_it(
    tmp_path: Path, name: str
) -> None:
    option, case = OPTION[name], CASES[name]
    message = error(tmp_path, yaml_for(option, json.dumps(case.bad)), flags={name: case.good})
    assert_names(message, f"{option.yaml} in ", name, case.bad)


@pytest.mark.parametrize("name", WITH_ENV)
def test_a_bad_value_is_an_error_even_when_a_later_layer_overrides_it(
    tmp_path: Path, name: str
) -> None:
    option, case = OPTION[name], CASES[name]
    assert option.env is not None
    message = error(tmp_path, yaml_for(option, json.dumps(case.bad)), env={option.env: case.good})
    assert_names(message, f"{option.yaml} in ", name, case.bad)
    if option.flag is not None:
        message = error(Path("."), env={option.env: case.bad}, flags={name: case.good})
        assert_names(message, f"environment variable {option.env}", name, case.bad)


def test_yaml_port_abc_with_port_flag_is_an_error_naming_the_yaml_key(tmp_path: Path) -> None:
    message = error(tmp_path, "listen: {port: abc}\n", flags={"port": 9000})
    assert "listen.port" in message and "'abc'" in message


def test_a_bad_yaml_upstream_is_an_error_even_when_the_flag_overrides_it(tmp_path: Path) -> None:
    text = "upstreams: {openai: 'ftp://x'}\n"
    message = error(tmp_path, text, flags={"upstreams": {"openai": "http://127.0.0.1:9"}})
    assert "upstreams.openai" in message and "'ftp://x'" in message


def test_upstream_flag_is_repeatable_and_each_one_sets_one_upstream() -> None:
    argv = ["--upstream", "openai=http://127.0.0.1:9/v1", "--upstream", "azure=https://a.example"]
    upstreams = cli.serve_settings(argv, env={}).upstreams
    assert upstreams["openai"] == Upstream("openai", "http://127.0.0.1:9/v1")
    assert upstreams["azure"] == Upstream("azure", "https://a.example")
    assert upstreams["anthropic"] == Settings().upstreams["anthropic"]


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error", "critical"])
def test_log_level_flag_accepts_every_level_including_critical(level: str) -> None:
    assert cli.serve_settings(["--log-level", level], env={}).log_level == level
    assert load_settings(None, {}, {"TOOLSLIM_LOG_LEVEL": level}).log_level == level


def test_websocket_is_on_by_default_and_each_layer_turns_it_off(tmp_path: Path) -> None:
    assert cli.serve_settings([], env={}).websocket is True
    assert cli.serve_settings(["--no-websocket"], env={}).websocket is False
    assert load_settings(None, {}, {"TOOLSLIM_WEBSOCKET": "false"}).websocket is False
    off = write(tmp_path, "websocket: false\n")
    assert load_settings(off, {}, {}).websocket is False
    assert cli.serve_settings(["--config", off, "--websocket"], env={}).websocket is True


def test_a_bad_serve_flag_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--port", "abc"], env={}) == 2
    err = capsys.readouterr().err
    assert "configuration error: flag --port" in err and "'abc'" in err


# --- toolslim report: the cache multipliers are the same options, with the same checks --------


@pytest.mark.parametrize(
    ("argv", "named", "shown"),
    [
        (["--cache-read-multiplier", "0"], "flag --cache-read-multiplier", "'0'"),
        (["--cache-read-multiplier", "inf"], "flag --cache-read-multiplier", "'inf'"),
        (["--cache-write-multiplier", "-1"], "flag --cache-write-multiplier", "'-1'"),
        (["--cache-write-multiplier", "nan"], "flag --cache-write-multiplier", "'nan'"),
    ],
)
def test_report_refuses_a_bad_multiplier_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str, shown: str
) -> None:
    assert cli.main(["report", str(tmp_path / "none.jsonl"), *argv], env={}) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert named in captured.err and shown in captured.err


def capture(tmp_path: Path) -> str:
    tools = [{"name": "a", "input_schema": {"type": "object", "title": "A"}}]
    body = json.dumps({"model": "m", "messages": [], "tools": tools})
    path = tmp_path / "capture.jsonl"
    path.write_text(json.dumps({"v": 1, "body_sha256": "0" * 64, "body": body}) + "\n")
    return str(path)


def test_report_takes_its_multipliers_from_the_flags_else_the_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, "cache: {read_multiplier: 0.2, write_multiplier: 2}\n")

    def multipliers(*argv: str) -> tuple[float, float]:
        code = cli.main(["report", capture(tmp_path), "--json", *argv], env={})
        captured = capsys.readouterr()
        assert code == 0, captured.err
        [result] = json.loads(captured.out)
        return result["cache_read_multiplier"], result["cache_write_multiplier"]

    assert multipliers() == (0.1, 1.25)
    assert multipliers("--config", config) == (0.2, 2.0)
    assert multipliers("--config", config, "--cache-read-multiplier", "0.5") == (0.5, 2.0)


def test_proxy_choice_follows_scheme_and_no_proxy_as_curl_reads_them() -> None:
    env = {"https_proxy": "http://p:1", "HTTP_PROXY": "http://q:2", "NO_PROXY": ".corp"}
    assert proxy_for("https://api.anthropic.com", None, env) == "http://p:1"
    assert proxy_for("http://127.0.0.1:8000", None, env) == "http://q:2"
    assert proxy_for("https://llm.corp", None, env) is None
    assert proxy_for("https://a.llm.corp", None, env) is None
    assert proxy_for("https://notcorp.com", None, env) == "http://p:1"
    assert proxy_for("https://x", None, {"ALL_PROXY": "http://r:3"}) == "http://r:3"
    assert proxy_for("https://x", None, {"NO_PROXY": "*", "ALL_PROXY": "http://r:3"}) is None
    assert proxy_for("https://x", "none", env) is None
    assert proxy_for("https://x", "http://s:4", {}) == "http://s:4"
    assert proxy_for("https://x", None, {}) is None
