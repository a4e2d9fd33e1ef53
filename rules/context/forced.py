"""What a compaction the budget forces elides, and in which order (``prune_plan.Run.plan``).

Past the steps that cost the task nothing much (stale copies, the agent's own old prose and
scripts), masks of tool results and drops of whole old turns are taken in one order: the least
expected loss per token freed first. A result's loss is the probability that a later call copies
from it (``copy_odds``, by its features: a read unchanged since, its size, its age, a later use);
a turn's is the sum of those of the results it still shows whole (a result elided already has
given up what it held). So an old turn of spent output goes before a recent read the agent may
copy an ``old_str`` from, and a large listing nobody uses before a small result in use: the depth
the budget forces is reached losing the fewest later copies, as an oracle that knew the future
would (``bench/next_action_bound.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rules.context.need import Need
from rules.context.schedule import Step

DROP_TEXT_ODDS = 0.02  # a turn's own words and call arguments: rarely copied from again


def order(
    masks: Sequence[tuple[int, str]],
    turns: Sequence[Sequence[int]],
    needs: Mapping[int, Need],
    sizes: Mapping[int, int],
    whole: set[int],
    digest_tokens: int,
) -> list[Step]:
    """Mask steps for ``masks`` (result index, reason) and drop steps for ``turns`` (message
    indices, oldest first), merged by expected loss per token freed. ``whole``: the results the
    overlay still shows whole (a turn's loss counts those)."""
    steps = [
        Step("mask", sizes[i] - digest_tokens, i, (i,), reason, needs[i].odds)
        for i, reason in masks
    ]
    for turn in turns:
        odds = sum(needs[i].odds for i in turn if i in whole and i in needs)
        steps.append(
            Step(
                "drop",
                sum(sizes[i] for i in turn),
                turn[0],
                tuple(turn),
                reuse=min(1.0, odds + DROP_TEXT_ODDS),
            )
        )
    # stable: among equals, masks before drops and older turns first
    return sorted(steps, key=Step.loss_per_token)
