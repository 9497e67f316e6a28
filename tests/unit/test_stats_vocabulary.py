"""Tests for toolslim.observe.stats' vocabularies: /stats counts each value of the Literal it is
derived from, so a kind added to the type is a counter at once."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from toolslim.observe.stats import ClosedBy, ConnectionClose, Stats, Transport
from toolslim.wire.errors import Failure

COUNTED: list[tuple[Any, tuple[str, str]]] = [
    (Failure, ("requests", "upstream_errors")),
    (Transport, ("requests", "by_transport")),
    (ClosedBy, ("websockets", "closed_by")),
    (ConnectionClose, ("connections", "closed")),
]


@pytest.mark.parametrize(("vocabulary", "where"), COUNTED, ids=[w[1] for _, w in COUNTED])
def test_stats_starts_a_zero_count_for_every_value_of_its_literal(
    vocabulary: Any, where: tuple[str, str]
) -> None:
    section, key = where
    counts = Stats([]).snapshot()[section][key]
    assert counts == dict.fromkeys(sorted(get_args(vocabulary)), 0)
