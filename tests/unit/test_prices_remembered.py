"""A model's price per token, asked again and again as a session asks it every turn, is the
price a fresh lookup gives, on either side of a price tier's start."""

from __future__ import annotations

import pytest

from toolslim.observe.ledger.prices import TIERS, Prices

SIZES = [10, 199_999, 200_000, 200_001, 10, 1_000_000, 200_000, 0, 250_000]


@pytest.mark.parametrize(
    ("model", "api"),
    [
        ("claude-sonnet-4-5", "anthropic"),  # a tier above 200K input tokens
        ("gemini-2.5-pro", "gemini"),
        ("gpt-4o", "openai-chat"),
        ("no-such-model", "anthropic"),
        ("my-model", "anthropic"),  # a configured price
    ],
)
def test_a_remembered_price_is_the_price_looked_up_afresh(model: str, api: str) -> None:
    overrides = {"my-model": {"input": 2.0, "cache_read": 0.2, "cache_write": 2.5}}
    asked = Prices(overrides)
    for size in SIZES:
        for tier in TIERS:
            assert asked.per_token(model, api, tier, size) == Prices(overrides).per_token(
                model, api, tier, size
            ), (tier, size)
