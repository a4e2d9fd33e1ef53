"""``bench.cost``'s tables, printed as Markdown, and its ``--json`` figures."""

from __future__ import annotations

import argparse
import math
from typing import Any

import orjson

from bench.cache_emulator import Pricing
from bench.cost_config import ENVELOPE_SHARE, TTL_S, Method
from bench.cost_stats import THRESHOLDS, Outcome, Totals, envelope_rows, lane_json, table_rows


def fmt_ratio(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"


def fmt_share(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1%}"


def _cost_cell(row: dict[str, Any], price: str) -> str:
    """Aggregate · per-conversation median / p90 · shares above the thresholds."""
    total = row["cost"].get(price, float("nan"))
    d = row["per_conversation"].get(price)
    if not d:
        return fmt_ratio(total)
    over = " / ".join(f"{d[f'over_{t:.2f}']:.0%}" for t in THRESHOLDS)
    return f"{fmt_ratio(total)} · {fmt_ratio(d['median'])} / {fmt_ratio(d['p90'])} · {over}"


def print_main(rows: list[dict[str, Any]], pricings: tuple[Pricing, ...]) -> None:
    heads = [p.name for p in pricings]
    over = " / ".join(f">{t:.2f}" for t in THRESHOLDS)
    print(
        f"cost: all requests' cost ÷ direct's · per conversation: median / p90 of the ratio "
        f"· share of conversations {over}\n"
    )
    print(
        "| method | " + " | ".join(f"cost {h}" for h in heads) + " | tokens forwarded "
        "| cache hit | compactions | latest failure kept | first user kept "
        "| latest writes kept | broken chains | pipeline ms mean / p50 |"
    )
    print("|---|" + "---:|" * (len(heads) + 8))
    for r in rows:
        costs = " | ".join(_cost_cell(r, h) for h in heads)
        comp = "—" if r["compactions"] is None else f"{r['compactions']:,}"
        ms = "—" if r["ms_mean"] is None else f"{r['ms_mean']:.2f} / {r['ms_p50']:.2f}"
        print(
            f"| {r['method']} | {costs} | {fmt_share(r['tokens'])} | {fmt_share(r['hit'])} "
            f"| {comp} | {fmt_share(r['failure'])} | {fmt_share(r['first_user'])} "
            f"| {fmt_share(r['files'])} | {r['broken']} | {ms} |"
        )


def print_optimal(rows: list[dict[str, Any]]) -> None:
    print(
        "| method | price | optimal saving (analytic) | optimal compactions "
        "| online saving (replay) | online ÷ optimal, all | median per conversation "
        "(of those the optimal saves on) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['method']} | {r['price']} | {fmt_share(r['optimal_saving'])} "
            f"| {r['optimal_compactions']:,} | {fmt_share(r['online_saving'])} "
            f"| {fmt_ratio(r['ratio'])} | {fmt_ratio(r['ratio_median'])} "
            f"({r['conversations_saving']} of {r['conversations']}) |"
        )


def print_envelopes(rows: list[dict[str, Any]], pricing: Pricing) -> None:
    print(
        "| conversation | method | requests | size (last request) | budget "
        "| envelopes kept, all requests (of call × request) | at the last request (of calls) "
        f"| compactions | tokens forwarded | cost {pricing.name} |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['conversation']} | {r['method']} | {r['requests']:,} | {r['tokens']:,} "
            f"| {r['budget']:,} | {fmt_share(r['kept'])} of {r['calls']:,} "
            f"| {fmt_share(r['last_kept'])} of {r['last_calls']:,} | {r['compactions']} "
            f"| {fmt_share(r['tokens_forwarded'])} | {fmt_ratio(r['cost'])} |"
        )


def report(
    args: argparse.Namespace,
    methods: list[Method],
    pricings: tuple[Pricing, ...],
    totals: Totals,
    envelopes: list[Outcome],
    seconds: float,
    cache: str,
    chat: bool,
) -> None:
    rows = table_rows(methods, pricings, totals.stats, totals.ratios)
    clock = args.cadence + (f" ({args.interval:g} s)" if args.cadence == "even" else "")
    capped = f", at most {args.max_requests} requests each" if args.max_requests else ""
    print(
        f"protocol {args.protocol}, {cache} cache, cadence {clock}: "
        f"{totals.conversations} conversations{capped}, {totals.requests:,} requests, "
        f"{totals.user_turns} user turns ({totals.idle_over_ttl} after an idle gap over the "
        f"{TTL_S:.0f} s TTL), seed {args.seed}, {seconds:.0f} s on {args.jobs} worker(s)\n"
    )
    print_main(rows, pricings)
    shared, split = totals.shared_runs, totals.split_runs
    if len(pricings) > 1:
        print(
            f"\nprice variants: {shared:,} ctxproxy requests shared one run (no rule had read the "
            f"prices yet), {split:,} ran once per variant"
            + (" (each variant's figures: --json)" if split else "")
        )
    stats = totals.stats
    errors = {m: s.rule_errors for (m, _), s in stats.items() if s.rule_errors}
    repairs = {m: s.integrity_repairs for (m, _), s in stats.items() if s.integrity_repairs}
    lost = {m: s.breakpoints_lost for (m, _), s in stats.items() if s.breakpoints_lost}
    if errors:
        print(f"\nrule errors (skipped, as the server does): {errors}")
    if repairs:
        print(f"\nintegrity repairs (a rule broke the chain, the runner repaired it): {repairs}")
    if cache == "anthropic":
        print(f"\nrequests whose forwarded breakpoints moved or went: {lost or 'none'}")
    optimal = totals.optimal_rows(pricings)
    if optimal:
        print(
            "\nOffline-optimal compaction (bench/optimal.py: the same elisions, the future known, "
            "warm cache, analytic; saving = 1 − cost ÷ direct's):\n"
        )
        print_optimal(optimal)
    env_rows = envelope_rows(envelopes, pricings[0])
    if env_rows:
        print(
            f"\nTool-call envelopes at a budget of {ENVELOPE_SHARE:.0%} of the session's size "
            f"(the {len(envelopes)} longest conversations; {pricings[0].name}):\n"
        )
        print_envelopes(env_rows, pricings[0])
    if args.json:
        data = {
            "conversations": totals.conversations,
            "requests": totals.requests,
            "user_turns": totals.user_turns,
            "idle_over_ttl": totals.idle_over_ttl,
            "seed": args.seed,
            "cadence": args.cadence,
            "interval": args.interval if args.cadence == "even" else None,
            "max_requests": args.max_requests,
            "cache": cache,
            "seconds": round(seconds, 1),
            "rows": rows,
            "lanes": {f"{m}|{p}": lane_json(s) for (m, p), s in stats.items()},
            "per_conversation": {f"{m}|{p}": v for (m, p), v in totals.ratios.items()},
            "per_conversation_ids": [{"id": c, "requests": n} for c, n in totals.order],
            "optimal": optimal,
            "envelopes": env_rows,
            "shared_runs": shared,
            "split_runs": split,
        }
        if not chat:
            data["protocol"] = args.protocol
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
