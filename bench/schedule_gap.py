"""Where prune's online compaction schedule leaves saving on the table against the offline optimum,
conversation by conversation: when each compacts, and what the difference is worth.

    .venv/bin/python -m bench.schedule_gap [--price 0.25] [--max-requests 40] [--limit N]
                                           [--variant defaults] [--jobs 2] [--top 15]
                                           [--half all|train|held-out]
                                           [--json out.json]

**The replay** is ``bench.cost``'s (``bench/replay.py``): each conversation one session, every
request on the every-turn cadence (warm cache), the chat protocol on the prefix cache, ``direct``
and one ctxproxy variant at one price. Each request's prune report is read for whether it
compacted and its schedule's decision. **The optimum** is ``bench/optimal.py``'s over the same
conversation (the same elisions, the future known; analytic, warm cache).

**Per conversation**: the online saving (replay, ``1 − cost ÷ direct's``), the optimal saving
(analytic), the gap (the optimal saving times direct's replay cost, less the online saving: the
fresh-token units the online schedule leaves), and the requests (0-based) each compacts at.

**Classes** of conversation, each with its count and its share of the summed gap:

- ``optimal never compacts``: nothing to win;
- ``online never compacts``: the optimum compacts, the online schedule never does;
- ``online later``: both compact, the online schedule's first compaction after the optimum's;
- ``online not later``: both compact, the online one first or at the same request.

Also the mean request of the first compaction of each (where both compact) and the online
schedule's compactions by decision (``paid``, ``cold``, ``forced``).

Runtime with ``--jobs 2`` on 2 cores: the whole corpus at 40 requests, one price, about 35 s."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.cost import spread
from bench.cost_config import PRICES, Job, budget_of, parse_variant
from bench.optimal import direct_cost, optimal_schedule
from bench.optimal_inputs import _prune_config, plan_inputs
from bench.pool import map_jobs
from bench.replay import Replay
from bench.split import HALVES, in_half
from tests.support.traces import iter_conversations, request_prefixes

CLASSES = ("optimal never compacts", "online never compacts", "online later", "online not later")


@dataclass
class Gap:
    """One conversation's online and optimal schedules (see the module docstring)."""

    conv_id: str
    requests: int
    online_saving: float
    optimal_saving: float
    gap: float  # fresh-token units
    online: list[int] = field(default_factory=list)  # requests that compacted
    decisions: list[str] = field(default_factory=list)  # each compaction's decision
    optimal: list[int] = field(default_factory=list)

    @property
    def kind(self) -> str:
        if not self.optimal:
            return CLASSES[0]
        if not self.online:
            return CLASSES[1]
        return CLASSES[2] if self.online[0] > self.optimal[0] else CLASSES[3]


class _Watched(Replay):
    """The replay, noting each request's compaction and decision per lane."""

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        self.compacted: dict[int, list[tuple[int, str]]] = {}

    def _account(
        self, lane: Any, prefix: Any, view: Any, out: Any, report: Any, *rest: Any
    ) -> None:
        prune = (report or {}).get("prune") or {}
        if prune.get("compacted"):
            decision = str((prune.get("schedule") or {}).get("decision"))
            self.compacted.setdefault(id(lane), []).append((lane.stats.requests, decision))
        super()._account(lane, prefix, view, out, report, *rest)


def conversation_gap(job: Job) -> Gap:
    """A worker's task: one conversation's replay and optimum."""
    replay = _Watched(job)
    replay.run()
    pricing = job.pricings[0]
    costs: dict[str, float] = {}
    compacted: list[tuple[int, str]] = []
    for lane in replay.lanes:
        s = lane.stats
        costs[lane.method.kind] = (
            (s.prompt - s.cached)
            + pricing.read_ratio * s.cached
            + (pricing.write_ratio - 1.0) * s.written
        )
        if lane.method.kind == "ctxproxy":
            compacted = replay.compacted.get(id(lane), [])
    prefixes = list(request_prefixes(job.conv["messages"]))[: job.max_requests or None]
    inputs = plan_inputs(prefixes, replay.counter, _prune_config())
    method = next(m for m in job.methods if m.kind == "ctxproxy")
    budget = budget_of(replay.model, method.budget)
    r, w = pricing.read_ratio, pricing.write_ratio
    best = optimal_schedule(inputs, r, w, budget)
    direct = direct_cost(inputs.raw_sizes or inputs.sizes, inputs.lengths, r, w)
    optimal_saving = 1 - best.cost / direct if direct else 0.0
    online_saving = 1 - costs["ctxproxy"] / costs["direct"] if costs["direct"] else 0.0
    return Gap(
        job.conv["id"],
        len(prefixes),
        online_saving,
        optimal_saving,
        (optimal_saving - online_saving) * costs["direct"],
        [k for k, _ in compacted],
        [d for _, d in compacted],
        list(best.compactions),
    )


