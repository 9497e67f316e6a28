"""The tool ledger without sockets: its book, the merge the workers and the state file rely on,
the state file itself (SQLite in a temporary folder), prices and the Prometheus series."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import genai_prices
import orjson
import pytest

from toolslim.core.facts import CatalogueFacts
from toolslim.core.tokens import count_tokens
from toolslim.core.toolfacts import tool_facts
from toolslim.observe.ledger import render
from toolslim.observe.ledger.book import ToolLedger, empty, merge
from toolslim.observe.ledger.prices import Prices
from toolslim.observe.ledger.series import series
from toolslim.observe.ledger.state import StateError, StateFile, since
from toolslim.wire.usage import Usage

DAY = 1_796_428_800.0  # 2026-12-05T00:00:00Z
SCHEMA = {"type": "object"}
TOOLS = [
    {"name": "Read", "input_schema": SCHEMA},
    {"name": "mcp__git__status", "input_schema": SCHEMA},
    {"name": "mcp__docs__search", "input_schema": SCHEMA, "defer_loading": True},
]
RAW = orjson.dumps(TOOLS)
READ = Usage(input_tokens=10, cache_read_input_tokens=1000)


class Clock:
    def __init__(self) -> None:
        self.now = DAY + 3600

    def __call__(self) -> float:
        return self.now


def ledger(clock: Clock | None = None, **extra: Any) -> ToolLedger:
    return ToolLedger(read_multiplier=0.1, write_multiplier=1.25, clock=clock or Clock(), **extra)


def offer(
    book: ToolLedger, session: str = "s1", calls: Any = (), usage: Usage | None = READ
) -> None:
    facts = CatalogueFacts(RAW)
    new = book.record(
        client="claude-cli",
        api="anthropic",
        model="claude-sonnet-4-5",
        session=session,
        catalogues=[facts],
        usage=usage,
        calls=calls,
        cache_miss=None,
    )
    for catalogue in new:
        book.known(catalogue.digest, tool_facts(catalogue.forwarded, count_tokens))


def shown(export: dict[str, Any], now: float = DAY + 7200, **unused: int) -> dict[str, Any]:
    limits = {"min_requests": 2, "min_sessions": 2} | unused
    return render.render(export, now, **limits)


def test_tool_facts_name_own_and_count_each_tool_as_forwarded() -> None:
    facts = tool_facts(RAW, count_tokens)
    assert facts.names == ("Read", "mcp__git__status", "mcp__docs__search")
    assert facts.servers == ("builtin", "git", "docs")
    assert facts.deferred == (False, False, True)
    assert facts.tokens == tuple(count_tokens(orjson.dumps(tool)) for tool in TOOLS)


def test_a_namespace_member_is_named_with_its_namespace_and_owned_by_its_server() -> None:
    raw = orjson.dumps(
        [{"type": "namespace", "name": "mcp__aws_docs", "tools": [{"name": "read", "x": 1}]}]
    )
    facts = tool_facts(raw, count_tokens)
    assert facts.names == ("mcp__aws_docs/read",) and facts.servers == ("aws_docs",)


def test_unused_tools_and_servers_are_those_never_called_past_both_thresholds() -> None:
    book = ledger()
    offer(book, "s1", calls=[("Read", None)])
    offer(book, "s2")
    tools = shown(book.export())
    assert [item["tool"] for item in tools["unused"]] == ["mcp__git__status"]
    servers = {row["server"]: row for row in tools["servers"]}
    assert servers["git"]["unused"] and not servers["builtin"]["unused"]
    assert not servers["docs"]["unused"]  # deferred only: not in the prompt
    assert [entry["server"] for entry in tools["advice"]] == ["git"]
    assert shown(book.export(), min_sessions=3)["unused"] == []


def test_a_call_outside_the_catalogue_is_unknown_and_named() -> None:
    book = ledger()
    offer(book, calls=[("Nope", None), ("Nope", None), ("Read", None)])
    export = book.export()
    assert export["unknown_calls"] == {"total": 2, "names": {"Nope": 2}}
    assert {item["tool"]: item["calls"] for item in shown(export)["costliest"]}["Read"] == 1


def test_cost_today_counts_only_the_current_utc_day() -> None:
    clock = Clock()
    book = ledger(clock)
    offer(book)
    clock.now += 86_400
    offer(book)
    tools = shown(book.export(), now=clock.now)
    git = {row["server"]: row for row in tools["servers"]}["git"]
    assert git["cost_today"]["equivalents"] == pytest.approx(git["cost"]["equivalents"] / 2)
    assert git["cost_per_day"]["usd"] == pytest.approx(git["cost"]["usd"] / 2)


def test_merging_two_ledgers_gives_exactly_the_counts_of_one_that_saw_everything() -> None:
    one, two, both = ledger(), ledger(), ledger()
    for index in range(5):
        target = one if index % 2 else two
        calls = [("Read", None)] if index % 3 == 0 else []
        offer(target, f"s{index % 3}", calls)
        offer(both, f"s{index % 3}", calls)
    merged, alone = shown(merge([one.export(), two.export()])), shown(both.export())
    assert merged["costliest"] == alone["costliest"]
    assert [r["offered_tokens"] for r in merged["servers"]] == [
        r["offered_tokens"] for r in alone["servers"]
    ]


def test_since_is_what_was_counted_after_an_earlier_export() -> None:
    book = ledger()
    offer(book, "s1", calls=[("Read", None)])
    before = book.live()
    offer(book, "s2", calls=[("Read", None), ("Nope", None)])
    after = book.live()
    assert shown(merge([before, since(after, before)]))["costliest"] == shown(after)["costliest"]
    assert since(after, after) == empty()


def test_the_state_file_keeps_what_was_written_and_adds_what_comes_next(tmp_path: Path) -> None:
    path = str(tmp_path / "state" / "ledger.sqlite3")
    book = ledger()
    offer(book, "s1", calls=[("Read", None)])
    state = StateFile(path)
    state.add(book.live())
    state.close()
    again = StateFile(path)
    restarted = ledger(base=again.load())
    offer(restarted, "s2")
    again.add(restarted.live())
    offer(book, "s2")
    assert shown(StateFile(path).load())["costliest"] == shown(book.export())["costliest"]
    assert shown(restarted.export())["costliest"] == shown(book.export())["costliest"]


def test_a_file_that_is_not_a_database_is_a_clear_error_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    path.write_bytes(b"not sqlite at all " * 100)
    with pytest.raises(StateError, match=f"{path} is not a toolslim state file"):
        StateFile(str(path))
    assert path.read_bytes() == b"not sqlite at all " * 100


def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(StateError, match="another program's SQLite database"):
        StateFile(str(path))


def test_a_configured_price_wins_and_an_unknown_model_is_unpriced() -> None:
    prices = Prices({"my-model": {"input": 2.0, "cache_read": 0.2, "cache_write": 2.5}})
    assert prices.per_token("my-model", "anthropic", "read", 10) == pytest.approx(0.2e-6)
    assert prices.per_token("no-such-model", "anthropic", "uncached", 10) is None
    assert prices.per_token("claude-sonnet-4-5", "anthropic", "unknown", 10) is None


@pytest.mark.parametrize("size", [1000, 300_000])
def test_a_price_is_genai_prices_own_at_the_requests_size(size: int) -> None:
    usage = genai_prices.Usage(input_tokens=size, cache_write_tokens=size)
    price = genai_prices.calc_price(usage, "claude-sonnet-4-5", provider_id="anthropic")
    unit = Prices().per_token("claude-sonnet-4-5", "anthropic", "write", size)
    assert unit == pytest.approx(float(price.input_price / size))


def test_series_are_per_server_summed_over_clients_and_per_tool_only_when_asked() -> None:
    book = ledger()
    offer(book, calls=[("mcp__git__status", None)])
    tools = shown(book.export())
    made = {name: dict(values) for _, name, _, _, values in series(tools, per_tool=False)}
    assert made["toolslim_tool_calls"] == {("builtin",): 0, ("docs",): 0, ("git",): 1}
    assert sum(made["toolslim_tool_offered_tokens"].values()) == sum(
        sum(row["offered_tokens"].values()) for row in tools["servers"]
    )
    assert "toolslim_tool_costliest_calls" not in made
    assert "toolslim_tool_costliest_calls" in {name for _, name, *_ in series(tools, True)}


def test_a_call_naming_no_namespace_is_the_one_namespace_member_of_that_name() -> None:
    raw = orjson.dumps(
        [
            {"type": "namespace", "name": "functions", "tools": [{"name": "exec"}]},
            {"type": "namespace", "name": "a", "tools": [{"name": "twice"}]},
            {"type": "namespace", "name": "b", "tools": [{"name": "twice"}]},
        ]
    )
    book = ledger()
    book.record(
        client="codex",
        api="openai-responses",
        model="gpt-5",
        session="s",
        catalogues=[CatalogueFacts(raw)],
        usage=None,
        calls=[("exec", None), ("twice", None), ("twice", "b")],
        cache_miss=None,
    )
    export = book.export()
    called = export["calls"][next(iter(export["calls"]))]["codex"]
    assert {tool: row["calls"] for tool, row in called.items()} == {
        "functions/exec": 1,
        "b/twice": 1,
    }
    assert export["unknown_calls"] == {"total": 1, "names": {"twice": 1}}


def test_gemini_cli_names_its_mcp_tools_with_single_underscores() -> None:
    raw = orjson.dumps(
        [{"functionDeclarations": [{"name": "mcp_aws-docs_read_documentation"}, {"name": "glob"}]}]
    )
    facts = tool_facts(raw, count_tokens)
    assert facts.names == ("mcp_aws-docs_read_documentation", "glob")
    assert facts.servers == ("aws-docs", "builtin")


def test_the_clients_roll_up_their_servers() -> None:
    book = ledger()
    offer(book, calls=[("Read", None)])
    offer(book, "s2")
    tools = shown(book.export())
    [client] = tools["clients"]
    assert client["client"] == "claude-cli" and client["requests"] == 2
    assert client["servers"] == len(tools["servers"]) == 3
    assert client["calls"] == 1 and client["unused_servers"] == 1
    assert client["cost"]["equivalents"] == pytest.approx(
        sum(row["cost"]["equivalents"] for row in tools["servers"])
    )
