"""The offline-optimal compaction schedule over the real edit operations: dynamic programming
with the future known, each segment's cost measured by replaying the rules.

    .venv/bin/python -m bench.optimal_real [--max-requests 40] [--prices 0.1,0.25,0.5,0.1w]
                                           [--limit N] [--half all|train|held-out] [--jobs 2]
                                           [--json out.json] [--variant defaults]
                                           [--optimal-from earlier.json] [--look-every 4]
                                           [--fork [--horizon H]]

``bench.optimal`` prices a compaction analytically (the planner's estimate of what each edit
frees, no inject block, no wire weight, no cache granularity), and its own schedule replayed
saves about half what it claims (``bench.optimal_replay``). Here every figure is the replay's
(``bench.cost``'s: every turn, chat, the prefix cache, one price):

- **Runs.** For each request ``k`` of the conversation, one replay in which prune's warm
  schedule is replaced by an oracle that compacts exactly at ``k`` (every step the planner offers
  then: supersede, shrink, mask) and never again under the budget with a warm cache (a cold or
  forced compaction goes as prune decides); and one run that never compacts warm. Each run
  records, per request, the forwarded body's segments and what the emulated cache read.
- **Segments.** A schedule ``k1 < k2 < …`` is priced as: the never-compacting run's requests
  before ``k1``; then, for each ``km``, run ``km``'s requests from ``km + 1`` to the next
  compaction, exactly as that run priced them; and at each later compaction ``j`` coming from
  ``k``, run ``j``'s request ``j`` sent to a cache holding run ``k``'s request ``j − 1`` and the
  never-compacting run's request ``k − 1`` (the transition).
- **The approximation.** The view after a compaction at ``j`` is taken to be the one a session
  that never compacted before ``j`` gets (every eligible item elided, independently of earlier
  compactions): the real chain's earlier placeholders and injected blocks are replayed instead.
  It is checked: the chosen schedule is replayed end to end (the oracle compacting at all its
  requests) and its cost set beside the programme's figure.
- **The programme.** States: the last compaction (or none). ``O(n²)`` transitions, each one
  cache lookup; the ``n + 1`` runs of ``n`` requests dominate the time.

Reported per price: direct's cost, the optimal's saving (the programme's, and its schedule
replayed), the defaults' (online) saving, and online ÷ optimal in aggregate and per conversation
(median, p10, share of conversations where the optimal saves at least 0.5% and online reaches
less than 0.75 of it).

``--optimal-from`` takes the optimal's figures from an earlier run's ``--json`` (they do not
depend on the online variant: the oracle replaces prune's warm schedule) and replays only the
online variant, about 30 s for all 186 conversations at the four prices: a warm rule is compared
in that time, the same prices and requests as the earlier run. ``--look-every N``: the online
variant looks for a warm cut every ``N`` requests instead of prune's 4 (1: every request's
reclaimable tokens counted, where between looks they are counted at the last look's figure, a
lower bound).

The prices share the oracle's runs (``oracle_tracks``): one job a conversation, each run
replayed once and priced at every price unless prune's own schedule decided in it. Runtime, all
186 conversations, four prices: the first 40 requests about 11 minutes on one core, the first
80 about 13 minutes and the first 120 about 24 with ``--jobs 2``. One conversation's time grows
as the cube of its length (a run a request, each as long as the conversation, each request
longer), so the longest dominate: replayed so, whole sessions take hours. Each conversation's
time is printed on stderr; a job holds every price's runs at once.

``--fork`` (``bench.optimal_fork``): the same runs and rows, each run forked from the
never-compacting replay at its compaction instead of replayed from the first request, so whole
sessions fit in under an hour at one price (``--max-requests 0 --fork --prices 0.1 --jobs 2``:
the longest conversation 15 minutes). Over whole sessions the oracle hands choices on in the
sessions that reach the budget's trigger, whose runs are then collected again at each price, so
four prices take up to four times as long on them. ``--horizon H`` bounds each
run to ``H`` requests, and so the optimal to schedules whose compactions are at most ``H`` apart,
the last at most ``H`` before the end: a lower bound on the optimal's saving, recorded in the
``--json`` (and read back with ``--optimal-from``)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.cache_emulator import CacheUse, PrefixCache, Pricing, Segments
from bench.cost import spread
from bench.cost_config import MIN_PREFIX_TOKENS, PRICES, TTL_S, Job, model_of, parse_variant
from bench.cost_lanes import _counters
from bench.optimal_replay import HANDED_ON, add_replay_arguments, oracle
from bench.pool import iter_jobs, map_jobs
from bench.replay import Replay
from bench.split import in_half
from proxy.tokens import ensure_offline_tiktoken
from rules.context import prune, schedule
from tests.support.traces import iter_conversations

NEVER = -1  # the run that never compacts warm
LOOK_EVERY = prune.WARM_LOOK_EVERY  # prune's own


@dataclass
class Track:
    """One run of the ctxproxy lane: per request, its segments, the cache's use, whether it
    compacted; and direct's cost when the run had a direct lane."""

    segments: list[list[bytes]] = field(default_factory=list)
    uses: list[CacheUse] = field(default_factory=list)
    compacted: list[bool] = field(default_factory=list)
    offered: list[bool] = field(default_factory=list)  # a warm look found something to elide
    direct: float = 0.0


