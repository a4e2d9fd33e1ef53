"""Entities beyond files on scenario sets (tests/support/scenarios.py): each scenario's
conversation through track_entities, its last user message through resolve_refs. Prints the pass
rate by the kind each scenario is about (``abstain`` for those that must abstain) and language,
by class, then the calibration: the precision of the resolutions at or above the threshold (a
resolution to another entity than the one expected, or where none was, is wrong), the coverage
(scenarios that should resolve and did, rightly), and the confident wrong pointers.

    .venv/bin/python -m bench.entities_eval tests/rules/entities/scenarios/entities.yaml [-v]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from rules.entities import resolve_refs
from tests.support.scenarios import Outcome, expected_kind, load, run

LANGS = ("en", "zh", "ko", "ja")


def _cell(cell: list[int] | None) -> str:
    return f"{cell[0]}/{cell[1]}" if cell else "–"


def table(outcomes: list[Outcome]) -> list[str]:
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        for key in ((expected_kind(o.scenario), o.scenario.lang), (expected_kind(o.scenario), "")):
            cells[key][0] += o.passed
            cells[key][1] += 1
    kinds = sorted({k for k, _ in cells}, key=lambda k: (k == "abstain", k))
    lines = ["| kind | " + " | ".join(LANGS) + " | all |", "|---" * (len(LANGS) + 2) + "|"]
    for kind in kinds:
        row = [_cell(cells.get((kind, lang))) for lang in (*LANGS, "")]
        lines.append(f"| {kind} | " + " | ".join(row) + " |")
    return lines


def calibration(outcomes: list[Outcome], threshold: float) -> dict[str, float]:
    """Resolutions at or above ``threshold``: how many, how many right; coverage of the
    scenarios that should resolve; confident wrong pointers."""
    resolved = right = should = covered = 0
    for o in outcomes:
        expects = "abstain" not in o.scenario.expect
        should += expects
        if o.resolved:
            confident = [
                r for r in o.references if r.get("entity") and r.get("confidence", 0) >= threshold
            ]
            resolved += bool(confident)
            right += bool(confident) and o.passed
        covered += expects and o.passed
    return {
        "resolved": resolved,
        "right": right,
        "precision": right / resolved if resolved else 1.0,
        "should_resolve": should,
        "coverage": covered / should if should else 1.0,
        "confident_wrong": resolved - right,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path, help="scenario YAML files")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the misses")
    args = parser.parse_args(argv)
    threshold = resolve_refs.Config().threshold
    outcomes = [run(sc) for path in args.sets for sc in load(path)]
    passed = sum(o.passed for o in outcomes)
    print(f"{passed}/{len(outcomes)} passed ({100 * passed / max(len(outcomes), 1):.1f}%)\n")
    print("\n".join(table(outcomes)))
    by_class: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        by_class[o.scenario.cls][0] += o.passed
        by_class[o.scenario.cls][1] += 1
    print("\nby class: " + ", ".join(f"{c} {p}/{t}" for c, (p, t) in sorted(by_class.items())))
    cal = calibration(outcomes, threshold)
    print(
        f"\ncalibration at threshold {threshold}: {cal['right']}/{cal['resolved']} resolutions "
        f"right (precision {100 * cal['precision']:.1f}%), coverage "
        f"{100 * cal['coverage']:.1f}% of {cal['should_resolve']} that should resolve, "
        f"confident wrong pointers: {cal['confident_wrong']}"
    )
    if args.verbose:
        for o in outcomes:
            if not o.passed:
                print("  MISS " + o.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
