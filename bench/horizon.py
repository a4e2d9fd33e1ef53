"""Session lengths of the trace corpus, as the table prune's schedule estimates a session's
remaining requests from (``rules/packs/horizon.yaml``).

    .venv/bin/python -m bench.horizon [--write]

A session's length is the number of requests its agent sent (``request_prefixes``). The pack keeps
the sorted lengths at 40 evenly spaced quantiles: a summary of the corpus, not a copy of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.support.traces import iter_conversations, request_prefixes

PACK = Path(__file__).resolve().parent.parent / "rules" / "packs" / "horizon.yaml"
POINTS = 40


def lengths() -> list[int]:
    return sorted(sum(1 for _ in request_prefixes(c["messages"])) for c in iter_conversations())


def quantiles(values: list[int], points: int = POINTS) -> list[int]:
    n = len(values)
    return [values[min(n - 1, int((k + 0.5) * n / points))] for k in range(points)]


def render(values: list[int]) -> str:
    q = quantiles(values)
    return (
        "# Requests per session in the trace corpus (../shared/traces), at 40 evenly spaced\n"
        "# quantiles: prune's schedule reads the expected remaining requests of a session from it\n"
        "# (rules/context/schedule.py). Made by `python -m bench.horizon --write`.\n"
        f"sessions: {len(values)}\n"
        f"lengths: [{', '.join(str(v) for v in q)}]\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the pack")
    args = parser.parse_args()
    text = render(lengths())
    if args.write:
        PACK.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
