"""entry: parse_catalogue reads a catalogue's exact bytes, keeping each number's spelling, and
refuses duplicate keys and constants JSON does not have."""

from __future__ import annotations

import orjson
import pytest

from toolslim.core.entry import DuplicateKey, parse_catalogue


def test_parse_catalogue_keeps_number_spelling_as_fragments() -> None:
    value = parse_catalogue(b"[1.0,1e3,-0,1180591620717411303424,2]")
    assert [orjson.dumps(v) for v in value] == [
        b"1.0",
        b"1e3",
        b"-0",
        b"1180591620717411303424",
        b"2",
    ]


def test_parse_catalogue_takes_the_fast_path_for_exact_bytes() -> None:
    value = parse_catalogue(b'[{"a":1,"b":[true,null,"x"]}]')
    assert value == [{"a": 1, "b": [True, None, "x"]}]


@pytest.mark.parametrize(
    "raw",
    [b'[{"a":1,"a":1}]', b'[{"x":{"k":[],"k":[]}}]', b'[{"a":1,"b":2,"a":3}]'],
)
def test_parse_catalogue_refuses_duplicate_keys(raw: bytes) -> None:
    with pytest.raises(DuplicateKey):
        parse_catalogue(raw)


@pytest.mark.parametrize("raw", [b"[NaN]", b"[Infinity]", b"[-Infinity]"])
def test_parse_catalogue_refuses_non_json_constants(raw: bytes) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_catalogue(raw)
