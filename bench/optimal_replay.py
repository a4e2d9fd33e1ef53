"""The offline-optimal schedule replayed: is ``bench.optimal``'s analytic saving achievable as the
replay prices it?

    .venv/bin/python -m bench.optimal_replay [--max-requests 40] [--prices 0.1,0.25,0.5,0.1w]
                                             [--limit N] [--half all|train|held-out] [--jobs 2]

Per conversation and price: the optimal schedule of ``bench.optimal`` (the requests it compacts
at, its analytic saving), then ``bench.cost``'s replay (every turn, chat, the prefix cache,
``direct`` and ctxproxy's defaults) with prune's schedule replaced by an oracle: under the budget
with a warm cache it compacts exactly at the optimal's requests, taking every step prune's planner
offers then (supersede, shrink, mask: the optimal's edits), and never otherwise; a cold cache or a
forced compaction goes as prune decides. Everything else is the replay's own: inject's block at a
compaction, the placeholders and digests, the wire's serialisation, the cache's 1,024-token
minimum and 128-token steps. The figures: the optimal saving in the analytic model, the same
schedule's saving in the replay, and their ratio (how much of the analytic optimum the replay
prices as achievable)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.cost import spread
from bench.cost_config import PRICES, Job, budget_of, model_of, parse_variant
from bench.cost_lanes import _counters
from bench.optimal import direct_cost, optimal_schedule
from bench.optimal_inputs import _prune_config, plan_inputs
from bench.pool import map_jobs
from bench.replay import Replay
from bench.split import HALVES, in_half
from rules.context import prune, schedule
from tests.support.traces import iter_conversations, request_prefixes


@dataclass(frozen=True)
class Replayed:
    conv_id: str
    price: str
    analytic_direct: float
    analytic_optimal: float
    replay_direct: float
    replay_optimal: float
    compactions: int


# How many choices the oracle has handed to prune's own schedule (over the budget's trigger, or a
# cold cache): only those can make a run's bytes depend on the price (``bench.optimal_real``)
HANDED_ON = [0]


@contextmanager
def oracle(at: Sequence[int] | set[int], every: int = 1) -> Iterator[None]:
    """prune's schedule replaced: a warm compaction the budget does not force happens exactly
    at the requests ``at`` (0-based), with every step planned; prune looks every ``every``
    requests (each of ``at`` must be a multiple: one compaction at ``k`` looks every ``k``). A
    set is read at each choice, so its owner may add to it (``bench.optimal_fork``)."""
    wanted = at if isinstance(at, set) else frozenset(at)
    original, look = schedule.choose, prune.WARM_LOOK_EVERY

    def choose(
        steps: Sequence[schedule.Step], prefix_tokens: Sequence[int], total: int, room: int,
        floor: int, facts: Any, memory: schedule.Memory, state: str, loss: Any, min_gain: int,
        bet: bool = False, budget: int | None = None, hard_limit: int | None = None,
        threshold: Any = None, risk: float | None = None, guard: float | None = None,
        collapsed: Sequence[int] | None = None,
    ) -> schedule.Choice:  # fmt: skip
        if total > schedule.trigger(room, budget, memory) or state == "cold":
            HANDED_ON[0] += 1
            return original(
                steps, prefix_tokens, total, room, floor, facts, memory, state, loss, min_gain,
                bet, budget, hard_limit, threshold, risk, guard, collapsed,
            )  # fmt: skip
        if memory.requests in wanted and steps:
            freed = sum(s.freed for s in steps)
            return schedule.Choice(len(steps), total - freed, {"decision": "oracle"})
        return schedule.Choice(0, total, {"decision": "none"})

    schedule.choose, prune.WARM_LOOK_EVERY = choose, max(every, 1)  # type: ignore[assignment]
    try:
        yield
    finally:
        schedule.choose, prune.WARM_LOOK_EVERY = original, look  # type: ignore[assignment]


def replay_cost(job: Job, at: Sequence[int]) -> tuple[float, float, int]:
    """(direct's cost, the oracle's cost, its compactions) in the replay at the job's price."""
    with oracle(at):
        replay = Replay(job)
        replay.run()
    p = job.pricings[0]
    costs: dict[str, tuple[float, int]] = {}
    for lane in replay.lanes:
        s = lane.stats
        cost = (s.prompt - s.cached) + p.read_ratio * s.cached + (p.write_ratio - 1) * s.written
        costs[lane.method.kind] = (cost, s.compactions)
    return costs["direct"][0], costs["ctxproxy"][0], costs["ctxproxy"][1]


def conversation(job: Job) -> Replayed:
    """A worker's task: one conversation at one price."""
    prefixes = list(request_prefixes(job.conv["messages"]))[: job.max_requests or None]
    model = model_of(job.conv)
    counter = _counters().for_model(model)
    inputs = plan_inputs(prefixes, counter, _prune_config())
    p = job.pricings[0]
    budget = budget_of(model, next(m for m in job.methods if m.kind == "ctxproxy").budget)
    best = optimal_schedule(inputs, p.read_ratio, p.write_ratio, budget)
    direct = direct_cost(
        inputs.raw_sizes or inputs.sizes, inputs.lengths, p.read_ratio, p.write_ratio
    )
    replay_direct, replay_optimal, made = replay_cost(job, best.compactions)
    return Replayed(job.conv["id"], p.name, direct, best.cost, replay_direct, replay_optimal, made)


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every replay of a schedule takes: requests, prices, corpus, half, workers."""
    parser.add_argument("--max-requests", type=int, default=40, help="0: whole sessions")
    parser.add_argument("--prices", default="0.1,0.25,0.5,0.1w")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--half", default="all", choices=("all", *HALVES))
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_replay_arguments(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    methods = (parse_variant("direct"), parse_variant("defaults"))
    convs = spread(in_half(iter_conversations(), args.half), args.limit or None)
    prices = [PRICES[k.strip()] for k in args.prices.split(",") if k.strip()]
    jobs = [
        Job(c, methods, (p,), 0, cadence="every-turn", max_requests=args.max_requests)
        for p in prices
        for c in convs
    ]
    rows = map_jobs(conversation, jobs, args.jobs)
    print(f"{len(convs)} conversations, {args.max_requests or 'all'} requests each, every turn\n")
    print("| price | optimal saving, analytic | the same schedule, replayed | replayed ÷ analytic "
          "| compactions |\n|---|---:|---:|---:|---:|")  # fmt: skip
    for p in prices:
        mine = [r for r in rows if r.price == p.name]
        analytic = 1 - sum(r.analytic_optimal for r in mine) / sum(r.analytic_direct for r in mine)
        replayed = 1 - sum(r.replay_optimal for r in mine) / sum(r.replay_direct for r in mine)
        made = sum(r.compactions for r in mine)
        ratio = replayed / analytic if analytic > 0 else float("nan")
        print(f"| {p.name} | {analytic:.1%} | {replayed:.1%} | {ratio:.2f} | {made:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