def summary(gaps: list[Gap]) -> dict[str, Any]:
    """The classes' counts and shares of the summed gap, and the first compactions' timing."""
    total = sum(g.gap for g in gaps) or 1.0
    classes = {
        name: {
            "conversations": sum(g.kind == name for g in gaps),
            "gap_share": sum(g.gap for g in gaps if g.kind == name) / total,
        }
        for name in CLASSES
    }
    both = [g for g in gaps if g.online and g.optimal]
    return {
        "conversations": len(gaps),
        "classes": classes,
        "online_compactions": sum(len(g.online) for g in gaps),
        "optimal_compactions": sum(len(g.optimal) for g in gaps),
        "decisions": dict(Counter(d for g in gaps for d in g.decisions)),
        "first_online_mean": statistics.fmean(g.online[0] for g in both) if both else None,
        "first_optimal_mean": statistics.fmean(g.optimal[0] for g in both) if both else None,
        "online_in_last_quarter": sum(k >= 0.75 * g.requests for g in gaps for k in g.online),
        "optimal_in_last_quarter": sum(k >= 0.75 * g.requests for g in gaps for k in g.optimal),
    }


def _print(gaps: list[Gap], figures: dict[str, Any], top: int) -> None:
    print("| class | conversations | share of the gap |\n|---|---:|---:|")
    for name, c in figures["classes"].items():
        print(f"| {name} | {c['conversations']} | {c['gap_share']:.1%} |")
    first_on, first_opt = figures["first_online_mean"], figures["first_optimal_mean"]
    print(
        f"\ncompactions: online {figures['online_compactions']} {figures['decisions']}, "
        f"optimal {figures['optimal_compactions']}; in the last quarter of the conversation: "
        f"online {figures['online_in_last_quarter']}, optimal {figures['optimal_in_last_quarter']}"
    )
    if first_on is not None:
        print(
            f"first compaction, where both compact: online {first_on:.1f}, optimal {first_opt:.1f}"
        )
    head = "conversation | requests | online saving | optimal saving | gap | online at | optimal at"
    print(f"\n| {head} |\n|---|---:|---:|---:|---:|---|---|")
    for g in sorted(gaps, key=lambda g: -g.gap)[:top]:
        print(
            f"| {g.conv_id} | {g.requests} | {g.online_saving:.1%} | {g.optimal_saving:.1%} "
            f"| {g.gap:,.0f} | {g.online} | {g.optimal} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--price", default="0.25", choices=sorted(PRICES))
    parser.add_argument("--max-requests", type=int, default=40, help="0: whole sessions")
    parser.add_argument("--limit", type=int, default=0, help="N conversations spread (0: all)")
    parser.add_argument("--variant", default="defaults", help="a ctxproxy variant of bench.cost")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", default=None)
    parser.add_argument("--half", default="all", choices=("all", *HALVES))
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    method = parse_variant(args.variant)
    if method.kind != "ctxproxy":
        parser.error("--variant: a ctxproxy variant")
    methods = (parse_variant("direct"), method)
    convs = spread(in_half(iter_conversations(), args.half), args.limit or None)
    jobs = [
        Job(c, methods, (PRICES[args.price],), 0, cadence="every-turn",
            max_requests=args.max_requests)
        for c in convs
    ]  # fmt: skip
    gaps = sorted(map_jobs(conversation_gap, jobs, args.jobs), key=lambda g: g.conv_id)
    figures = summary(gaps)
    span = f"{args.max_requests or 'all'} requests each"
    gap = sum(g.gap for g in gaps)
    name = PRICES[args.price].name
    print(f"{name}, {args.variant}, {len(gaps)} conversations, {span}; summed gap {gap:,.0f}\n")
    _print(gaps, figures, args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": figures, "conversations": [asdict(g) for g in gaps]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
