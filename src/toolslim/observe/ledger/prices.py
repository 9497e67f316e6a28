"""Model prices for the tool ledger: USD per input token at each cache tier, from the
`genai-prices` package's own packaged data (never fetched: its updater is never started),
overridden per model by the `prices:` option. A model neither knows is unpriced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final, Literal, get_args

Tier = Literal["read", "write", "uncached", "unknown"]
TIERS: Final[tuple[Tier, ...]] = get_args(Tier)
# The genai-prices usage field of each tier's tokens (each also counts in input_tokens).
_FIELDS: Final[Mapping[Tier, str | None]] = {
    "read": "cache_read_tokens",
    "write": "cache_write_tokens",
    "uncached": None,
}
# api (routing's name) -> genai-prices provider id: a model name alone can match elsewhere.
PROVIDERS: Final[Mapping[str, str]] = {
    "anthropic": "anthropic",
    "gemini": "google",
    "openai-chat": "openai",
    "openai-responses": "openai",
}
_OVERRIDE_KEYS: Final = {"read": "cache_read", "write": "cache_write", "uncached": "input"}
MAX_MODELS: Final = 256  # models whose prices are kept; beyond, each is looked up again
# A configured price: USD per million tokens of plain input, cache reads and cache writes.
Override = Mapping[str, float]


class Prices:
    """USD per input token of a model at a tier, for a request of so many input tokens (some
    providers charge more per token past a size, on every token of the request)."""

    def __init__(self, overrides: Mapping[str, Override] | None = None) -> None:
        self._overrides = {model.lower(): prices for model, prices in (overrides or {}).items()}
        self._found: dict[tuple[str, str | None, Tier, int], float | None] = {}
        self._brackets: dict[tuple[str, str | None], tuple[int, ...] | None] = {}
        # (model, api, tier) as asked -> (low, high, the answer for input tokens in (low, high]):
        # a session asks the same every turn.
        self._last: dict[tuple[str, str, Tier], tuple[float, float, float | None]] = {}

    def per_token(self, model: str | None, api: str, tier: Tier, input_tokens: int) -> float | None:
        """USD per token of `tier` for `model` on a request of `input_tokens` input tokens
        (cached ones included); None when the model is unknown or the tier is `unknown`."""
        if not model or tier == "unknown":
            return None
        asked = (model, api, tier)
        last = self._last.get(asked)
        if last is not None and last[0] < input_tokens <= last[1]:
            return last[2]
        unit = self._per_token(model, api, tier, input_tokens)
        if len(self._last) >= MAX_MODELS:
            self._last.clear()
        self._last[asked] = (*self._bracket_around(model, api, input_tokens), unit)
        return unit

    def _bracket_around(self, model: str, api: str, input_tokens: int) -> tuple[float, float]:
        """(low, high): every request of input tokens in (low, high] falls in the price tier
        of `input_tokens` (the whole line for a model with one price, or unknown)."""
        starts = self._brackets.get((model.lower(), PROVIDERS.get(api)))
        if model.lower() in self._overrides or not starts:
            return -math.inf, math.inf
        return _span(starts, input_tokens)

    def _per_token(self, model: str, api: str, tier: Tier, input_tokens: int) -> float | None:
        model = model.lower()
        override = self._overrides.get(model)
        if override is not None:
            return float(override[_OVERRIDE_KEYS[tier]]) / 1e6
        provider = PROVIDERS.get(api)
        bracket = self._bracket(model, provider, input_tokens)
        if bracket is None:
            return None
        key = (model, provider, tier, bracket)
        if key not in self._found:
            if len(self._found) >= MAX_MODELS * 8:
                self._found.clear()
            self._found[key] = _unit(model, provider, tier, bracket + 1)
        return self._found[key]

    def _bracket(self, model: str, provider: str | None, input_tokens: int) -> int | None:
        """The start of the price tier a request of `input_tokens` falls in (0: the base)."""
        key = (model, provider)
        if key not in self._brackets:
            if len(self._brackets) >= MAX_MODELS:
                self._brackets.clear()
            self._brackets[key] = _starts(model, provider)
        starts = self._brackets[key]
        if starts is None:
            return None
        low, _ = _span(starts, input_tokens)
        return 0 if low == -math.inf else int(low)


def _span(starts: tuple[int, ...], input_tokens: int) -> tuple[float, float]:
    """(low, high): the tier starts around `input_tokens`, which falls in the tier starting at
    `low` (genai-prices: a tier applies above its start), as does every count in (low, high]."""
    low = max((start for start in starts if start < input_tokens), default=-math.inf)
    high = min((start for start in starts if start >= input_tokens), default=math.inf)
    return low, high


def _calc(model: str, provider: str | None, **usage: int) -> Any:
    import genai_prices  # imported on first use: its data takes a tenth of a second to load

    return genai_prices.calc_price(genai_prices.Usage(**usage), model, provider_id=provider)


def _starts(model: str, provider: str | None) -> tuple[int, ...] | None:
    """Where the model's input price tiers start (empty: one price), or None: unknown."""
    try:
        found = _calc(model, provider, input_tokens=1)
    except (LookupError, ValueError):
        return None
    starts: set[int] = set()
    for field in ("input_mtok", "cache_read_mtok", "cache_write_mtok"):
        price = getattr(found.model_price, field, None)
        for tier in getattr(price, "tiers", ()) or ():
            starts.add(int(tier.start))
    return tuple(sorted(starts))


def _unit(model: str, provider: str | None, tier: Tier, size: int) -> float | None:
    """USD per token of `tier` on a request of `size` input tokens, all of that tier:
    genai-prices' price of that usage, divided by its tokens."""
    field = _FIELDS[tier]
    usage = {"input_tokens": size} if field is None else {"input_tokens": size, field: size}
    try:
        price: Decimal = _calc(model, provider, **usage).input_price
    except (LookupError, ValueError):
        return None
    return float(price / size)
