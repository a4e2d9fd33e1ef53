"""``bench.cost``'s accounting: the sums of one (method, price variant) over requests, one
conversation's outcome, and what the run reports of them: the main table's rows (aggregate cost
relative to direct, and the distribution of the per-conversation ratio), the offline-optimal
comparison, the envelope table's rows."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.cache_emulator import CacheUse, Pricing
from bench.cost_config import ENVELOPE_SHARE, Method

THRESHOLDS = (1.00, 1.02)  # the share of conversations whose ratio is above each


@dataclass
class Stats:
    """Sums over requests for one (method, price variant); merged across conversations."""

    requests: int = 0
    prompt: int = 0
    cached: int = 0
    written: int = 0
    compactions: int = 0
    broken: int = 0
    rule_errors: int = 0
    integrity_repairs: int = 0
    evidence: dict[str, list[float]] = field(default_factory=dict)  # key -> [sum, n]
    ms: list[float] = field(default_factory=list)
    calls: int = 0  # envelope mode: tool calls in the inputs
    calls_kept: int = 0
    last_calls: int = 0
    last_calls_kept: int = 0
    breakpoints_lost: int = 0  # requests forwarded with fewer cache_control markers than sent

    def merge(self, other: Stats) -> None:
        for name in (
            "requests",
            "prompt",
            "cached",
            "written",
            "compactions",
            "broken",
            "rule_errors",
            "integrity_repairs",
            "calls",
            "calls_kept",
            "last_calls",
            "last_calls_kept",
            "breakpoints_lost",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, (total, n) in other.evidence.items():
            mine = self.evidence.setdefault(key, [0.0, 0.0])
            mine[0] += total
            mine[1] += n
        self.ms.extend(other.ms)

    def cost(self, pricing: Pricing) -> float:
        return pricing.cost(CacheUse(self.prompt, self.cached, self.written))

    def share(self, key: str) -> float:
        total, n = self.evidence.get(key, (0.0, 0.0))
        return total / n if n else float("nan")


@dataclass
class Outcome:
    conv_id: str
    stats: dict[tuple[str, str], Stats]  # (method, pricing name or "") -> sums
    requests: int
    user_turns: int
    idle_over_ttl: int
    full_tokens: int  # the last request replayed (the whole conversation without --max-requests)
    shared_runs: int  # ctxproxy (method, request)s served by one run for every price variant
    split_runs: int  # ... and by one run per variant (a rule read the prices, then or before)
    envelope: bool
    # per ctxproxy method and price name: the offline-optimal schedule (bench.optimal)
    optimal: dict[tuple[str, str], OptimalFigures] = field(default_factory=dict)


@dataclass(frozen=True)
class OptimalFigures:
    """One conversation under the analytic model of ``bench.optimal``: direct's cost, the
    optimal schedule's, and how many compactions it makes."""

    direct: float
    optimal: float
    compactions: int


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile, linear between order statistics (nan when empty)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def distribution(ratios: Sequence[float]) -> dict[str, float]:
    """Median, p90 and the shares above ``THRESHOLDS`` of per-conversation ratios."""
    out = {"median": quantile(ratios, 0.5), "p90": quantile(ratios, 0.9)}
    for t in THRESHOLDS:
        out[f"over_{t:.2f}"] = sum(r > t for r in ratios) / len(ratios) if ratios else float("nan")
    return out


