"""How the tool ledger reads the name of a Responses call that names no namespace, as the real
Codex CLI 0.171 runs them (docs/clients.md): a bare name is a top-level tool or a member of
the `functions` namespace, never a member of another namespace."""

from __future__ import annotations

import orjson

from toolslim.core.facts import CatalogueFacts
from toolslim.observe.ledger.book import ToolLedger

CODEX = [
    {"type": "function", "name": "top"},
    {"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec"}]},
    {"type": "namespace", "name": "clock", "tools": [{"type": "function", "name": "sleep"}]},
]


def called(calls: list[tuple[str, str | None]]) -> tuple[dict[str, int], dict[str, int]]:
    book = ToolLedger(read_multiplier=0.1, write_multiplier=1.25)
    book.record(
        client="codex",
        api="openai-responses",
        model="gpt-5",
        session="s",
        catalogues=[CatalogueFacts(orjson.dumps(CODEX))],
        usage=None,
        calls=calls,
        cache_miss=None,
    )
    export = book.export()
    rows = {
        tool: row["calls"] for day in export["calls"].values() for tool, row in day["codex"].items()
    }
    return rows, export["unknown_calls"]["names"]


def test_a_bare_name_is_a_top_level_tool_or_a_member_of_functions() -> None:
    rows, unknown = called([("top", None), ("exec", None), ("exec", "functions")])

    assert rows == {"top": 1, "functions/exec": 2}
    assert unknown == {}


def test_a_member_of_another_namespace_is_called_only_with_its_namespace() -> None:
    rows, unknown = called([("sleep", "clock"), ("sleep", None), ("exec", "clock")])

    assert rows == {"clock/sleep": 1}
    assert unknown == {"sleep": 1, "clock/exec": 1}
