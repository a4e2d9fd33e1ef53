"""Session lengths of the corpus' ``train`` half (``bench/split.py``), as the table prune's
warm-cache schedule estimates a session's remaining requests from (``rules/packs/survival.yaml``,
read by ``rules/context/payback.py``).

    .venv/bin/python -m bench.survival [--half train] [--write]

A session's length is the number of requests its agent sent (``request_prefixes``). The pack keeps
the sorted lengths at 40 evenly spaced quantiles (``bench.horizon``'s summary). Learned on one
half only, so ``bench.cost --half held-out`` measures the schedule on sessions it never saw."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.horizon import quantiles
from bench.split import HALVES, in_half
from tests.support.traces import iter_conversations, request_prefixes

PACK = Path(__file__).resolve().parent.parent / "rules" / "packs" / "survival.yaml"


def lengths(half: str) -> list[int]:
    convs = in_half(iter_conversations(), half)
    return sorted(sum(1 for _ in request_prefixes(c["messages"])) for c in convs)


def render(values: list[int], half: str) -> str:
    return (
        f"# Requests per session in the corpus' {half} half (bench/split.py), at 40 evenly\n"
        "# spaced quantiles: prune's warm-cache schedule reads a session's expected remaining\n"
        "# requests from it (rules/context/payback.py).\n"
        "# Made by `python -m bench.survival --write`.\n"
        f"half: {half}\n"
        f"sessions: {len(values)}\n"
        f"lengths: [{', '.join(str(v) for v in quantiles(values))}]\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--half", default="train", choices=HALVES)
    parser.add_argument("--write", action="store_true", help="rewrite the pack")
    args = parser.parse_args(argv)
    text = render(lengths(args.half), args.half)
    if args.write:
        PACK.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
