"""The tables ``bench.next_action`` prints: literals kept by configuration and age, losses by
what elided their source, the ``--learn`` rates; and the header of the pack it writes."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from bench.copied_literals import AGE_BUCKETS
from bench.next_action_thrash import overshoot, tally_row

if TYPE_CHECKING:  # the bench's own types (it imports this module)
    from bench.next_action import Outcome, Variant


def kept_rows(total: Outcome, variants: list[Variant]) -> list[dict[str, Any]]:
    rows = []
    for v in variants:
        t = total.tally.get(v.name, Counter())
        ages = {b: {"literals": t[f"n {b}"], "kept": t[f"kept {b}"]} for b in AGE_BUCKETS}
        rows.append(
            {
                "configuration": v.name,
                "literals": sum(a["literals"] for a in ages.values()),
                "kept": sum(a["kept"] for a in ages.values()),
                "by_age": ages,
                "losses": {k[6:]: n for k, n in t.most_common() if k.startswith("lost: ")},
                "lost_names": t["lost kind: name"],
                "kept_though_elided": {k[7:]: n for k, n in t.items() if k.startswith("saved: ")},
                "requests": total.requests,
                "compactions": t["compactions"],
                "thrash": t["compactions: thrash"],
                "forced": t["compactions: forced"],
                "thrash_over_budget": t["compactions: thrash, over"],
                "thrash_why": tally_row(t),
                "over_budget": t["over budget"],
                "overshoot": dict(zip(("median", "p90", "max"), overshoot(t), strict=True)),
            }
        )
    return rows


def _pct(kept: int, n: int) -> str:
    return f"{kept / n:.1%}" if n else "—"


def print_rows(rows: list[dict[str, Any]]) -> None:
    heads = " | ".join(f"kept, age {b}" for b in AGE_BUCKETS)
    print(f"| configuration | literals | kept % | {heads} | requests |")
    print("|---|---:|---:|" + "---:|" * len(AGE_BUCKETS) + "---:|")
    for r in rows:
        ages = " | ".join(
            f"{_pct(a['kept'], a['literals'])} of {a['literals']:,}" for a in r["by_age"].values()
        )
        print(
            f"| {r['configuration']} | {r['literals']:,} | {_pct(r['kept'], r['literals'])} "
            f"| {ages} | {r['requests']:,} |"
        )
    stages = sorted({s for r in rows for s in r["losses"]})
    print(
        "\nLost literals by what elided their source result; kept ones whose source result was "
        "elided, by where they survived:\n"
    )
    print(
        "| configuration | lost | names · lines | " + " | ".join(f"lost: {s}" for s in stages),
        end="",
    )
    print(" | kept, source elided: in inject's block | elsewhere |")
    print("|---|---:|---:|" + "---:|" * (len(stages) + 2))
    for r in rows:
        lost = r["literals"] - r["kept"]
        kinds = f"{r['lost_names']:,} · {lost - r['lost_names']:,}"
        cells = "".join(f" | {r['losses'].get(s, 0):,}" for s in stages)
        saved = r["kept_though_elided"]
        print(
            f"| {r['configuration']} | {lost:,} | {kinds}{cells} | {saved.get('inject', 0):,} "
            f"| {saved.get('elsewhere', 0):,} |"
        )
    print(
        "\nCompactions, and those fewer than 5 requests after the session's previous one "
        "(thrash):\n"
    )
    print(
        "| configuration | compactions | forced by the budget | thrash "
        "| thrash, still over the budget after it | requests over the budget "
        "| by, median (share of the budget) | by, p90 | by, max |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["compactions"]:
            by = r["overshoot"]
            print(
                f"| {r['configuration']} | {r['compactions']:,} | {r['forced']:,} "
                f"| {r['thrash']:,} | {r['thrash_over_budget']:,} | {r['over_budget']:,} "
                f"| {by['median']:.1%} | {by['p90']:.1%} | {by['max']:.1%} |"
            )


PACK_HEADER = """\
# How likely a later tool call copies something (a line, a path, a name) from an earlier tool
# result, by the result's action kind and whether prune's need judgement (rules/context/need.py)
# calls it needed, and a factor by its age in assistant turns. prune charges eliding a result
# this probability times the re-read it would force. Measured on the trace corpus by the
# command in ``source`` (bench/reuse_learn.py says how).
"""


def print_learn(table: dict[str, dict[str, list[int]]]) -> None:
    print("\nP(copied later | bucket), over (request, earlier tool result) pairs:\n")
    print("| feature | bucket | samples | copied later | P |")
    print("|---|---|---:|---:|---:|")
    for feature, cells in table.items():
        for value, (n, k) in sorted(cells.items()):
            print(f"| {feature} | {value} | {n:,} | {k:,} | {_pct(k, n)} |")