@dataclass
class Totals:
    """What the run adds up over conversations (envelope runs aside)."""

    conversations: int = 0
    requests: int = 0
    user_turns: int = 0
    idle_over_ttl: int = 0
    shared_runs: int = 0
    split_runs: int = 0
    stats: dict[tuple[str, str], Stats] = field(default_factory=dict)
    # (method, price name) -> each conversation's cost relative to direct's
    ratios: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    # each conversation's id and requests replayed, in the order of ``ratios``' lists
    order: list[tuple[str, int]] = field(default_factory=list)
    optimal: list[Outcome] = field(default_factory=list)  # outcomes carrying optimal figures

    def add(self, o: Outcome, methods: Sequence[Method], pricings: Sequence[Pricing]) -> None:
        self.conversations += 1
        self.requests += o.requests
        self.user_turns += o.user_turns
        self.idle_over_ttl += o.idle_over_ttl
        self.shared_runs += o.shared_runs
        self.split_runs += o.split_runs
        for key, s in o.stats.items():
            self.stats.setdefault(key, Stats()).merge(s)
        direct = o.stats[("direct", "")]
        self.order.append((o.conv_id, o.requests))
        for m in methods:
            for p in pricings:
                mine = o.stats.get((m.name, p.name if m.kind == "ctxproxy" else ""))
                base = direct.cost(p)
                if mine is not None and base > 0:
                    self.ratios.setdefault((m.name, p.name), []).append(mine.cost(p) / base)
        if o.optimal:
            self.optimal.append(o)

    def optimal_rows(self, pricings: Sequence[Pricing]) -> list[dict[str, Any]]:
        """Per ctxproxy method and price: the optimal schedule's saving against direct (both
        analytic), the replay's saving (emulated cache), and online ÷ optimal, over the summed
        costs and as the median of the per-conversation ratio where the optimal saves."""
        rows = []
        names = sorted({m for o in self.optimal for m, _ in o.optimal}, key=_method_order)
        for name in names:
            for p in pricings:
                figures = [(o, f) for o in self.optimal if (f := o.optimal.get((name, p.name)))]
                if not figures:
                    continue
                direct = sum(f.direct for _, f in figures)
                best = sum(f.optimal for _, f in figures)
                replay_direct = sum(o.stats[("direct", "")].cost(p) for o, _ in figures)
                replay = sum(o.stats[(name, p.name)].cost(p) for o, _ in figures)
                optimal_saving = 1 - best / direct if direct else float("nan")
                online_saving = 1 - replay / replay_direct if replay_direct else float("nan")
                per_conv = []
                for o, f in figures:
                    saves = 1 - f.optimal / f.direct if f.direct else 0.0
                    base = o.stats[("direct", "")].cost(p)
                    if saves > 1e-9 and base > 0:
                        online = 1 - o.stats[(name, p.name)].cost(p) / base
                        per_conv.append(online / saves)
                rows.append(
                    {
                        "method": name,
                        "price": p.name,
                        "conversations": len(figures),
                        "optimal_saving": optimal_saving,
                        "optimal_compactions": sum(f.compactions for _, f in figures),
                        "online_saving": online_saving,
                        "ratio": online_saving / optimal_saving if optimal_saving > 0 else math.nan,
                        "ratio_median": quantile(per_conv, 0.5),
                        "conversations_saving": len(per_conv),
                    }
                )
        return rows


def _method_order(name: str) -> tuple[bool, str]:
    return (name != "defaults", name)


def lane_json(s: Stats) -> dict[str, Any]:
    out = {
        k: getattr(s, k)
        for k in (
            "requests",
            "prompt",
            "cached",
            "written",
            "compactions",
            "broken",
            "rule_errors",
            "integrity_repairs",
            "breakpoints_lost",
        )
    }
    out["evidence"] = {k: s.share(k) for k in s.evidence}
    return out


def table_rows(
    methods: list[Method],
    pricings: tuple[Pricing, ...],
    totals: dict[tuple[str, str], Stats],
    ratios: dict[tuple[str, str], list[float]] | None = None,
) -> list[dict[str, Any]]:
    """One row per method; the non-cost columns of a ctxproxy method are its first price
    variant's run. ``ratios``: each conversation's cost relative to direct's, per (method, price
    name), for the distribution columns."""
    direct = totals[("direct", "")]
    rows = []
    for m in methods:
        per_price = {
            p.name: totals.get((m.name, p.name if m.kind == "ctxproxy" else "")) for p in pricings
        }
        main = per_price[pricings[0].name]
        if main is None:
            continue
        ms = sorted(main.ms)
        rows.append(
            {
                "method": m.name,
                "cost": {
                    p.name: s.cost(p) / direct.cost(p)
                    for p in pricings
                    if (s := per_price[p.name]) is not None
                },
                "per_conversation": {
                    p.name: distribution((ratios or {}).get((m.name, p.name), [])) for p in pricings
                },
                "tokens": main.prompt / direct.prompt,
                "hit": main.cached / main.prompt if main.prompt else float("nan"),
                "compactions": main.compactions if m.kind in ("ctxproxy", "microcompact") else None,
                "failure": main.share("failure"),
                "first_user": main.share("first_user"),
                "files": main.share("files"),
                "broken": main.broken,
                "requests": main.requests,
                "ms_mean": statistics.fmean(ms) if ms else None,
                "ms_p50": statistics.median(ms) if ms else None,
            }
        )
    return rows


def envelope_rows(outcomes: list[Outcome], pricing: Pricing) -> list[dict[str, Any]]:
    """Per conversation (longest first) and ctxproxy method: the share of tool calls whose
    envelope is forwarded, over every request's calls and at the last request."""
    rows = []
    for o in sorted(outcomes, key=lambda o: -o.full_tokens):
        direct = o.stats[("direct", "")]
        for (name, _), s in o.stats.items():
            if name == "direct":
                continue
            rows.append(
                {
                    "conversation": o.conv_id,
                    "method": name,
                    "requests": o.requests,
                    "tokens": o.full_tokens,
                    "budget": int(o.full_tokens * ENVELOPE_SHARE),
                    "calls": s.calls,
                    "kept": s.calls_kept / s.calls if s.calls else float("nan"),
                    "last_kept": s.last_calls_kept / s.last_calls if s.last_calls else float("nan"),
                    "last_calls": s.last_calls,
                    "compactions": s.compactions,
                    "cost": s.cost(pricing) / direct.cost(pricing),
                    "tokens_forwarded": s.prompt / direct.prompt,
                }
            )
    return rows
