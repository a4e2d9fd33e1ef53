"""The warm cuts a ctxproxy variant makes on whole sessions (every turn, chat, the prefix cache),
each with what it cost and freed and how many requests its session went on for: the points where
``bench.end_odds`` asks whether a rule could tell that the session ends before the cut repays.

    .venv/bin/python -m bench.end_points [--prices 0.1,0.25,0.5] [--jobs 1] [--out FILE]
                                         [--variant defaults+guardoff]

The variant is break-even alone by default (``defaults+guardoff``: prune's ``warm_risk_share``
unset), whose cuts the study is of; ``--variant defaults`` takes the shipped rule's.

A point is a request whose prune report says ``compacted`` with a warm decision under the budget
(``paid``, ``soon``, ``expected``). Its payback: its price (``bust_cost`` × ``provider_scale`` +
``expected_loss``) over ``r`` × the tokens it freed (the stages' sum), in requests; it repays if
the session made at least that many requests after it (``remaining``). Each point also carries its
conversation's bills, direct's and the defaults' at its price (``direct_bill``, ``bill``), so
``bench.end_odds`` can say what leaving cuts out would do to the share above 1.02 of direct."""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.cost_config import PRICES, Job, parse_variant
from bench.replay import Replay
from bench.split import half_of
from tests.support.traces import iter_conversations

WARM = ("paid", "soon", "expected")
PRICE_BY_NAME = {p.name: p for p in PRICES.values()}


class _Points(Replay):
    """A replay that keeps the warm cuts of its ctxproxy lanes."""

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        self.points: list[dict[str, Any]] = []

    def _account(
        self, lane: Any, prefix: Any, view: Any, out: Any, report: Any, *rest: Any
    ) -> None:
        super()._account(lane, prefix, view, out, report, *rest)
        prune = (report or {}).get("prune") or {}
        figures = prune.get("schedule") or {}
        if not prune.get("compacted") or figures.get("decision") not in WARM:
            return
        freed = sum(int(v) for v in (prune.get("stages") or {}).values())
        r = float(figures["read_ratio"])
        price = float(figures["bust_cost"]) * float(figures.get("provider_scale", 1.0)) + float(
            figures.get("expected_loss", 0)
        )
        self.points.append(
            {
                "price_key": lane.pricing.name if lane.pricing else "",
                "r": r,
                "k": lane.stats.requests - 1,  # 0-based index of the request
                "decision": figures["decision"],
                "freed": freed,
                "price": round(price, 1),
                "bust": float(figures["bust_cost"]),
                "scale": float(figures.get("provider_scale", 1.0)),
                "carried": figures.get("carried", 0),
                "horizon": figures.get("horizon", 0.0),
            }
        )


def conversation_points(job: Job) -> list[dict[str, Any]]:
    """The warm cuts of ``job``'s conversation, each with the conversation's bills: direct's and
    the ctxproxy variant's at the cut's price (``bills``)."""
    replay = _Points(job)
    outcome = replay.run()
    variant = next(m.name for m in job.methods if m.kind == "ctxproxy")
    direct = outcome.stats[("direct", "")]
    for p in replay.points:
        p.update(
            id=job.conv["id"],
            half=half_of(str(job.conv["id"])),
            source=str(job.conv.get("source", "")),
            length=outcome.requests,
            remaining=outcome.requests - 1 - p["k"],
            direct_bill=direct.cost(PRICE_BY_NAME[p["price_key"]]),
            bill=outcome.stats[(variant, p["price_key"])].cost(PRICE_BY_NAME[p["price_key"]]),
        )
    return replay.points


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--prices", default="0.1,0.25,0.5")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="end_points.json")
    parser.add_argument("--variant", default="defaults+guardoff", help="the ctxproxy variant")
    args = parser.parse_args(argv)
    pricings = tuple(PRICES[p] for p in args.prices.split(","))
    methods = (parse_variant("direct"), parse_variant(args.variant))
    jobs = [Job(c, methods, pricings, 0, cadence="every-turn") for c in iter_conversations()]
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            runs = pool.map(conversation_points, jobs, chunksize=1)
    else:
        runs = [conversation_points(j) for j in jobs]
    points = [p for run in runs for p in run]
    with open(args.out, "w") as f:
        json.dump(points, f, indent=0)
    print(f"{len(points)} warm cuts in {len(jobs)} conversations -> {args.out}")


if __name__ == "__main__":
    main()
