"""A usage reader looks for what its API's providers report, whichever reader asks: the
per-API table made at import gives every reader the keys, needles and finders it would make
itself, and an API name outside the table reads as "other"."""

from __future__ import annotations

import typing

import pytest

from toolslim.core.catalog import Api
from toolslim.wire.calls import FINDERS
from toolslim.wire.usage import CALL_NEEDLES, KEYS, PROVIDERS, UsageReader


@pytest.mark.parametrize("api", sorted(PROVIDERS))
def test_a_reader_looks_for_its_apis_usage_and_call_keys(api: Api) -> None:
    reader = UsageReader(api)
    usage_keys, needle = KEYS[api]
    assert reader.needle == needle
    assert reader.call_needles == CALL_NEEDLES[api]
    assert reader.keys == usage_keys + tuple(n.decode() for n in CALL_NEEDLES[api])


def test_an_unknown_api_is_read_as_every_provider_at_once() -> None:
    unknown, other = UsageReader(typing.cast(Api, "unknown-api")), UsageReader("other")
    assert (unknown.needle, unknown.keys) == (other.needle, other.keys)
    answer = '{"type":"message","usage":{"input_tokens":3,"output_tokens":1}}'
    for reader in (unknown, other):
        reader.feed(answer)
    assert unknown.finish() == other.finish() is not None


def test_every_provider_has_a_call_finder() -> None:
    assert {p.name for providers in PROVIDERS.values() for p in providers} <= set(FINDERS)
