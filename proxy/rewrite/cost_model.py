"""The cost model: for a request's model, what a fresh input token costs, what a cached read and a
cache write cost relative to it, and the provider's cache rules (lifetime, shortest prompt
cached), plus what the upstream reported about the session's previous request: the
``rules.base.CacheFacts`` the rules read.

Each value comes from the first source that has it: the first matching ``pricing:`` entry, the
upstream's ``pricing:``, litellm's bundled table (``model_windows``; for a ``gemini`` upstream its
``gemini/`` line, Google AI Studio's prices), the provider's documented rules (``provider_cache``).
The table's shortest cached prompt (``prompt_cache_min_tokens``) is read for the families in
``provider_cache.TABLE_MINIMUMS``. A read ratio nobody knows is 0.1, the strictest case (a
cache that cheap makes breaking it the costliest)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from proxy.pricing import PriceOverride
from proxy.rewrite.model_windows import ModelEntry, model_entry
from proxy.rewrite.provider_cache import TABLE_MINIMUMS, rules_for
from proxy.settings import Settings
from proxy.store.cache_feedback import CacheFeedback
from rules.base import CacheFacts
from rules.report import CacheSummary

UNKNOWN_READ_RATIO = 0.1
_MAX_MEMO = 1024
Source = Literal["config", "litellm", "default"]


@dataclass(frozen=True)
class Prices:
    input_price: float | None  # per token
    read_ratio: float
    write_ratio: float
    ttl_s: float
    min_prefix_tokens: int
    lookback_messages: int | None
    source: Source  # config: a pricing option set something; litellm: its table priced it
    family: str  # the provider family whose cache rules apply


class CostModel:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._memo: dict[str, Prices] = {}

    def prices(self, model: str) -> Prices:
        """The model's prices and cache rules; memoised per name (bounded: names come from
        clients). The upstream is the one ``model`` routes to."""
        found = self._memo.get(model)
        if found is None:
            if len(self._memo) >= _MAX_MEMO:
                self._memo.clear()
            found = self._memo[model] = self._prices(model)
        return found

    def _prices(self, model: str) -> Prices:
        upstream = self.settings.upstream_for(model)
        layers: list[PriceOverride] = []
        configured_entry = self.settings.pricing_for(model)
        if configured_entry is not None:
            layers.append(configured_entry)
        if upstream is not None:
            layers.append(upstream.pricing)
        native = upstream is not None and upstream.kind == "gemini"
        # Google AI Studio's own line first for a gemini upstream (Vertex's is priced apart)
        entry = (native and model_entry(f"gemini/{model}")) or model_entry(model) or ModelEntry()
        provider = entry.provider or (upstream.provider if upstream is not None else None)
        rules, family = rules_for(model, provider)
        table_minimum = entry.min_prefix_tokens if family in TABLE_MINIMUMS else None
        picked = {name: _pick(layers, name) for name in _CONFIGURABLE}
        source: Source = "default"
        if any(v is not None for v in picked.values()):
            source = "config"
        elif entry.input_cost is not None:
            source = "litellm"
        input_price = picked["input_price"]
        if input_price is None:
            input_price = entry.input_cost
        # a write price of 0 in the table (DeepSeek) means "no surcharge", not "free"
        table_write = _table_ratio(entry.cache_write_cost or None, entry.input_cost)
        return Prices(
            input_price=input_price,
            read_ratio=_first(
                picked["read_ratio"],
                _table_ratio(entry.cache_read_cost, entry.input_cost),
                UNKNOWN_READ_RATIO,
            ),
            write_ratio=_first(picked["write_ratio"], table_write, rules.write_ratio),
            ttl_s=_first(picked["ttl_s"], rules.ttl_s),
            min_prefix_tokens=int(
                _first(picked["min_prefix"], table_minimum, float(rules.min_prefix_tokens))
            ),
            lookback_messages=rules.lookback_messages,
            source=source,
            family=family,
        )

    def facts(self, model: str, feedback: CacheFeedback | None) -> CacheFacts:
        """What the rules see: the model's prices and the session's last cache report."""
        p = self.prices(model)
        return CacheFacts(
            input_price=p.input_price,
            read_ratio=p.read_ratio,
            write_ratio=p.write_ratio,
            ttl_s=p.ttl_s,
            min_prefix_tokens=p.min_prefix_tokens,
            lookback_messages=p.lookback_messages,
            last_at=feedback.at if feedback else None,
            last_prompt_tokens=feedback.prompt_tokens if feedback else None,
            last_cached_tokens=feedback.cached_tokens if feedback else None,
            last_cache_write_tokens=feedback.cache_write_tokens if feedback else None,
        )

    def summary(self, model: str, facts: CacheFacts, now: float) -> CacheSummary:
        """The facts as the request's report shows them."""
        idle = round(max(0.0, now - facts.last_at), 3) if facts.last_at is not None else None
        return {
            "read_ratio": round(facts.read_ratio, 6),
            "write_ratio": round(facts.write_ratio, 6),
            "ttl_s": facts.ttl_s,
            "min_prefix": facts.min_prefix_tokens,
            "source": self.prices(model).source,
            "last_cached_tokens": facts.last_cached_tokens,
            "last_cache_write_tokens": facts.last_cache_write_tokens,
            "idle_s": idle,
        }


_CONFIGURABLE = ("input_price", "read_ratio", "write_ratio", "ttl_s", "min_prefix")


def _pick(layers: list[PriceOverride], name: str) -> float | None:
    """``name`` from the first layer that sets it."""
    for layer in layers:
        value = _value(layer, name)
        if value is not None:
            return value
    return None


def _value(override: PriceOverride, name: str) -> float | None:
    if name == "input_price":
        mtok = override.input_per_mtok
        return mtok / 1_000_000 if mtok is not None else None
    if name == "read_ratio":
        return override.read_ratio()
    if name == "write_ratio":
        return override.write_ratio()
    if name == "ttl_s":
        return override.ttl_s
    minimum = override.min_prefix_tokens
    return float(minimum) if minimum is not None else None


def _table_ratio(price: float | None, input_price: float | None) -> float | None:
    """A table price as a share of the input price; None unless both are known and positive."""
    if price is None or not input_price:
        return None
    return round(price / input_price, 6)  # 3e-07 / 3e-06 is 0.09999999999999999


def _first(*values: float | None) -> float:
    return next(v for v in values if v is not None)
