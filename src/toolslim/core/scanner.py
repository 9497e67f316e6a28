"""PURE. JSON bodies read as bytes: whitespace, a member's key token, where a value ends, and the
one rule that finds a body's catalogue without parsing the body (`catalogue_member`), which the
full locate (envelope.py) and the memo hit (memo.py) both stand on. Must not import aiohttp or
prometheus_client.
"""

from __future__ import annotations

import json
import re
from typing import Final

import orjson

WS: Final = b" \t\r\n"
TOOLS_KEY: Final = b'"tools"'
# `"tools"` tokens, from the end of a body, that the rule looks at: each costs a scan of its
# value and a parse of the body after it (at most the bytes from the token to the end), so
# the tokens looked at are bounded in number and in the bytes after them (`budget`): an
# attacker's many tokens cost a few parses of the body, not one per token.
CANDIDATES: Final = 64
_BACKSLASH, _COLON, _COMMA, _CLOSE = b"\\:,}"
# A string token (escapes included), the next structural byte, a scalar: for skipping values.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRUCTURAL = re.compile(rb'["\[\]{}]')
_SCALAR = re.compile(rb"[^\s,\]}]+")
_DECODE = json.JSONDecoder().raw_decode  # C: (text, index) -> (value, end index)


def skip_ws(body: bytes, at: int) -> int:
    """The first index at or after `at` that is not JSON whitespace (len(body) if none)."""
    while at < len(body) and body[at] in WS:
        at += 1
    return at


def skip_ws_back(body: bytes, at: int) -> int:
    """The last index at or before `at` that is not JSON whitespace (-1 if none)."""
    while at >= 0 and body[at] in WS:
        at -= 1
    return at


def value_after_key(body: bytes, at: int, length: int) -> int | None:
    """Where the value starts if the string token at `at` (of `length` bytes) is followed by a
    colon and is not preceded by a backslash, else None."""
    # In valid JSON a quote after a backslash is escaped or closes a string: never a key.
    if at > 0 and body[at - 1] == _BACKSLASH:
        return None
    colon = skip_ws(body, at + length)
    if colon < len(body) and body[colon] == _COLON:
        return skip_ws(body, colon + 1)
    return None


def skip_value(body: bytes, at: int, text: str | None = None) -> int:
    """The end of the JSON value starting at `at`, read by its strings and brackets alone
    (ValueError when they do not close). On a valid value it is the parser's end; on any other
    the end depends on the value's own bytes only, never on what follows a closed value.

    `text`, the body read as Latin-1 (one character per byte), lets the stdlib's C decoder
    find the end of an array or object it reads (5x faster); the scan below is the plain
    version, and decides whatever the decoder refuses."""
    first = body[at : at + 1]
    if text is not None and first in (b"[", b"{"):
        try:
            return int(_DECODE(text, at)[1])
        except (ValueError, RecursionError):
            pass
    if first == b'"':
        match = _STRING.match(body, at)
        if match is None:
            raise ValueError("unterminated string")
        return match.end()
    if first not in (b"[", b"{"):
        match = _SCALAR.match(body, at)
        if match is None:
            raise ValueError("not a JSON value")
        return match.end()
    depth = 0
    while True:
        match = _STRUCTURAL.search(body, at)
        if match is None:
            raise ValueError("unbalanced value")
        at = match.start()
        char = body[at]
        if char == 0x22:  # '"'
            string = _STRING.match(body, at)
            if string is None:
                raise ValueError("unterminated string")
            at = string.end()
            continue
        depth += 1 if char in (0x5B, 0x7B) else -1
        at += 1
        if depth == 0:
            return at


def closes_body(body: bytes, value_end: int) -> bool:
    """Whether what follows a member's value closes the object it stands in at the body's last
    byte, with no later member spelled `tools` (escapes included): `}` alone, or a comma and
    members that parse (orjson) when opened with `{`.

    Then that object is the body's top level if the body is JSON at all, and no other `"tools"`
    key token after the member can pass this test (it would close two objects or more).
    """
    after = skip_ws(body, value_end)
    if after == len(body):
        return False
    if body[after] == _CLOSE:
        return skip_ws(body, after + 1) == len(body)
    if body[after] != _COMMA:
        return False
    try:
        rest = orjson.loads(b"".join((b"{", memoryview(body)[after + 1 :])))
    except orjson.JSONDecodeError:
        return False
    return isinstance(rest, dict) and bool(rest) and "tools" not in rest


def budget(size: int) -> int:
    """The most bytes after the tokens `catalogue_member` looks at, summed, in a body of `size`
    bytes: two parses of the whole body, and 1 MiB for small bodies whose catalogue holds many
    tokens of its own (Codex's namespaces)."""
    return 2 * size + 1024 * 1024


def tokens_after(body: bytes, start: int) -> tuple[int, int]:
    """`"tools"` tokens in body[start:], counted from the end as `catalogue_member` meets them
    (up to CANDIDATES), and the bytes from each of them to the body's end, summed."""
    end, cost = len(body), 0
    for count in range(CANDIDATES):
        end = body.rfind(TOOLS_KEY, start, end)
        if end == -1:
            return count, cost
        cost += len(body) - end
    return CANDIDATES, cost


Member = tuple[int, int, int]  # where the key starts, where its value starts and ends


def catalogue_member(body: bytes) -> Member | None:
    """The body's catalogue member: of the last `"tools"` tokens (CANDIDATES of them at most,
    and while the bytes from each to the end sum to at most `budget`), the one that is a key
    (`value_after_key`) whose value's brackets close (`skip_value`) and whose rest closes the
    body (`closes_body`). At most one token passes, so the order of the search does not
    matter: the memo hit finds it by the catalogue's bytes instead, and counts the tokens
    after it (`tokens_after`) to agree on the bounds.

    The head before the member is never read: a body whose head is not JSON is compacted the
    same whatever the memo holds (the upstream refuses it either way).
    """
    end, cost, limit = len(body), 0, budget(len(body))
    text = None
    for _ in range(CANDIDATES):
        key_start = body.rfind(TOOLS_KEY, 0, end)
        if key_start == -1:
            return None
        cost += len(body) - key_start
        if cost > limit:
            return None
        end = key_start
        value_start = value_after_key(body, key_start, len(TOOLS_KEY))
        if value_start is None:
            continue
        if text is None:
            text = body.decode("latin-1")
        try:
            value_end = skip_value(body, value_start, text)
        except ValueError:
            continue
        if closes_body(body, value_end):
            return key_start, value_start, value_end
    return None


def names_additional_tools(body: bytes) -> bool:
    """Whether the body may hold Codex's input item that carries tools, which only a full parse
    of the body finds: it holds the string `"additional_tools"` as Codex spells it. A spelling
    with escapes is not looked for (a search for it costs ~3 ms per MB): such a body is read
    by `catalogue_member` like any other, whatever the memo holds."""
    # The bare word first: CPython's find is ~3x slower on JSON for a needle that starts and
    # ends with a quote (its skip table is keyed on the needle's last byte).
    return b"additional_tools" in body and b'"additional_tools"' in body
