"""Model metadata from litellm's bundled table (context windows, input and cache prices), read
straight from the installed package folder (importing litellm costs seconds; the request path
must not pay that). The 3 MB file is parsed once, into the few numbers the proxy uses. Config
``pipeline.context_windows`` wins over this table (see ``Engine.budget_for``); windows learned from
an upstream's overflow errors (``LearnedWindows``) lower it further for the principal whose request
met the error, down to a floor."""

from __future__ import annotations

import importlib.util
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from proxy.charge_groups import charged_to

TABLE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class ModelEntry:
    """One model's line of the table; prices per token, None where the table has none."""

    window: int | None = None
    input_cost: float | None = None
    cache_read_cost: float | None = None
    cache_write_cost: float | None = None
    provider: str | None = None  # litellm's provider name (openai, anthropic, gemini, …)
    min_prefix_tokens: int | None = None  # the shortest prompt the provider caches


def _table_path() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / TABLE
    return path if path.is_file() else None


def _price(meta: dict[str, Any], key: str) -> float | None:
    value = meta.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _minimum(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 10**7:
        return int(value)
    return None


@lru_cache(maxsize=1)
def _entries() -> dict[str, ModelEntry]:
    path = _table_path()
    if path is None:
        return {}
    try:
        data: dict[str, Any] = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    out: dict[str, ModelEntry] = {}
    for name, meta in data.items():
        if not isinstance(meta, dict) or name == "sample_spec":
            continue
        window = meta.get("max_input_tokens") or meta.get("max_tokens")
        provider = meta.get("litellm_provider")
        out[name] = ModelEntry(
            window=window if isinstance(window, int) and window > 0 else None,
            input_cost=_price(meta, "input_cost_per_token"),
            cache_read_cost=_price(meta, "cache_read_input_token_cost"),
            cache_write_cost=_price(meta, "cache_creation_input_token_cost"),
            provider=provider if isinstance(provider, str) else None,
            min_prefix_tokens=_minimum(meta.get("prompt_cache_min_tokens")),
        )
    return out


@lru_cache(maxsize=1024)
def model_entry(model: str) -> ModelEntry | None:
    """The model's table entry, or None when litellm's table does not know it.

    Tries the name as given, then without its provider prefix (``openai/gpt-4o`` → ``gpt-4o``)."""
    table = _entries()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
        candidates.append(model.rsplit("/", 1)[1])
    for name in candidates:
        if name in table:
            return table[name]
    return None


def context_window(model: str) -> int | None:
    """The model's input window in tokens, or None when litellm's table does not know it."""
    entry = model_entry(model)
    return entry.window if entry is not None else None


# The least a learned window can be for a model whose window is not known: one overflow must not
# shrink a model's window for every client (the stated window, never below ``window_floor``).
MIN_LEARNED_WINDOW = 4_096


def window_floor(known: int | None) -> int:
    """The smallest window the proxy learns for a model: half its known window (config's
    ``pipeline.context_windows``, else litellm's table), else ``MIN_LEARNED_WINDOW``."""
    return known // 2 if known else MIN_LEARNED_WINDOW


class LearnedWindows:
    """Windows an upstream stated in its overflow errors, per (principal, upstream, model): the
    window as stated (never scaled by a count of the proxy's), at least the model's
    ``window_floor``. Kept per principal: an error answer can quote client text (OpenAI's
    "Unrecognized request argument supplied: …" names the argument), so one tenant could
    otherwise state a window for every other tenant's requests. Bounded (model names and, in
    passthrough, principals come from clients): the principal holding most loses its oldest
    first (one tenant's 1,100 windows under made-up model names pushed another's out, whose
    next long request met the provider's overflow again)."""

    def __init__(self, max_entries: int = 1024) -> None:
        self._windows: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        self._per_principal: dict[str, int] = {}  # how many each principal has: the hot check
        # whom each window is charged to (its principal, or while unverified its lane:
        # ``proxy.charge_groups``, as the shared maps charge it), and how many each holds
        self._charged: dict[tuple[str, str, str], str] = {}
        self._per_charge: dict[str, int] = {}
        self._max = max_entries

    def knows(self, principal: str) -> bool:
        """Whether ``principal`` has any window learned (most requests' only look-up)."""
        return principal in self._per_principal

    def get(self, principal: str, upstream: str, model: str) -> int | None:
        return self._windows.get((principal, upstream, model))

    def learn(self, principal: str, upstream: str, model: str, window: int, floor: int = 0) -> int:
        """Keep ``window`` (or a smaller one learned before), never below ``floor``; returns the
        one kept."""
        key = (principal, upstream, model)
        known = self._windows.get(key)
        kept = max(floor, window if known is None else min(known, window))
        if known is None:
            _add(self._per_principal, principal, 1)
            charge = self._charged[key] = charged_to(principal)
            _add(self._per_charge, charge, 1)
        self._windows[key] = kept
        self._windows.move_to_end(key)
        while len(self._windows) > self._max:  # rare: on an overflow error, a walk of 1,024
            most = max(self._per_charge, key=self._per_charge.__getitem__)
            oldest = next(k for k in self._windows if self._charged[k] == most)
            del self._windows[oldest], self._charged[oldest]
            _add(self._per_charge, most, -1)
            _add(self._per_principal, oldest[0], -1)
        return kept


def _add(counts: dict[str, int], name: str, n: int) -> None:
    """``counts[name] += n``, a count of 0 taken out."""
    left = counts.get(name, 0) + n
    if left:
        counts[name] = left
    else:
        del counts[name]
