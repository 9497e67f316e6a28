"""Tests for toolslim.core.memo: the bounded LRU keyed by exact bytes, and the memo-hit proof held
to its reference, the full parse (`compact` with an empty memo): a warm memo gives the same
bytes, reasons and runs as an empty one, and a session's repeated turns hit without a search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bodies import CATALOGUE, COMPACTED, STRIP, anthropic, bodies, cold
from toolslim.core import envelope
from toolslim.core import memo as memo_room
from toolslim.core.entry import Entry
from toolslim.core.envelope import compact
from toolslim.core.memo import Memo, memo_hit
from toolslim.core.pipeline import Pipeline


def entry(raw: bytes) -> Entry:
    return Entry(raw, None, ())


# The memo: a bounded LRU keyed by exact bytes


def test_memo_capacity_is_respected_and_the_oldest_entry_goes_first() -> None:
    memo = Memo(2)
    for raw in (b"[1]", b"[2]", b"[3]"):
        memo.put(Memo.key(raw), entry(raw))
    assert len(memo) == 2
    assert memo.get(Memo.key(b"[1]")) is None
    assert memo.get(Memo.key(b"[2]")) is not None
    assert memo.get(Memo.key(b"[3]")) is not None


def test_memo_get_refreshes_an_entry_so_the_least_recently_used_goes() -> None:
    memo = Memo(2)
    memo.put(Memo.key(b"[1]"), entry(b"[1]"))
    memo.put(Memo.key(b"[2]"), entry(b"[2]"))
    memo.get(Memo.key(b"[1]"))
    memo.put(Memo.key(b"[3]"), entry(b"[3]"))
    assert memo.get(Memo.key(b"[2]")) is None
    assert memo.get(Memo.key(b"[1]")) is not None


def test_memo_match_at_refreshes_an_entry_too() -> None:
    long_a, long_b, long_c = (b"[" + bytes([c]) * 80 + b"]" for c in b"abc")
    memo = Memo(2)
    memo.put(Memo.key(long_a), entry(long_a))
    memo.put(Memo.key(long_b), entry(long_b))
    assert memo.match_at(b"xx" + long_a + b"}", 2) is not None
    memo.put(Memo.key(long_c), entry(long_c))
    assert memo.get(Memo.key(long_b)) is None
    assert memo.match_at(b"xx" + long_b + b"}", 2) is None
    assert memo.match_at(b"xx" + long_a + b"}", 2) is not None


def test_the_memos_recent_entry_is_the_one_used_last_by_any_way_in() -> None:
    long_a, long_b = (b"[" + bytes([c]) * 80 + b"]" for c in b"ab")
    memo = Memo(2)
    assert memo.recent is None
    a, b = entry(long_a), entry(long_b)
    memo.put(Memo.key(long_a), a)
    memo.put(Memo.key(long_b), b)
    assert memo.recent is b
    memo.get(Memo.key(long_a))
    assert memo.recent is a
    memo.match_at(b"xx" + long_b + b"}", 2)
    assert memo.recent is b
    memo.put(Memo.key(b"[3]"), c := entry(b"[3]"))  # evicts a, the least recently used
    assert memo.recent is c and memo.get(Memo.key(long_a)) is None
    memo.clear()
    assert memo.recent is None
    nothing_kept = Memo(0)
    nothing_kept.put(Memo.key(long_a), a)
    assert nothing_kept.recent is None


def test_what_the_owner_derives_from_an_entry_is_made_once_and_kept_with_it() -> None:
    memo = Memo[Entry, list[bytes]](2)
    made: list[bytes] = []

    def derive(entry: Entry) -> list[bytes]:
        made.append(entry.raw)
        return [entry.raw]

    a, b = entry(b"[1]"), entry(b"[2]")
    memo.put(Memo.key(b"[1]"), a)
    first = memo.derived(a, derive)
    assert memo.derived(a, derive) is first and made == [b"[1]"]
    memo.put(Memo.key(b"[2]"), b)  # now the entry used last: a's note is made afresh
    assert memo.derived(a, derive) == first and made == [b"[1]", b"[1]"]
    memo.get(Memo.key(b"[1]"))
    assert memo.derived(a, derive) is first  # kept with a all along
    assert Memo[Entry, list[bytes]](0).derived(a, derive) == first  # a memo keeping nothing


def test_memo_match_at_needs_every_byte_of_the_catalogue() -> None:
    raw = b"[" + b"a" * 100 + b"]"
    memo = Memo(4)
    memo.put(Memo.key(raw), entry(raw))
    assert memo.match_at(b"{" + raw[:-2] + b"b]}", 1) is None
    assert memo.match_at(b"{" + raw + b"}", 1) is not None


def test_memo_capacity_zero_stores_nothing() -> None:
    memo = Memo(0)
    memo.put(Memo.key(b"[1]"), entry(b"[1]"))
    assert len(memo) == 0
    assert memo.get(Memo.key(b"[1]")) is None
    pipeline = Pipeline(["toolschema"], memo_size=0)
    pipeline.run(anthropic())
    report = pipeline.run(anthropic())
    assert (report.memo_hits, report.memo_misses) == (0, 1)
    assert pipeline.memo_gauges() == (0, 0)


def test_memo_is_keyed_by_the_exact_catalogue_bytes() -> None:
    pipeline = Pipeline(["toolschema"])
    spaced = CATALOGUE.replace(b'"type":"object"', b'"type": "object"')
    assert pipeline.run(anthropic()).memo_misses == 1
    assert pipeline.run(anthropic(tools=spaced)).memo_misses == 1
    assert pipeline.run(anthropic(messages=b'[{"role":"user"}]')).memo_hits == 1
    assert len(pipeline.memo) == 2


def test_memo_clear_empties_both_indexes() -> None:
    memo = Memo(4)
    compact(anthropic(), memo, STRIP)
    memo.clear()
    assert len(memo) == 0
    assert compact(anthropic(), memo, STRIP).catalogues[0][1] is False


# The memo-hit path: proven equal to the full parse


def test_a_memo_hit_is_found_without_the_full_parse() -> None:
    memo = Memo(4)
    compact(anthropic(), memo, STRIP)
    bodies = [
        anthropic(messages=b'[{"role":"user","content":"' + b"x" * 5000 + b'"}]'),
        b'{"tools":' + CATALOGUE + b',"messages":[{"role":"user","content":"hi"}]}',
        b'{ "tools" :\n ' + CATALOGUE + b" \n}",
    ]
    expected = [cold(body).body for body in bodies]
    for body, out in zip(bodies, expected, strict=True):
        # memo_hit is compact's first step: a hit it finds is the whole answer, unparsed.
        assert memo_hit(body, memo, nested=True) is not None
        result = compact(body, memo, STRIP)
        assert result.reason is None
        assert [hit for _, hit in result.catalogues] == [True]
        assert result.body == out != body


TOOL_USE = (
    b'{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{"tools":'
)
TRICKY = {
    "catalogue bytes nested under a tools key in a tool_use input": anthropic(
        messages=b"[" + TOOL_USE + CATALOGUE + b"}}]}]"
    ),
    "catalogue bytes nested in a tool_use input after the top-level tools": b'{"tools":'
    + CATALOGUE
    + b',"messages":['
    + TOOL_USE
    + CATALOGUE
    + b"}}]}]}",
    "only a nested catalogue, no top-level tools": b'{"messages":['
    + TOOL_USE
    + CATALOGUE
    + b"}}]}]}",
    "a tools key written inside a string": anthropic(
        messages=b'[{"role":"user","content":"{\\"tools\\":'
        + CATALOGUE.replace(b'"', b'\\"')
        + b'}"}]'
    ),
    "tools spelled with a \\u0073 escape as the only catalogue": b'{"tool\\u0073":'
    + CATALOGUE
    + b"}",
    "tools spelled with an escape after the literal one": anthropic()[:-1]
    + b',"tool\\u0073":[{"name":"x","input_schema":{"title":"x"}}]}',
    "tools spelled with an escape before the literal one": b'{"tool\\u0073":[{"name":"x",'
    b'"input_schema":{"title":"x"}}],"model":"m","tools":' + CATALOGUE + b"}",
    "a second top-level tools key after the catalogue": anthropic()[:-1]
    + b',"tools":[{"name":"x","input_schema":{"title":"y"}}]}',
    "a second top-level tools key before the catalogue": b'{"tools":[{"name":"x",'
    b'"input_schema":{"title":"y"}}],"model":"m","tools":' + CATALOGUE + b"}",
    "the same catalogue twice at the top level": b'{"tools":'
    + CATALOGUE
    + b',"tools":'
    + CATALOGUE
    + b"}",
    "the catalogue inside a nested object at depth two": b'{"x":{"tools":' + CATALOGUE + b"}}",
    "the catalogue as the value of a member of an array item": b'{"x":[{"tools":'
    + CATALOGUE
    + b"}]}",
    "additional_tools items with the catalogue bytes": b'{"model":"gpt","input":['
    b'{"type":"message"},{"type":"additional_tools","tools":' + CATALOGUE + b"}]}",
    "additional_tools and top-level tools with the same bytes": b'{"tools":'
    + CATALOGUE
    + b',"input":[{"type":"additional_tools","tools":'
    + CATALOGUE
    + b"}]}",
    "a tool_search_output carrying the catalogue bytes": b'{"input":[{"type":"tool_search_output",'
    b'"tools":' + CATALOGUE + b'}],"tools":' + CATALOGUE + b"}",
    "a body that is an array holding the catalogue": b'[{"tools":' + CATALOGUE + b"}]",
    "invalid JSON on the short side before the catalogue": b'{"a":,"tools":'
    + CATALOGUE
    + b',"messages":"'
    + b"x" * 2000
    + b'"}',
    "invalid JSON on the short side after the catalogue": b'{"messages":"'
    + b"x" * 2000
    + b'","tools":'
    + CATALOGUE
    + b',"x":}',
    "a byte-order mark on the short side": b'\xef\xbb\xbf{"tools":'
    + CATALOGUE
    + b',"messages":"'
    + b"x" * 2000
    + b'"}',
    "whitespace everywhere": b' \n{ "model" : "m" ,\n "tools" : ' + CATALOGUE + b" \n}\n",
}
# Bodies that are not JSON on the long side of the catalogue, where a memo hit once read
# nothing (issue 16): the full parse forwards them as they came, and so must a hit.
LONG = b'"messages":"' + b"x" * 2000 + b'"'
BROKEN = {
    "a byte-order mark before a long transcript": b"\xef\xbb\xbf{"
    + LONG
    + b',"tools":'
    + CATALOGUE
    + b',"stream":true}',
    "invalid UTF-8 in a long transcript": b'{"messages":"\xff'
    + LONG[12:]
    + b',"tools":'
    + CATALOGUE
    + b',"stream":true}',
    "invalid UTF-8 in a long rest after the catalogue": b'{"tools":'
    + CATALOGUE
    + b',"messages":"\xff'
    + LONG[12:]
    + b"}",
    "invalid JSON in a long transcript": b'{"a":,' + LONG + b',"tools":' + CATALOGUE + b"}",
    "invalid JSON in a long rest after the catalogue": b'{"tools":'
    + CATALOGUE
    + b","
    + LONG
    + b',"x":}',
    "a lone surrogate escape in a long transcript": b'{"messages":"\\ud800'
    + LONG[12:]
    + b',"tools":'
    + CATALOGUE
    + b',"stream":true}',
    "a comma straight after the opening brace": b"{," + LONG + b',"tools":' + CATALOGUE + b"}",
    "a trailing comma after the catalogue": b"{" + LONG + b',"tools":' + CATALOGUE + b",}",
    "trailing garbage after the body": b"{" + LONG + b',"tools":' + CATALOGUE + b"}x",
    "a second document after the body": b"{" + LONG + b',"tools":' + CATALOGUE + b"}{}",
    "leading garbage before the body": b"x{" + LONG + b',"tools":' + CATALOGUE + b"}",
    "a body left unclosed": b"{" + LONG + b',"tools":' + CATALOGUE + b',"stream":true',
    "a transcript nested past the parser's limit": b'{"messages":'
    + b"[" * 1100
    + b"]" * 1100
    + b',"tools":'
    + CATALOGUE
    + b"}",
    "duplicate keys around the catalogue (JSON: the last wins)": b'{"model":"a","model":"b",'
    + LONG
    + b',"tools":'
    + CATALOGUE
    + b',"stream":true,"stream":false}',
}
TRICKY.update(BROKEN)


@pytest.mark.parametrize("api", [None, "anthropic", "openai-responses"])
@pytest.mark.parametrize("body", TRICKY.values(), ids=TRICKY.keys())
def test_a_warm_memo_gives_the_same_result_as_an_empty_one(body: bytes, api: str | None) -> None:
    memo = Memo(8)
    compact(anthropic(), memo, STRIP)  # warm with the catalogue's exact bytes
    compact(b'{"tools":[{"name":"x","input_schema":{"title":"x"}}]}', memo, STRIP)
    compact(b'{"tools":[{"name":"x","input_schema":{"title":"y"}}]}', memo, STRIP)
    warm = compact(body, memo, STRIP, api)
    empty = cold(body, api=api)
    assert warm.body == empty.body
    assert warm.reason == empty.reason
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in empty.catalogues]
    if empty.body is body:
        assert warm.body is body


def layout_warm_memo() -> Memo[Entry]:
    """A memo whose most recent entry is CATALOGUE, proven once at the end of a body."""
    memo = Memo(8)
    compact(anthropic(), memo, STRIP)  # a miss: the full parse
    compact(anthropic(messages=b'[{"role":"user"}]'), memo, STRIP)  # a hit: the rest is proven
    (entry,) = memo._entries.values()
    assert entry.layouts == [(b'"tools":', b',"stream":true}', 0, 0)]  # no token in the rest
    return memo


STREAM_REST = b',"stream":true}'


def turn(n: int, rest: bytes = STREAM_REST) -> bytes:
    """A session's turn: an Anthropic body with an `n`-byte transcript, ending with `rest`."""
    messages = b'[{"role":"user","content":"' + b"x" * n + b'"}]'
    return anthropic(messages=messages)[: -len(STREAM_REST)] + rest


