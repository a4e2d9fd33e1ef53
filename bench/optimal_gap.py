"""Where the online schedule's saving falls short of the optimal over the real edits, from a
``bench.optimal_real --json`` run (its rows: per conversation and price, direct's cost, the
online variant's, the optimal's, and the requests each compacts at).

    .venv/bin/python -m bench.optimal_gap online.json [--prices r=0.1,r=0.25] [--top 4]
                                          [--late 30] [--replay]

- **The gap**: the optimal's saving less the online's, per conversation, summed; how many
  conversations hold it, and the share the ``--top`` largest hold.
- **Classes** (each a share of the gap summed over the conversations where the online saves
  less than the optimal): ``never`` (the optimal compacts, the online never does); ``lost``
  (the online compacts and saves less than nothing: a cut the replay's end comes before it
  repays); ``later`` (the online's first compaction after the optimal's); ``other`` (the same
  requests or sooner, a different depth, or cuts the online rule does not make).
- **Late cuts**: the compactions each makes at request ``--late`` or later (0-based).
- ``--replay``: per price, each conversation replayed by ``bench.optimal_replay``'s oracle
  (every planned step) at the online's requests, and at those before ``--late``: what leaving
  out the late cuts is worth, as a share of the optimal's saving. And, where the optimal's first
  compaction comes before the online's, that compaction's price in the replay (its request less
  the never-compacting run's) over what the session was billed before it: what a risk budget
  would have to hold to make it (its median, quartiles, and how many cost at most 2, 5, 10%).
  About 1 minute for 186 conversations at two prices.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

CLASSES = ("never", "lost", "later", "other")


def gap_class(row: dict[str, Any]) -> str:
    """Which of ``CLASSES`` a conversation's gap falls in (see the module docstring)."""
    online_at, optimal_at = row["online_at"], row["schedule"]
    if not online_at:
        return "never"
    if row["direct"] - row["online"] < 0:
        return "lost"
    if optimal_at and online_at[0] > optimal_at[0]:
        return "later"
    return "other"


def summary(rows: list[dict[str, Any]], top: int, late: int) -> dict[str, Any]:
    """One price's gap, its classes and the late cuts."""
    gaps = sorted(((r["online"] - r["optimal"], r) for r in rows), key=lambda g: -g[0])
    total = sum(g for g, _ in gaps)
    classes = dict.fromkeys(CLASSES, 0.0)
    for g, r in gaps:
        if g > 0:
            classes[gap_class(r)] += g
    held = sum(classes.values())
    return {
        "gap": total,
        "optimal_saving": sum(r["direct"] - r["optimal"] for r in rows),
        "online_saving": sum(r["direct"] - r["online"] for r in rows),
        "holding": sum(g > 0 for g, _ in gaps),
        "top_share": sum(g for g, _ in gaps[:top]) / total if total else 0.0,
        "top": [r["conv_id"] for _, r in gaps[:top]],
        "classes": {k: v / held if held else 0.0 for k, v in classes.items()},
        "late_online": sum(k >= late for r in rows for k in r["online_at"]),
        "online_cuts": sum(len(r["online_at"]) for r in rows),
        "late_optimal": sum(k >= late for r in rows for k in r["schedule"]),
        "optimal_cuts": sum(len(r["schedule"]) for r in rows),
    }


def replayed(rows: list[dict[str, Any]], price: str, late: int) -> dict[str, Any]:
    """The ``--replay`` figures for one price (see the module docstring)."""
    from bench.cost_config import PRICES, Job, parse_variant
    from bench.optimal_real import replay_track
    from tests.support.traces import iter_conversations

    pricing = next(p for p in PRICES.values() if p.name == price)
    convs = {c["id"]: c for c in iter_conversations()}
    late_worth, need = 0.0, []
    for r in rows:
        job = Job(
            convs[r["conv_id"]], (parse_variant("defaults"),), (pricing,), 0,
            cadence="every-turn", max_requests=r["requests"],
        )  # fmt: skip

        def cost(at: tuple[int, ...], job: Job = job) -> list[float]:
            return [pricing.cost(u) for u in replay_track(job, at).uses]

        early = tuple(k for k in r["online_at"] if k < late)
        if early != tuple(r["online_at"]):
            late_worth += sum(cost(tuple(r["online_at"]))) - sum(cost(early))
        if r["schedule"] and (not r["online_at"] or r["online_at"][0] > r["schedule"][0]):
            k = r["schedule"][0]
            never, cut = cost(()), cost((k,))
            billed = sum(never[:k])
            if billed > 0:
                need.append((cut[k] - never[k]) / billed)
    need.sort()
    optimal = sum(r["direct"] - r["optimal"] for r in rows)
    return {
        "late_worth": late_worth / optimal if optimal else 0.0,
        "first_cuts": len(need),
        "need_median": statistics.median(need) if need else float("nan"),
        "need_p25": need[len(need) // 4] if need else float("nan"),
        "need_p75": need[3 * len(need) // 4] if need else float("nan"),
        "need_within": {x: sum(n <= x for n in need) for x in (0.02, 0.05, 0.10)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("json", help="a bench.optimal_real --json output")
    parser.add_argument("--prices", default="r=0.1,r=0.25")
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--late", type=int, default=30)
    parser.add_argument("--replay", action="store_true")
    args = parser.parse_args(argv)
    with open(args.json) as fh:
        rows = json.load(fh)["rows"]
    for price in (p.strip() for p in args.prices.split(",") if p.strip()):
        mine = [r for r in rows if r["price"] == price]
        s = summary(mine, args.top, args.late)
        classes = ", ".join(f"{k} {v:.0%}" for k, v in s["classes"].items())
        print(
            f"{price}: gap {s['gap']:,.0f} of the optimal's saving {s['optimal_saving']:,.0f} "
            f"(online saves {s['online_saving']:,.0f}); {s['holding']} conversations hold it, "
            f"the top {args.top} {s['top_share']:.0%} ({', '.join(s['top'])})\n"
            f"  classes: {classes}\n  compactions at request {args.late} or later: online "
            f"{s['late_online']} of {s['online_cuts']}, optimal {s['late_optimal']} of "
            f"{s['optimal_cuts']}"
        )
        if args.replay:
            x = replayed(mine, price, args.late)
            within = ", ".join(f"≤ {k:.0%}: {v}" for k, v in x["need_within"].items())
            print(
                f"  the oracle at the online's requests without those from {args.late} on: the "
                f"gap lower by {x['late_worth']:.2f} of the optimal's saving\n"
                f"  the optimal's first compaction, where before the online's ({x['first_cuts']}):"
                f" its price over the bill before it, median {x['need_median']:.3f}, p25 "
                f"{x['need_p25']:.3f}, p75 {x['need_p75']:.3f}; {within}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
