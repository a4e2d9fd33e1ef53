"""``bench.cost``'s lanes (one method, at one price variant for ctxproxy, through one session:
its cache, what the upstream last answered, its session state, its sums), what a worker
process builds once (the token counters, the pipelines, the serialised segments), and the
envelope table's jobs (sized with those counters)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.breakpoint_cache import BreakpointCache
from bench.cache_emulator import CacheUse, PrefixCache, Pricing, Segments
from bench.cost_config import (
    ENVELOPE_SHARE,
    MIN_PREFIX_TOKENS,
    PRICINGS,
    TTL_S,
    Job,
    Method,
    model_of,
)
from bench.cost_stats import Stats
from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.provider_cache import ANTHROPIC_LOOKBACK_MESSAGES
from proxy.settings import Settings
from proxy.tokens import TokenCounters, ensure_offline_tiktoken
from rules.base import CacheFacts, Message, SessionState
from tests.support.traces import request_prefixes

_PRICE_FIELDS = frozenset({"read_ratio", "write_ratio"})  # what differs between price variants
Cache = PrefixCache | BreakpointCache


@dataclass
class Lane:
    """One method (at one price variant, for ctxproxy) through one session: its cache, what the
    upstream last answered, its session state, its sums."""

    method: Method
    pricing: Pricing | None  # None: the method does not depend on prices (priced afterwards)
    cache: Cache
    stats: Stats = field(default_factory=Stats)
    state: SessionState = field(default_factory=SessionState)
    last_use: CacheUse | None = None
    last_at: float | None = None
    cleared: set[int] = field(default_factory=set)  # microcompact

    def facts(self, watched: bool) -> CacheFacts:
        pricing = self.pricing or PRICINGS[0]
        last = self.last_use
        cls = WatchedFacts if watched else CacheFacts
        return cls(
            read_ratio=pricing.read_ratio,
            write_ratio=pricing.write_ratio,
            ttl_s=TTL_S,
            min_prefix_tokens=MIN_PREFIX_TOKENS,
            # the breakpoint cache's lookback, as the proxy's cost model states it for Claude
            lookback_messages=(
                ANTHROPIC_LOOKBACK_MESSAGES if isinstance(self.cache, BreakpointCache) else None
            ),
            last_at=self.last_at,
            last_prompt_tokens=last.prompt_tokens if last else None,
            last_cached_tokens=last.cached_tokens if last else None,
            last_cache_write_tokens=last.write_tokens if last else None,
        )


@dataclass(frozen=True)
class WatchedFacts(CacheFacts):
    """CacheFacts that note which price fields a rule read: while none is read, every price
    variant of a ctxproxy method gets the same output, so one run serves them all."""

    reads: set[str] = field(default_factory=set, compare=False, repr=False)

    def __getattribute__(self, name: str) -> Any:
        if name in _PRICE_FIELDS:
            object.__getattribute__(self, "reads").add(name)
        return object.__getattribute__(self, name)


_COUNTERS: TokenCounters | None = None
_PIPELINES: dict[tuple[Any, ...], Pipeline] = {}  # by the arguments of `_pipeline`
_SEGMENTS: dict[str, Segments] = {}


def _counters() -> TokenCounters:
    global _COUNTERS
    if _COUNTERS is None:
        _COUNTERS = TokenCounters()
    return _COUNTERS


def _pipeline(
    rules_off: tuple[str, ...],
    bet: bool = False,
    restore: bool = False,
    threshold: str = "break_even",
    floor: float = 0.0,
    risk: float | None = None,
    guard: float | Literal["off"] | None = None,
) -> Pipeline:
    """The default rule list (minus ``rules_off``; with prune's ``bet_on_length`` on for
    ``bet``, its ``restore_elided`` for ``restore``, its ``warm_threshold`` and floor), as the
    engine builds it (``risk``: its ``bet_budget_share``; ``guard``: its ``warm_risk_share``);
    one per process."""
    key = (rules_off, bet, restore, threshold, floor, risk, guard)
    pipeline = _PIPELINES.get(key)
    if pipeline is None:
        settings = Settings()
        rules = [r for r in settings.configured_rules() if r.name not in rules_off]
        update: dict[str, Any] = {
            k: True for k, on in (("bet_on_length", bet), ("restore_elided", restore)) if on
        }
        if risk is not None:
            update["bet_budget_share"] = risk
        if guard is not None:  # "off": unset, break-even alone
            update["warm_risk_share"] = None if guard == "off" else guard
        if threshold != "break_even":
            update.update(warm_threshold=threshold, warm_threshold_floor=floor)
        if update:
            rules = [
                r.model_copy(update={"config": r.config.model_copy(update=update)})
                if r.name == "prune"
                else r
                for r in rules
            ]
        pipeline = Pipeline(rules, settings.pipeline.on_rule_error)
        _PIPELINES[key] = pipeline
    return pipeline


def _segments(encoding: str) -> Segments:
    seg = _SEGMENTS.get(encoding)
    if seg is None:
        ensure_offline_tiktoken()
        import tiktoken

        seg = _SEGMENTS[encoding] = Segments(tiktoken.get_encoding(encoding).encode_ordinary)
    return seg


def envelope_jobs(
    corpus: list[dict[str, Any]],
    methods: list[Method],
    pricing: Pricing,
    args: argparse.Namespace,
    cache: str,
) -> list[Job]:
    """The longest conversations at a budget of ``ENVELOPE_SHARE`` of each one's size."""
    counters = _counters()

    def replayed(conv: dict[str, Any]) -> list[Message]:
        """What the replay sends last: the conversation, or its N-th request."""
        if not args.max_requests:
            return list(conv["messages"])
        prefixes = list(request_prefixes(conv["messages"]))[: args.max_requests]
        return prefixes[-1] if prefixes else []

    sizes = sorted(
        (
            (counters.for_model(model_of(c)).count_messages(replayed(c)), i)
            for i, c in enumerate(corpus)
        ),
        reverse=True,
    )[: args.envelope_sessions]
    ctx_methods = [m for m in methods if m.kind == "ctxproxy" and m.budget is None]
    jobs = []
    for size, i in sizes:
        budget = max(256, int(size * ENVELOPE_SHARE))
        env = [Method("direct", "direct")] + [
            Method(m.name.replace("defaults", "budget 30%"), "ctxproxy", budget, m.rules_off)
            for m in ctx_methods
        ]
        jobs.append(
            Job(
                corpus[i],
                tuple(env),
                (pricing,),
                args.seed,
                True,
                args.protocol,
                args.cadence,
                args.interval,
                args.max_requests,
                cache,
            )
        )
    return jobs
