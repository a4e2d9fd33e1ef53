"""What a compaction the budget forces elides, and in which order (``prune_plan.Run.plan``).

Past the steps that cost the task nothing much (stale copies, the agent's own old prose and
scripts), masks of tool results and drops of whole old turns are taken in one order: the least
expected loss per token freed first. A result's loss is ranked by the probability that a later
call copies from it (``copy_odds``, by its features: a read unchanged since, its size, its age, a
later use, what a run does, the names no later result shows); a turn's by the sum of those of
the results it still shows whole (a result elided already has given up what it held) plus a
little for its own words. How deep the cut goes is the schedule's (``schedule.choose``), which
charges each step the re-read it may force at the coarser ``need.reuse`` figures (kind, needed,
age): charged at the feature model's, the corpus kept the same literals, but forced cuts stopped
at the goal and came back about twice as often in a long session
(tests/rules/context/test_overlay.py).

So an old turn of spent output goes before a recent read the agent may copy an ``old_str`` from,
and a large output nobody uses before a small result in use: the depth the budget forces is
reached losing the fewest later copies, as a pruning that knew the future would
(``bench/next_action_bound.py``). Turns holding a file's latest write go last, and only when
nothing else makes the request fit the budget (not to reach the goal): they say what changed.
Each gain is net of the steps before it on the same messages (``net``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from rules.activity.observations import Observation
from rules.base import Message
from rules.context import schedule
from rules.context.need import Need
from rules.context.schedule import Step
from rules.messages import role

KEEP_LAST = 2  # a forced compaction masks recent results too, but never these
DROP_TEXT_ODDS = 0.02  # a turn's own words and call arguments: rarely copied from again
DIGEST_TOKENS = 70  # a masked result's line with its digest, about
# the reason of a drop of a turn holding a file's latest write: taken only when nothing else makes
# the request fit the budget (``schedule.choose``, ``prune_plan.Run.compact``)
LAST_RESORT = schedule.LAST_RESORT


def order(
    masks: Sequence[tuple[int, str]],
    turns: Sequence[Sequence[int]],
    needs: Mapping[int, Need],
    sizes: Mapping[int, int],
    whole: set[int],
    before: Sequence[Step] = (),
    late_turns: Collection[int] = frozenset(),
) -> list[Step]:
    """Mask steps for ``masks`` (result index, reason) and drop steps for ``turns`` (message
    indices, oldest first), merged by expected loss per token freed. ``whole``: the results the
    overlay still shows whole (a turn's loss counts those); ``before``: the steps planned ahead
    of these (supersede, shrink), whose gains a drop of their turn does not free again;
    ``late_turns``: the first messages of turns holding a file's latest write (dropped last)."""
    steps = [
        Step("mask", sizes[i] - DIGEST_TOKENS, i, (i,), reason, needs[i].reuse, needs[i].odds)
        for i, reason in masks
    ]
    for turn in turns:
        live = [needs[i] for i in turn if i in whole and i in needs]
        freed = sum(sizes[i] for i in turn)
        reuse = min(1.0, sum(n.reuse for n in live) + DROP_TEXT_ODDS)
        odds = min(1.0, sum(n.odds for n in live) + DROP_TEXT_ODDS)
        steps.append(Step("drop", freed, turn[0], tuple(turn), reuse=reuse, rank=odds))
    late = {s.first for s in steps[len(masks) :] if s.first in late_turns}
    steps = [replace(s, reason=LAST_RESORT) if s.first in late else s for s in steps]

    # stable: among equals, masks before drops and older turns first
    return net(sorted(steps, key=lambda s: (s.first in late, s.loss_per_token())), before)


def kept_last(
    observations: Sequence[Observation],
    messages: Sequence[Message],
    sizes: Mapping[int, int],
    budget: int | None,
) -> int:
    """How many of the last results a forced compaction keeps whole: ``KEEP_LAST``, and every
    result of the model's last turn, which it has not read yet (a batch of calls made at once:
    masked unread, each is read again, and the re-read brings the same request back over the
    budget), while they hold half the budget at most (more could not fit beside the rest)."""
    last_turn = next(
        (i for i in range(len(messages) - 1, -1, -1) if role(messages[i]) == "assistant"), -1
    )
    unread = held = 0
    for o in reversed(observations):
        if o.call_index != last_turn or o.result_index < last_turn:
            break
        unread += 1
        held += sizes.get(o.result_index, 0)
    if budget is not None and held > budget // 2:
        return KEEP_LAST
    return max(KEEP_LAST, unread)


def recent_masks(
    observations: Sequence[Observation],
    keep_last: int,
    maskable: Callable[[int], bool],
    kept: int = KEEP_LAST,
) -> list[tuple[int, str]]:
    """Forced, before any turn is dropped: the last ``keep_last`` results (those the mask stage
    keeps whole) but the last ``kept`` (``kept_last``), each that ``maskable`` lets go (masked,
    a result keeps its digest; dropped, its turn keeps only a line)."""
    recent = observations[max(0, len(observations) - keep_last) :]
    reason = f"the budget: older than the last {kept} tool results"
    return [
        (o.result_index, reason)
        for o in recent[: max(0, len(recent) - kept)]
        if maskable(o.result_index)
    ]


def kept_turns(
    messages: Sequence[Message], last: Sequence[Observation], turns: Sequence[Sequence[int]]
) -> set[int]:
    """The first messages of turns dropped only to fit the budget, as a file's latest write's
    are: a user's own message (an instruction the working set may not carry on) and a turn
    holding one of the ``last`` results (what the agent acts on next)."""
    results = {o.result_index for o in last}
    return {t[0] for t in turns if role(messages[t[0]]) == "user" or not results.isdisjoint(t)}


def net(steps: Sequence[Step], before: Sequence[Step]) -> list[Step]:
    """``steps`` with each gain net of what earlier steps (``before`` them, then those of the
    list) free on the same messages: a turn dropped after its prose was shrunk or its result
    masked frees only what is left, and a mask after its turn was dropped frees nothing (it
    goes). So the schedule's estimate of the depth a cut reaches is not counted twice."""
    freed_on: dict[int, int] = {}
    for s in before:
        for i in s.messages:
            freed_on[i] = freed_on.get(i, 0) + s.freed
    gone: set[int] = set()
    out = []
    for s in steps:
        if gone.intersection(s.messages):
            continue
        if s.stage == "drop":
            s = replace(s, freed=max(s.freed - sum(freed_on.get(i, 0) for i in s.messages), 0))
            gone.update(s.messages)
        for i in s.messages:
            freed_on[i] = freed_on.get(i, 0) + s.freed
        out.append(s)
    return out