class _Recorded(Replay):
    """The replay, noting each ctxproxy lane's segments and cache use on every request (a lane
    per price; while no rule reads the prices they share one run)."""

    costs_only = True  # the runs' costs: the chain and evidence are bench.cost's

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        self.tracks = {p.name: Track() for p in job.pricings}

    def _account(
        self, lane: Any, prefix: Any, view: Any, out: Any, report: Any, *rest: Any
    ) -> None:
        super()._account(lane, prefix, view, out, report, *rest)
        if lane.method.kind != "ctxproxy" or lane.pricing is None:
            return
        track = self.tracks[lane.pricing.name]
        track.segments.append(self.segments.of(out))
        track.uses.append(lane.last_use)
        track.compacted.append(bool(((report or {}).get("prune") or {}).get("compacted")))
        memory = schedule.Memory.load(lane.state.get(prune.SESSION), lane.state.get(prune.CARRYING))
        looked = memory.looked == memory.requests - 1  # this request looked (the oracle: warm)
        track.offered.append(looked and memory.reclaimable > 0)


def replay_tracks(
    job: Job, at: tuple[int, ...] | None, prices: tuple[Pricing, ...] = ()
) -> dict[str, Track]:
    """``job`` replayed with prune's warm schedule replaced by the oracle compacting at ``at``
    (None: prune's own schedule), a track per price of the job; direct's cost at ``prices``
    too (default: the job's). One compaction: prune looks only at multiples of its request
    (a look changes nothing but the schedule's memory, which the oracle does not read)."""
    replay = _Recorded(job)
    if at is None:
        replay.run()
    else:
        with oracle(at, at[0] if len(at) == 1 and at[0] > 0 else 1):
            replay.run()
    tracks = replay.tracks
    for p in prices:
        if p.name not in tracks:
            tracks[p.name] = dataclasses.replace(tracks[job.pricings[0].name])
    for lane in replay.lanes:
        if lane.method.kind == "direct":
            for p in prices or job.pricings:
                tracks[p.name].direct = lane.stats.cost(p)
    return tracks


def replay_track(job: Job, at: tuple[int, ...] | None) -> Track:
    """``replay_tracks`` of a job at one price."""
    return replay_tracks(job, at)[job.pricings[0].name]