def forbid_searching(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, any search of a body, or its full parse, fails the test."""

    def searched(*args: Any) -> Any:
        raise AssertionError("searched or parsed")

    monkeypatch.setattr(envelope, "_locate", searched)
    for name in ("_recent_place", "_search"):
        monkeypatch.setattr(memo_room, name, searched)


def test_a_turn_that_ends_as_the_last_one_is_a_hit_found_without_a_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = layout_warm_memo()
    bodies = [turn(n) for n in (1, 9)]
    expected = [cold(body).body for body in bodies]
    forbid_searching(monkeypatch)
    for body, out in zip(bodies, expected, strict=True):
        result = compact(body, memo, STRIP)
        assert [hit for _, hit in result.catalogues] == [True]
        assert result.body == out != body


def test_a_known_layout_after_a_backslash_is_proven_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout's key and rest were proven, not the byte before the key: after a backslash
    the `"tools"` is inside a string, and the warm memo gives what the empty one gives."""
    memo = layout_warm_memo()
    body = turn(4)
    at = body.index(b'"tools":')
    escaped = body[:at] + b"\\" + body[at:]  # the transcript's string now runs on
    assert compact(escaped, memo, STRIP).body == cold(escaped).body
    forbid_searching(monkeypatch)
    assert compact(body, memo, STRIP).catalogues[0][1] is True  # the layout still serves


def test_sessions_that_share_a_catalogue_and_take_turns_each_keep_their_fast_hit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each session ends its body its own way (Claude Code's metadata.user_id): the entry
    keeps a few rests, so turns that alternate still hit without a search or a copy."""
    memo = Memo(8)
    rests = [b',"metadata":{"user_id":"session-%d"},"stream":true}' % n for n in range(4)]
    for rest in rests:  # each session's first two turns: a miss or search, then proven
        compact(turn(1, rest), memo, STRIP)
        compact(turn(2, rest), memo, STRIP)
    (entry,) = memo._entries.values()
    assert sorted(rest for _, rest, _, _ in entry.layouts) == sorted(rests)
    first = {s: compact(turn(3, rests[s]), memo, STRIP).pieces[-1] for s in range(4)}
    expected = {(s, n): cold(turn(n, rests[s])).body for s in range(4) for n in range(4, 12)}
    forbid_searching(monkeypatch)
    for n in range(4, 12):
        for session in (0, 3, 1, 2):
            result = compact(turn(n, rests[session]), memo, STRIP)
            assert [hit for _, hit in result.catalogues] == [True]
            assert result.pieces[-1] is first[session]  # its rest joined once, not per turn
            assert result.body == expected[session, n]


def test_a_session_whose_ending_changes_every_turn_does_not_push_out_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = Memo(8)
    steady = [b',"metadata":{"user_id":"s%d"},"stream":true}' % n for n in range(3)]
    for rest in steady:
        compact(turn(1, rest), memo, STRIP)
        compact(turn(2, rest), memo, STRIP)
    proofs = []
    for name in ("_recent_place", "_search"):  # the long ways to the catalogue
        real = getattr(memo_room, name)
        monkeypatch.setattr(memo_room, name, lambda *a, real=real: proofs.append(1) or real(*a))
    for n in range(3, 13):
        compact(turn(n, b',"metadata":{"user_id":"churn%03d"},"stream":true}' % n), memo, STRIP)
        before = len(proofs)
        for rest in steady:
            assert [hit for _, hit in compact(turn(n, rest), memo, STRIP).catalogues] == [True]
        assert len(proofs) == before  # the steady sessions never took the long path


@pytest.mark.parametrize("api", [None, "anthropic", "openai-responses"])
@pytest.mark.parametrize(
    "body",
    [
        *TRICKY.values(),
        anthropic()[:-1] + b',"tools":[]}',  # a later tools key, then the proven rest
        b'{"messages":"\\",\\"tools":' + CATALOGUE + b',"stream":true}',
        # Unclosed (depth 2 at the end) with a head shorter than the rest: the hit path
        # parses the head, and refuses, as the full parse does.
        b'{"a":{"tools":' + CATALOGUE + b',"stream":true}',
        anthropic().replace(b'"tools":', b'"tools" :'),
        anthropic().replace(b'"tools":', b'"toolz":'),  # same length, another member
        anthropic().replace(b',"stream":true}', b',"tools":[9,9]}'),  # same length, later tools
        anthropic(tools=CATALOGUE[:-1] + b',{"name":"x","input_schema":{}}]'),
    ],
)
def test_a_memo_with_a_proven_layout_gives_the_same_result_as_an_empty_one(
    body: bytes, api: str | None
) -> None:
    warm = compact(body, layout_warm_memo(), STRIP, api)
    empty = cold(body, api=api)
    assert warm.body == empty.body
    assert warm.reason == empty.reason
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in empty.catalogues]


def test_only_the_top_level_catalogue_changes_when_its_bytes_also_appear_nested() -> None:
    body = TRICKY["catalogue bytes nested in a tool_use input after the top-level tools"]
    memo = Memo(4)
    compact(anthropic(), memo, STRIP)
    out = compact(body, memo, STRIP).body
    assert out == b'{"tools":' + COMPACTED + body[len(b'{"tools":') + len(CATALOGUE) :]


# The proof held to its reference, on generated bodies

WARMUPS = ["the catalogue alone", "a body with the same ending and a longer head"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies(), st.sampled_from(WARMUPS))
def test_a_memo_hit_finds_what_the_full_parse_finds(
    case: tuple[bytes, int, int, list[Any]], warmup: str
) -> None:
    body, start, end, _ = case
    memo = Memo[Entry, Any](8)
    compact(b'{"tools":' + body[start:end] + b"}", memo, STRIP)
    if warmup != WARMUPS[0]:  # the hit proven by that body's rest, then found by it
        key_start = body.rfind(b'"tools"', 0, start)
        for pad in (1, 2):
            compact(b'{"pad":"' + b"p" * (len(body) + pad) + b'",' + body[key_start:], memo, STRIP)
    reference = cold(body)
    found = memo_hit(body, memo, True)
    event("memo hit" if found is not None else "handed over to the full parse")
    if found is not None:
        at, hit = found
        assert (at, [hit.raw]) == (start, [e.raw for e, _ in reference.catalogues])
    warm = compact(body, memo, STRIP)
    assert (warm.body, warm.reason) == (reference.body, reference.reason)
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in reference.catalogues]


# The same on generated bodies broken on either side of the catalogue, far from it or near it

Cut = tuple[bytes, bytes]  # the body's bytes before the catalogue, and after it
DEFECTS: dict[str, Callable[[bytes, bytes], Cut]] = {
    "none (JSON, with duplicate keys)": lambda h, t: (h[:1] + b'"d":1,"d":2,' + h[1:], t),
    "a byte-order mark": lambda h, t: (b"\xef\xbb\xbf" + h, t),
    "leading garbage": lambda h, t: (b"x" + h, t),
    "invalid UTF-8 before the catalogue": lambda h, t: (h[:1] + b'"\xff":0,' + h[1:], t),
    "invalid UTF-8 after the catalogue": lambda h, t: (h, b',"\xff":0' + t),
    "a lone surrogate escape": lambda h, t: (h[:1] + b'"\\udc00":0,' + h[1:], t),
    "invalid JSON before the catalogue": lambda h, t: (h[:1] + b'"a":,' + h[1:], t),
    "invalid JSON after the catalogue": lambda h, t: (h, b',"a":' + t),
    "a comma after the opening brace": lambda h, t: (h[:1] + b"," + h[1:], t),
    "a trailing comma": lambda h, t: (h, b"," + t),
    "trailing garbage": lambda h, t: (h, t + b"x"),
    "a second document": lambda h, t: (h, t + b"{}"),
    "no closing brace": lambda h, t: (h, t.rstrip()[:-1]),
}


@st.composite
def broken_bodies(draw: st.DrawFn) -> tuple[bytes, bytes, bytes]:
    """(A body with one defect, the catalogue, the valid body it was made from)."""
    body, start, end, _ = draw(bodies())
    head, tail = body[:start], body[end:]
    pad = b"p" * draw(st.sampled_from([0, 100, 3000]))  # makes one side the longer one
    if draw(st.booleans()):
        head = head[:1] + b'"pad":"' + pad + b'",' + head[1:]
    else:
        tail = b',"pad":"' + pad + b'"' + tail
    head, tail = DEFECTS[draw(st.sampled_from(sorted(DEFECTS)))](head, tail)
    return head + body[start:end] + tail, body[start:end], body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_bodies(), st.sampled_from(WARMUPS))
def test_a_broken_body_gives_the_same_output_whatever_the_memo_holds(
    case: tuple[bytes, bytes, bytes], warmup: str
) -> None:
    body, catalogue, valid = case
    memo = Memo[Entry, Any](8)
    compact(b'{"tools":' + catalogue + b"}", memo, STRIP)
    if warmup != WARMUPS[0]:  # the valid body's ending, proven once, then found by it
        key_start = valid.rfind(b'"tools"', 0, valid.rfind(catalogue))
        for pad in (1, 2):
            compact(
                b'{"pad":"' + b"p" * (len(valid) + pad) + b'",' + valid[key_start:], memo, STRIP
            )
    reference = cold(body)
    warm = compact(body, memo, STRIP)
    event("compacted" if reference.body != body else "forwarded as it came")
    assert (warm.body, warm.reason) == (reference.body, reference.reason)
    assert [e.runs for e, _ in warm.catalogues] == [e.runs for e, _ in reference.catalogues]
    if reference.body is body:
        assert warm.body is body
