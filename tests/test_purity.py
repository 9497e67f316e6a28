"""The pure rooms import without aiohttp or prometheus_client: both are blocked in a fresh
interpreter before the import, so any import of them, however indirect, fails."""

from __future__ import annotations

import subprocess
import sys

import pytest

from child import python_output

PURE = [
    "catalog",
    "checks",
    "advice",
    "codings",
    "compact",
    "counters",
    "entry",
    "envelope",
    "errors",
    "drift",
    "exchange",
    "facts",
    "fleet",
    "memo",
    "optiondocs",
    "options",
    "pipeline",
    "routing",
    "schema",
    "sse",
    "stats",
    "tables",
    "tokens",
    "toolorder",
    "transform",
    "usage",
]

BLOCKED_IMPORT = """
import sys
sys.modules["aiohttp"] = None
sys.modules["prometheus_client"] = None
import importlib
importlib.import_module("toolslim." + %r)
leaked = sorted(
    name for name, module in sys.modules.items()
    if module is not None and name.split(".")[0] in ("aiohttp", "prometheus_client")
)
assert not leaked, leaked
print("ok")
"""


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_imports_with_aiohttp_and_prometheus_client_blocked(module: str) -> None:
    assert python_output(BLOCKED_IMPORT % module) == "ok\n"


def test_blocking_works_so_the_check_can_fail() -> None:
    code = 'import sys\nsys.modules["aiohttp"] = None\nimport aiohttp\n'
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


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