def oracle_tracks(job: Job, at: tuple[int, ...]) -> dict[str, Track]:
    """The oracle's run at each price of ``job``. The oracle decides every warm choice whatever
    the price, so a run in which it never handed a choice to prune's own schedule (over the
    budget's trigger, or cold) forwards the same bytes at every price and is replayed once;
    any other is replayed at each price."""
    first = dataclasses.replace(job, pricings=job.pricings[:1])
    handed = HANDED_ON[0]
    tracks = replay_tracks(first, at, job.pricings)
    if HANDED_ON[0] == handed:
        return tracks
    return replay_tracks(job, at)


@dataclass
class Result:
    """One conversation at one price (costs in fresh-token units, the replay's)."""

    conv_id: str
    price: str
    requests: int
    direct: float
    online: float
    optimal: float  # the programme's figure
    replayed: float  # its schedule replayed end to end
    schedule: list[int]
    online_at: list[int]


def transition(
    seg: Segments, before: list[bytes] | None, last: list[bytes], now: list[bytes]
) -> CacheUse:
    """What the cache reads of ``now`` when it holds ``before`` and ``last`` (see the module
    docstring); one clock instant, so nothing expires."""
    cache = PrefixCache(seg, TTL_S, MIN_PREFIX_TOKENS)
    if before:
        cache.send(before, 0.0)
    cache.send(last, 0.0)
    return cache.send(now, 0.0)


def programme(runs: dict[int, Track], p: Pricing, seg: Segments) -> tuple[float, tuple[int, ...]]:
    """The least-cost schedule over the runs (see the module docstring): (cost, requests)."""
    never = runs[NEVER]
    n = len(never.uses)
    cost = {k: [p.cost(u) for u in t.uses] for k, t in runs.items()}
    head = [0.0]
    for c in cost[NEVER]:
        head.append(head[-1] + c)
    usable = [k for k in range(n) if k in runs and runs[k].compacted[k]]
    best: dict[int, tuple[float, int]] = {}  # k -> (cost of requests 0..k, predecessor)
    for j in usable:
        top = (head[j] + cost[j][j], NEVER)
        for k in usable:
            if k >= j:
                break
            run_k = runs[k]
            carried = sum(cost[k][k + 1 : j])
            before = never.segments[k - 1] if k else None
            use = transition(seg, before, run_k.segments[j - 1], runs[j].segments[j])
            total = best[k][0] + carried + p.cost(use)
            if total < top[0]:
                top = (total, k)
        best[j] = top
    final, last = head[n], NEVER
    for k in usable:
        total = best[k][0] + sum(cost[k][k + 1 :])
        if total < final:
            final, last = total, k
    chosen: list[int] = []
    while last != NEVER:
        chosen.append(last)
        last = best[last][1]
    return final, tuple(reversed(chosen))


def runs_of(job: Job, solo: Job) -> dict[str, dict[int, Track]]:
    """Per price of ``job``: the never-compacting run (``job``'s lanes: direct's cost too) and
    one run compacting at each request where a warm look finds something to elide (``solo``:
    the ctxproxy lanes alone; elsewhere the oracle has nothing to compact and the run is the
    first one). The prices share each run where they can (``oracle_tracks``): four prices cost
    about one."""
    never = oracle_tracks(job, ())
    runs = {name: {NEVER: track} for name, track in never.items()}
    offered = sorted({k for t in never.values() for k, o in enumerate(t.offered) if o})
    for k in offered:  # the same session up to k: the oracle's run compacts at k only then
        for name, track in oracle_tracks(solo, (k,)).items():
            if never[name].offered[k]:  # each price's own offers, as a run per price had them
                runs[name][k] = track
    return runs


def fresh_segments(job: Job) -> Segments:
    """A segment store of the job's tokenizer, apart from the one the replays share (each
    replay clears that one)."""
    ensure_offline_tiktoken()
    import tiktoken

    name = _counters().for_model(model_of(job.conv)).encoding_name
    return Segments(tiktoken.get_encoding(name).encode_ordinary)


