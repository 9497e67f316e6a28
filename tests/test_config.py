"""config: defaults, precedence flags > env > YAML > defaults, and errors naming key and value."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolslim.config import ConfigError, MiB, Settings, Timeouts, Upstream, load_settings
from toolslim.pipeline import Pipeline

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.yaml"
TOKEN = "0123456789abcdef-secret"


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
    assert set(data) == {
        "listen",
        "upstreams",
        "default_upstream",
        "pipeline",
        "components",
        "timeouts",
        "memo_size",
        "pool_size",
        "max_body_bytes",
        "shutdown_grace",
        "log_level",
        "admin_token",
        "capture_dir",
        "capture_max_bytes",
        "cache",
    }
    assert set(data["timeouts"]) == {"connect", "response_headers", "idle_chunk"}


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
