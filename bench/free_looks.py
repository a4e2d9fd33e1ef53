"""prune's free-cut looks over ``bench.cost``'s replay: how many warm requests between looks
found a superseded result free to cut (``warm_cut.free_now`` said yes, so prune planned over
every message), how many of those looks cut, and why the others did not.

    .venv/bin/python -m bench.free_looks [bench.cost's options, e.g. --limit 0 --max-requests 40
                                          --no-optimal --variants direct,defaults --jobs 1]

Run in-process (``--jobs 1``: the counts are this process's). A look that cut nothing is put
in the first class that fits: ``recent`` (within 5 requests of the session's last compaction,
where no warm cut is made), ``protected`` (every superseded result among the last ones is
protected evidence), ``near the budget`` (the request, cut, still within 5 requests of growth of
the size the budget compacts at), ``freed nothing`` (a cut was chosen, but eliding the result
did not make it smaller: a small result whose elided line is as long), else the decision."""

from __future__ import annotations

import collections
import sys
from typing import Any

from bench import cost
from rules.activity.observations import of_context
from rules.context import evidence, prune, prune_stages, schedule, warm_cut

COUNTS: collections.Counter[str] = collections.Counter()


def _why_not(ctx: Any, cfg: Any, info: dict[str, Any]) -> str:
    memory = schedule.Memory.load(ctx.state.get(prune.SESSION))
    if memory.cut_within(schedule.HEADROOM):
        return "recent"
    obs = of_context(ctx)
    protected = evidence.find(ctx.messages, obs, cfg.keep_last_writes).protected
    tail = obs[-max(cfg.keep_last_observations, 2) :]
    superseded = [i for i, _ in prune_stages.supersede(tail, set(), ctx.messages)]
    if superseded and all(i in protected for i in superseded):
        return "protected"
    figures = info.get("schedule", {})
    if figures.get("decision") == "none":
        return "near the budget or other"
    if figures.get("decision") in ("paid", "soon"):
        return "freed nothing"
    return f"decision {figures.get('decision')}"


def main(argv: list[str]) -> int:
    said = {"free": False}
    real_free, real_apply = warm_cut.free_now, prune.apply

    def free_now(*args: Any, **kwargs: Any) -> bool:
        out = real_free(*args, **kwargs)
        said["free"] = said["free"] or out
        return out

    def apply(ctx: Any, cfg: Any) -> Any:
        said["free"] = False
        out = real_apply(ctx, cfg)
        if said["free"]:
            info = out.report["prune"]
            COUNTS["looks"] += 1
            COUNTS["cut" if info["compacted"] else "no cut: " + _why_not(ctx, cfg, info)] += 1
        return out

    warm_cut.free_now = free_now  # type: ignore[assignment]
    prune.apply = apply  # type: ignore[assignment]
    code = cost.main(argv)
    print("free-cut looks:", dict(sorted(COUNTS.items())), file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