def conversation(job: Job, fork: bool = False, horizon: int | None = None) -> list[Result]:
    """A worker's task: one conversation at each of the job's prices (its time on stderr).
    ``fork``: the runs by ``bench.optimal_fork`` (each from
    the never-compacting run's state, at most ``horizon`` requests long)."""
    from bench import optimal_fork

    started = time.perf_counter()
    online = replay_tracks(job, None)
    solo = Job(
        job.conv, job.methods[1:], job.pricings, job.seed, cadence=job.cadence,
        max_requests=job.max_requests,
    )  # fmt: skip
    found: dict[str, tuple[float, tuple[int, ...], list[CacheUse]]] = {}
    count = 0  # the runs replayed from the start (none forked)
    if fork:
        found = optimal_fork.schedules(solo, horizon, fresh_segments)
    else:
        runs = runs_of(job, solo)
        seg = fresh_segments(solo)
        for p in job.pricings:
            cost, chosen = programme(runs[p.name], p, seg)
            found[p.name] = (cost, chosen, runs[p.name][NEVER].uses)
        count = len(runs[job.pricings[0].name])
    results = []
    for p in job.pricings:
        mine = online[p.name]
        optimal, chosen, never_uses = found[p.name]
        at_p = dataclasses.replace(solo, pricings=(p,))
        check = replay_track(at_p, chosen).uses if chosen else never_uses
        results.append(
            Result(
                job.conv["id"],
                p.name,
                len(mine.uses),
                mine.direct,
                sum(p.cost(u) for u in mine.uses),
                optimal,
                sum(p.cost(u) for u in check),
                list(chosen),
                [k for k, c in enumerate(mine.compacted) if c],
            )
        )
    took = time.perf_counter() - started
    runs_note = f"{count} runs" if not fork else f"{len(mine.uses)} requests forked"
    print(f"{job.conv['id']}: {runs_note}, {took:.0f} s", file=sys.stderr)
    return results


def online_only(job: Job, known: dict[tuple[str, str], dict[str, Any]]) -> Result:
    """A worker's task with the optimal taken from an earlier run (``--optimal-from``): it does
    not depend on the online variant, so only that variant's replay is run."""
    p = job.pricings[0]
    row = known[(str(job.conv["id"]), p.name)]
    online = replay_track(job, None)
    if row["requests"] != len(online.uses):
        raise ValueError(f"{row['conv_id']}: the earlier run replayed {row['requests']} requests")
    return Result(
        row["conv_id"], p.name, len(online.uses), online.direct,
        sum(p.cost(u) for u in online.uses), row["optimal"], row["replayed"],
        list(row["schedule"]), [k for k, c in enumerate(online.compacted) if c],
    )  # fmt: skip


