"""Pricing options: what a model's input costs, what the provider charges for cache reads and
writes, and its cache rules. Set per model glob (top-level ``pricing:``, first match wins) and per
upstream (``upstreams[].pricing``); each unset key falls through to the next source: a ``pricing:``
entry, then the upstream's, then litellm's bundled table, then the provider's documented defaults
(``proxy.rewrite.provider_cache``). Validated at start-up, like every setting."""

from __future__ import annotations

import fnmatch

from pydantic import BaseModel, ConfigDict, Field, model_validator


class PriceOverride(BaseModel):
    """The keys an upstream's ``pricing:`` may set (and a ``pricing:`` entry, with ``match``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    input_per_mtok: float | None = Field(
        default=None, ge=0, description="a fresh input token's price, per million tokens"
    )
    cache_read_ratio: float | None = Field(
        default=None, ge=0, le=1, description="a cached token's price as a share of a fresh one"
    )
    cache_read_per_mtok: float | None = Field(
        default=None,
        ge=0,
        description="a cached token's price per million tokens (needs `input_per_mtok`; "
        "instead of `cache_read_ratio`)",
    )
    cache_write_ratio: float | None = Field(
        default=None,
        ge=0,
        le=10,
        description="writing a token to the cache, as a multiple of a fresh one (Anthropic: 1.25)",
    )
    cache_write_per_mtok: float | None = Field(
        default=None,
        ge=0,
        description="writing a token to the cache, per million tokens (needs `input_per_mtok`; "
        "instead of `cache_write_ratio`)",
    )
    ttl_s: float | None = Field(
        default=None, gt=0, le=86_400 * 7, description="a cached prefix lives this long unused"
    )
    min_prefix_tokens: int | None = Field(
        default=None, ge=0, description="shorter prompts are never cached"
    )

    @model_validator(mode="after")
    def _one_spelling(self) -> PriceOverride:
        for what in ("read", "write"):
            ratio = getattr(self, f"cache_{what}_ratio")
            price = getattr(self, f"cache_{what}_per_mtok")
            if ratio is not None and price is not None:
                raise ValueError(f"set cache_{what}_ratio or cache_{what}_per_mtok, not both")
            if price is not None and self.input_per_mtok is None:
                raise ValueError(f"cache_{what}_per_mtok needs input_per_mtok (to make a ratio)")
        return self

    def read_ratio(self) -> float | None:
        if self.cache_read_ratio is not None:
            return self.cache_read_ratio
        return _ratio(self.cache_read_per_mtok, self.input_per_mtok)

    def write_ratio(self) -> float | None:
        if self.cache_write_ratio is not None:
            return self.cache_write_ratio
        return _ratio(self.cache_write_per_mtok, self.input_per_mtok)


class PricingEntry(PriceOverride):
    """One entry of the top-level ``pricing:`` list."""

    match: list[str] = Field(
        default_factory=lambda: ["*"],
        min_length=1,
        description="model names, exact or glob; the first entry matching wins",
    )

    def serves(self, model: str) -> bool:
        return any(model == p or fnmatch.fnmatchcase(model, p) for p in self.match)


def _ratio(price: float | None, input_price: float | None) -> float | None:
    if price is None or input_price is None:
        return None
    if input_price == 0:
        return 1.0  # a free model: a cached token saves nothing
    return price / input_price
