"""`toolslim compact [FILE|-] [--pipeline NAME,...] [--config FILE]`, run as a child process:
output on stdout, a one-line summary on stderr, exit 0 whenever the input could be read (every
fail-open case comes out byte-identical), exit 2 when it could not. Also byte stability across
processes started with different PYTHONHASHSEED."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = (
    b'[{"name":"Read","description":"Read a file","input_schema":{"type":"object",'
    b'"title":"ReadInput","properties":{"file_path":{"type":"string","title":"Path"}},'
    b'"required":["file_path"]}},{"type":"web_search_20250305","name":"web_search"}]'
)
COMPACTED = (
    b'[{"description":"Read a file","input_schema":{"properties":{"file_path":'
    b'{"type":"string"}},"required":["file_path"],"type":"object"},"name":"Read"},'
    b'{"name":"web_search","type":"web_search_20250305"}]'
)
BODY = b'{"model":"claude","max_tokens":5,"messages":[],"tools":' + TOOLS + b',"stream":true}'
SUMMARY = re.compile(
    r"toolslim: toolschema: applied, tools (\d+), changed (\d+), "
    r"bytes (\d+) -> (\d+), tokens (\d+) -> (\d+)\n"
)


def clean_env(**extra: str) -> dict[str, str]:
    """The parent's environment without any TOOLSLIM_ setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSLIM_")}
    env.update(extra)
    return env


def toolslim_compact(
    *args: str,
    stdin: bytes = b"",
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolslim", "compact", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=clean_env() if env is None else env,
        timeout=60,
        check=False,
    )