def figures(rows: list[Result]) -> dict[str, Any]:
    """One price's aggregate and per-conversation figures."""
    direct = sum(r.direct for r in rows)
    per = sorted(
        (r.direct - r.online) / (r.direct - r.optimal)
        for r in rows
        if r.direct > 0 and (r.direct - r.optimal) >= 0.005 * r.direct
    )
    optimal_saving = 1 - sum(r.optimal for r in rows) / direct
    online_saving = 1 - sum(r.online for r in rows) / direct
    return {
        "conversations": len(rows),
        "optimal_saving": optimal_saving,
        "replayed_saving": 1 - sum(r.replayed for r in rows) / direct,
        "online_saving": online_saving,
        "ratio": online_saving / optimal_saving if optimal_saving > 0 else float("nan"),
        "saving_convs": len(per),
        "median": statistics.median(per) if per else float("nan"),
        "p10": per[len(per) // 10] if per else float("nan"),
        "below_075": sum(x < 0.75 for x in per) / len(per) if per else float("nan"),
        "optimal_compactions": sum(len(r.schedule) for r in rows),
        "online_compactions": sum(len(r.online_at) for r in rows),
        "online_beats": sum(r.online < r.optimal - 1e-9 for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_replay_arguments(parser)
    parser.add_argument("--variant", default="defaults", help="the online ctxproxy variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--optimal-from", default=None,
        help="an earlier run's --json: its optimal figures, only the online variant replayed",
    )  # fmt: skip
    parser.add_argument(
        "--fork", action="store_true",
        help="the runs forked from the never-compacting replay (bench.optimal_fork)",
    )  # fmt: skip
    parser.add_argument(
        "--horizon", type=int, default=None,
        help="--fork, the optimal's compactions at most this many requests apart and the last "
        "at most this many before the end: a lower bound on its saving (bench.optimal_fork)",
    )  # fmt: skip
    parser.add_argument(
        "--look-every", type=int, default=LOOK_EVERY,
        help="the online variant's warm looks: every N requests (prune's WARM_LOOK_EVERY)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.horizon is not None and args.horizon < 1:
        parser.error("--horizon: at least 1 request")
    prune.WARM_LOOK_EVERY = max(args.look_every, 1)  # the workers are forked after this
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    methods = (parse_variant("direct"), parse_variant(args.variant))
    convs = spread(in_half(iter_conversations(), args.half), args.limit or None)
    prices = [PRICES[k.strip()] for k in args.prices.split(",") if k.strip()]
    longest_first = sorted(convs, key=lambda c: -len(c["messages"]))
    horizon = args.horizon
    if args.optimal_from:
        with open(args.optimal_from) as fh:
            earlier = json.load(fh)
        known = {(r["conv_id"], r["price"]): r for r in earlier["rows"]}
        horizon = earlier.get("horizon")  # the optimal's, whatever this run was given
        jobs = [
            Job(c, methods, (p,), args.seed, cadence="every-turn", max_requests=args.max_requests)
            for p in prices
            for c in longest_first
            if (str(c["id"]), p.name) in known
        ]
        rows = map_jobs(functools.partial(online_only, known=known), jobs, args.jobs)
    else:  # a job a conversation, at every price: the optimal's runs are shared by the prices
        every = tuple(prices)
        jobs = [
            Job(c, methods, every, args.seed, cadence="every-turn", max_requests=args.max_requests)
            for c in longest_first
        ]
        task = functools.partial(
            conversation, fork=args.fork or args.horizon is not None, horizon=args.horizon
        )
        rows = []
        for done in iter_jobs(task, jobs, args.jobs):
            rows.extend(done)
            if args.json:  # the conversations done so far, should the run be stopped
                _save(args.json, {}, horizon, rows)
    span = f"{args.max_requests or 'all'} requests each"
    looks = f", warm looks every {args.look_every}" if args.look_every != LOOK_EVERY else ""
    if horizon is not None:
        looks += f", the optimal's compactions at most {horizon} requests apart"
    print(f"{len(convs)} conversations ({args.half}), {span}, every turn, {args.variant}{looks}\n")
    print(
        "| price | optimal saving | its schedule replayed | online saving | online ÷ optimal "
        "| per conversation: median · p10 · share below 0.75 (of those it saves ≥ 0.5% on) "
        "| compactions, optimal · online |\n|---|---:|---:|---:|---:|---|---|"
    )
    out = {}
    for p in prices:
        f = figures([r for r in rows if r.price == p.name])
        out[p.name] = f
        print(
            f"| {p.name} | {f['optimal_saving']:.2%} | {f['replayed_saving']:.2%} "
            f"| {f['online_saving']:.2%} | {f['ratio']:.2f} | {f['median']:.2f} · "
            f"{f['p10']:.2f} · {f['below_075']:.0%} ({f['saving_convs']}) "
            f"| {f['optimal_compactions']} · {f['online_compactions']} |"
        )
    if args.json:
        _save(args.json, out, horizon, rows)
    return 0


def _save(path: str, figures: dict[str, Any], horizon: int | None, rows: list[Result]) -> None:
    with open(path, "w") as fh:
        json.dump({"figures": figures, "horizon": horizon, "rows": [asdict(r) for r in rows]}, fh)


if __name__ == "__main__":
    sys.exit(main())
