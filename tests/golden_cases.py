"""The golden-case loader every module's tests share: `tests/golden/*.json` files, each a list of
`{"description", "input", "expected"}`, parametrized by description."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"


def golden(pattern: str) -> list[Any]:
    """The cases of every golden file matching `pattern` (a file name or a glob), in order."""
    cases = []
    for path in sorted(GOLDEN.glob(pattern)):
        for case in json.loads(path.read_text(encoding="utf-8")):
            cases.append(pytest.param(case, id=case["description"]))
    assert cases, f"no golden cases match {pattern!r}"
    return cases