def test_compact_reads_a_file_and_writes_the_body_to_stdout(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(BODY)
    result = toolslim_compact(str(path), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == BODY.replace(TOOLS, COMPACTED)
    match = SUMMARY.fullmatch(result.stderr.decode())
    assert match is not None, result.stderr
    tools, changed, before, after, tokens_before, tokens_after = map(int, match.groups())
    assert (tools, changed) == (2, 1)
    assert (before, after) == (len(TOOLS), len(COMPACTED))
    assert tokens_before > tokens_after > 0


@pytest.mark.parametrize("args", [("-",), ()], ids=["dash", "no argument"])
def test_compact_reads_stdin(args: tuple[str, ...], tmp_path: Path) -> None:
    result = toolslim_compact(*args, stdin=BODY, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == BODY.replace(TOOLS, COMPACTED)


def test_compact_takes_a_bare_tools_array_and_returns_an_array(tmp_path: Path) -> None:
    result = toolslim_compact("-", stdin=TOOLS + b"\n", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == COMPACTED + b"\n"
    assert SUMMARY.fullmatch(result.stderr.decode())


def test_compact_takes_a_pretty_printed_bare_array_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(json.loads(TOOLS), indent=2))
    result = toolslim_compact(str(path), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == COMPACTED


def test_compact_runs_the_pipeline_it_is_given(tmp_path: Path) -> None:
    result = toolslim_compact("--pipeline", "toolschema", stdin=BODY, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == BODY.replace(TOOLS, COMPACTED)


def test_compact_with_an_empty_pipeline_passes_the_input_through(tmp_path: Path) -> None:
    result = toolslim_compact("--pipeline", "", stdin=BODY, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == BODY
    assert result.stderr == b"toolslim: empty pipeline, input passed through\n"


def test_compact_rejects_an_unknown_component_naming_it(tmp_path: Path) -> None:
    result = toolslim_compact("--pipeline", "toolschema,shrink", stdin=BODY, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == b""
    assert b"shrink" in result.stderr


def test_compact_reads_the_pipeline_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "toolslim.yaml"
    config.write_text("pipeline: []\n")
    result = toolslim_compact("--config", str(config), stdin=BODY, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == BODY
    from_env = toolslim_compact(
        stdin=BODY, cwd=tmp_path, env=clean_env(TOOLSLIM_CONFIG=str(config))
    )
    assert from_env.stdout == BODY
    flag_wins = toolslim_compact(
        "--config", str(config), "--pipeline", "toolschema", stdin=BODY, cwd=tmp_path
    )
    assert flag_wins.stdout == BODY.replace(TOOLS, COMPACTED)


def test_compact_reports_a_bad_config_file_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "toolslim.yaml"
    config.write_text("pipeline: [nonsense]\n")
    result = toolslim_compact("--config", str(config), stdin=BODY, cwd=tmp_path)
    assert result.returncode == 2
    assert b"nonsense" in result.stderr


FAIL_OPEN = {
    "invalid JSON": (b'{"tools":[{"name":"a","input_schema":{"title":"x"}}]', "not_json"),
    "invalid UTF-8": (b'{"tools":[{"name":"\xff","input_schema":{"title":"x"}}]}', "not_json"),
    "empty input": (b"", "not_json"),
    "no tools": (b'{"model":"m","messages":[]}', "no_tools"),
    "a body that is not an object": (b'"text"', "unsupported_shape"),
    "tools that are not a list": (b'{"tools":{"name":"a"}}', "unsupported_shape"),
    "duplicate keys in the catalogue": (
        b'{"tools":[{"name":"a","name":"b","input_schema":{"title":"x"}}]}',
        "duplicate_keys",
    ),
    "nesting past the limit": (b'{"tools":' + b"[" * 1100 + b"]" * 1100 + b"}", "too_deep"),
    "nothing to strip": (
        b'{"tools":[{"input_schema":{"type":"object"},"name":"a"}]}',
        "nothing_to_strip",
    ),
    "a bare array that is not JSON": (b'[{"name":"a",', "not_json"),
}


@pytest.mark.parametrize(("data", "reason"), FAIL_OPEN.values(), ids=FAIL_OPEN.keys())
def test_every_fail_open_case_exits_0_with_the_input_byte_identical(
    data: bytes, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "input"
    path.write_bytes(data)
    result = toolslim_compact(str(path), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == data
    assert result.stderr.decode().startswith(f"toolslim: toolschema: skipped ({reason})")
    assert result.stderr.count(b"\n") == 1


@pytest.mark.parametrize("name", ["missing.json", "."], ids=["missing file", "a directory"])
def test_an_unreadable_file_exits_2_with_a_clear_message(name: str, tmp_path: Path) -> None:
    result = toolslim_compact(name, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode().startswith(f"toolslim compact: cannot read {name}: ")


def test_output_is_byte_identical_across_processes_with_different_hash_seeds(
    tmp_path: Path,
) -> None:
    # Many keys at every level, non-ASCII names and order-keeping maps: anything that leaned
    # on set or dict-of-str iteration order would show up here.
    properties = {f"p{i}é{chr(0x4E00 + i)}": {"type": "string", "title": str(i)} for i in range(40)}
    schema = {
        "type": "object",
        "title": "T",
        "properties": properties,
        "$defs": {f"d{i}": {"enum": [{f"k{j}": j for j in range(9, 0, -1)}]} for i in range(9)},
        "default": {f"z{i}": i for i in range(30, 0, -1)},
    }
    tools = [{"name": f"t{n}", "input_schema": schema} for n in range(5)]
    path = tmp_path / "body.json"
    path.write_bytes(json.dumps({"messages": [], "tools": tools}).encode())
    outputs = set()
    for seed in ("0", "1", "42", "4242", "random"):
        env = clean_env(PYTHONHASHSEED=seed)
        result = toolslim_compact(str(path), cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout)
    assert len(outputs) == 1
    (output,) = outputs
    assert output != path.read_bytes()
    assert list(json.loads(output)["tools"][0]["input_schema"]["properties"]) == list(properties)


def test_the_compact_command_runs_with_aiohttp_and_prometheus_client_blocked() -> None:
    code = (
        "import sys\n"
        'sys.modules["aiohttp"] = None\n'
        'sys.modules["prometheus_client"] = None\n'
        "from toolslim.cli import main\n"
        "sys.exit(main(['compact', '--pipeline', 'toolschema', '-']))\n"
    )
    body = b'{"tools":[{"name":"a","input_schema":{"title":"x","type":"object"}}]}'
    result = subprocess.run(
        [sys.executable, "-c", code], input=body, capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == b'{"tools":[{"input_schema":{"type":"object"},"name":"a"}]}'
