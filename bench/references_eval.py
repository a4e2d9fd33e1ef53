"""Pass rate of the reference resolver on multi-turn scenario sets (tests/support/scenarios.py):
each scenario's conversation through track_entities, its last user message through resolve_refs.

    .venv/bin/python -m bench.references_eval tests/rules/entities/scenarios/set_a.yaml [-v]

Prints, per set, the pass rate overall, per class and per language; ``-v`` lists the misses.
To measure another copy of ``rules/`` (the code before a change), run from outside the repository
with that copy first on the path:

    cd /tmp && PYTHONPATH=/tmp/refs_before:/work/main /work/main/.venv/bin/python \\
        -m bench.references_eval /work/main/tests/rules/entities/scenarios/set_a.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import rules
from tests.support.scenarios import load, run, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path, help="scenario YAML files")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the misses")
    args = parser.parse_args(argv)
    print(f"rules from {Path(rules.__file__).parent}")
    for path in args.sets:
        outcomes = [run(sc) for sc in load(path)]
        table = summary(outcomes)
        passed, total = table[""]
        print(f"\n{path.name}: {passed}/{total} ({100 * passed / max(total, 1):.1f}%)")
        for key in sorted(k for k in table if k):
            p, t = table[key]
            print(f"  {key:28s} {p:3d}/{t:<3d} {100 * p / t:5.1f}%")
        if args.verbose:
            for o in outcomes:
                if not o.passed:
                    print("  MISS " + o.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
