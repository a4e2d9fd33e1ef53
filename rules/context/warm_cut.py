"""The warm cut under the budget (``schedule``'s third case): which steps, from some message on,
have paid for themselves (``payback``), crediting each cut with what carrying its own steps has
cost (``carrying``); a paid cut taken a little deeper when that saves a second bust soon after;
none within ``HEADROOM`` requests of the session's last compaction (a cut that qualifies then
waits: at most ``HEADROOM - 1`` requests more of its own carrying, where a second bust, or a
run of free ones at the tail, would make the session compact twice within those requests);
when the next look is due; and whether a cut is free now (``free_now``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from rules.base import CacheFacts
from rules.context import carrying, payback
from rules.context.cut_price import Choice, Step, cached_after, provider_scale, step_loss
from rules.context.session_memory import HEADROOM, Memory


class _Cut(NamedTuple):
    value: float  # what ranks it among the cuts that qualify
    chosen: tuple[int, ...]
    bust: float
    lost: float
    why: str
    share: float  # what carrying its steps has cost
    freed: int
    price: float


def break_even(
    steps: Sequence[Step],
    prefix_tokens: Sequence[int],
    total: int,
    cached0: int,
    facts: CacheFacts,
    memory: Memory,
    loss: Mapping[str, float],
    figures: dict[str, Any],
    bet: bool = False,
    ceiling: float | None = None,
    threshold: Callable[[int], float] | None = None,
    risk: float | None = None,
    guard: float | None = None,
    collapsed: Sequence[int] | None = None,
) -> Choice:
    """Warm, under the budget: the steps from some message on, once carrying what they free has
    cost at least their bust plus their expected loss (``paid``), or (``bet``) once the
    session's expected remaining requests say they pay, within ``payback``'s guard (see that
    module). A cut is credited with its own steps' carrying when each has a figure
    (``Step.carried``), else with a share of the session's sum by the tokens it frees. Of the
    cuts that qualify, the one of most value over the session.

    **One bust, not two** (``soon``): a paid cut at the tail leaves the steps before it, and
    those that would pay within ``HEADROOM`` requests at their carrying rate would be cut then,
    re-billing the prompt from further back a second time. So when a cut is made, a deeper cut
    (the same steps and some before them) is taken instead when it has carried at least
    ``payback.GUARD`` of its price and would pay within ``HEADROOM`` requests, and its value over
    them (carried, plus ``HEADROOM`` requests of carrying, less its price) is the larger.
    Bound: should the session end right after, the deeper cut cost ``x + P`` where the best
    schedule for its steps paid ``min(x, P) ≥ GUARD × P``: at most ``(1 + GUARD) / GUARD`` (3×)
    the best, whatever the session's length, as a bet on length (``payback``); should the
    session go on ``HEADROOM`` requests, it is the cut break-even would have made then, one bust
    earlier and smaller. A cut that leaves the request above ``ceiling`` (less than
    ``HEADROOM`` requests of growth under the size the budget forces a compaction at) is not
    made: the budget's compaction would follow within those requests. ``look_in`` in the
    figures: the requests until some cut here could pay at today's price (``carrying.due``),
    when none is made. ``threshold``: the share of its price the cut from message ``i`` on
    waits for (``ski_draw``: a drawn one; None: the whole price), in ``paid``, ``soon`` and
    ``look_in`` alike; ``soon``'s guard stays on the whole price, so its bound holds whatever
    share is drawn. ``risk``: the session's risk budget (``risk_budget``): cuts on the estimate
    are made as with ``bet``, guarded by it instead of ``payback.GUARD``. ``guard``: the
    session's risk budget every cut here waits for (``risk_budget``, prune's
    ``warm_risk_share``): one whose whole price is above it qualifies for nothing (nor counts
    toward the next look: it is looked at again at prune's regular cadence). ``collapsed[i]``:
    the tokens of inject's stored blocks placed on message ``i`` or after it, which inject
    collapses when the compaction's first edit is at or before them: the cut takes them out of
    the prompt, so they are not re-billed (the whole block inject then adds is not priced)."""
    r, w = facts.read_ratio, max(facts.write_ratio, facts.read_ratio)
    gone: Sequence[int] = collapsed or ()
    if gone:  # the blocks before a message stay in its cached prefix
        prefix_tokens = [
            p + gone[0] - (gone[i] if i < len(gone) else 0) for i, p in enumerate(prefix_tokens)
        ]
    own = bool(steps) and all(s.carried is not None for s in steps)
    carried = sum(s.carried or 0.0 for s in steps) if own else memory.carried_now(r)
    scale = provider_scale(facts, memory)  # the bust in the provider's tokens
    bet = bet or risk is not None
    ahead = payback.remaining(memory.requests) if bet else 0.0  # requests still to come
    order = sorted(range(len(steps)), key=lambda i: -steps[i].first)  # from the tail back
    everything = sum(s.freed for s in steps)
    best: _Cut | None = None
    soon: list[_Cut] = []  # deeper cuts that would pay within HEADROOM requests
    due = 1 << 30
    whole = (0.0, 0.0)
    recent = memory.cut_within(HEADROOM)
    # a cut on the estimate takes only the steps whose loss is priced (a stage of weight 0,
    # supersede by default, waits until carrying has paid for it)
    for on_estimate in (False, True)[: 1 + bet]:
        freed, lost, first, mine = 0, 0.0, len(prefix_tokens), 0.0
        taken: list[int] = []
        for n, i in enumerate(order, 1):
            step = steps[i]
            if not on_estimate or loss.get(step.stage, 1.0) > 0:
                freed += step.freed
                lost += step_loss(step, total, r, loss)
                first = min(first, step.first)
                mine += step.carried or 0.0
                taken.append(i)
            if n < len(order) and steps[order[n]].first == step.first:
                continue  # steps on one message go together
            cached = cached_after(first, prefix_tokens, cached0, facts)
            # inject's blocks placed from ``first`` on leave with the cut: not re-billed
            after = total - freed - (gone[first] if first < len(gone) else 0)
            # the bust: what this request costs compacted, beyond what it costs as it is
            # (reported in the rule's tokens, as every figure; weighed in the provider's)
            bust = max((after - cached) * w + cached * r - ((total - cached0) * w + cached0 * r), 0)
            share = mine if own else carried * freed / everything if everything > 0 else 0.0
            future = r * freed * ahead
            price = bust * scale + lost
            z = threshold(first) if threshold is not None else 1.0  # the share it waits for
            why = payback.verdict(share, future, price, z, risk) if freed > 0 else None
            if recent or (ceiling is not None and after > ceiling):
                why = None  # HEADROOM requests from the last compaction and the budget's next
            held = guard is not None and price > guard  # its price does not fit the risk budget
            why = None if held else why
            cut = _Cut(share + future - price, tuple(taken), bust, lost, why or "", share, freed,
                       price)  # fmt: skip
            if why == ("expected" if on_estimate else "paid") and (
                best is None or cut.value > best.value
            ):
                best = cut
            if not on_estimate:
                whole = (bust, lost)  # the deepest cut's, reported when none qualifies
                if freed > 0 and not held:
                    due = min(due, carrying.due(share, freed, z * price, r))
                    if (
                        why != "paid"
                        and not recent
                        and payback.soon(share, r * freed * HEADROOM, price, z)
                    ):
                        soon.append(cut._replace(why="soon"))
    figures.update(carried=round(carried), provider_scale=round(scale, 2))
    if bet:
        figures["ahead"] = round(ahead, 1)
    if risk is not None:
        figures["risk"] = round(risk, 1)
    if guard is not None:
        figures["guard"] = round(guard, 1)
    if best is None:
        bust, lost = whole if steps else (0.0, 0.0)
        figures.update(
            decision="none", expected_saving=0, bust_cost=round(bust), expected_loss=round(lost)
        )
        if due < 1 << 30:  # no cut before HEADROOM requests from the last one: nor a look
            allowed = memory.last_cut + HEADROOM - memory.requests if recent else 0
            figures["look_in"] = max(due, allowed)
        return Choice(0, total, figures)
    if best.why == "paid":
        best = _deeper(best, soon, r)
    chosen = tuple(sorted(best.chosen))
    after = total - best.freed
    # the steps left keep what carrying them has cost: a small cut at the tail does not restart
    # the count of the large stale results before it (nor is that this cut's)
    if own:
        left = max(carried - best.share, 0.0)
    else:
        left = max(carried * (1 - best.freed / everything), 0.0) if everything > 0 else 0.0
    saving = best.share if best.why != "expected" else r * best.freed * ahead
    figures.update(
        decision=best.why, expected_saving=round(saving), bust_cost=round(best.bust),
        expected_loss=round(best.lost), carried_left=round(left, 1),
    )  # fmt: skip
    if risk is not None or guard is not None:  # what the session's ledger charges the cut
        figures.update(price=round(best.price, 1), freed=best.freed)
    return Choice(len(chosen), after, figures, chosen)


def _deeper(paid: _Cut, soon: Sequence[_Cut], read_ratio: float) -> _Cut:
    """The cut to make instead of ``paid``: a deeper one of ``soon`` (it holds ``paid``'s steps
    and some before them) whose value over ``HEADROOM`` requests is the larger, else ``paid``."""

    def over_headroom(cut: _Cut) -> float:
        return cut.share + read_ratio * cut.freed * HEADROOM - cut.price

    best, value = paid, over_headroom(paid)
    for cut in soon:
        if len(cut.chosen) > len(paid.chosen) and over_headroom(cut) > value:
            best, value = cut, over_headroom(cut)
    return best


def free_now(
    candidates: Sequence[tuple[int, int]],
    prefix_tokens: Sequence[int],
    total: int,
    facts: CacheFacts,
    memory: Memory,
) -> bool:
    """Whether one of ``candidates`` (message index, tokens its elision frees) costs nothing to
    cut now: re-billing what the cache holds after it costs no more than it saves this request
    (a result at the end of the cached prompt, superseded by this request's run of the same
    command or read of the same file). Such a cut pays at once, and only while its message is
    the last cached: the next request caches what follows it. Between looks, prune asks this of
    the superseded results (``prune_stages.supersede``, a pass far lighter than the plan)."""
    r, w = facts.read_ratio, max(facts.write_ratio, facts.read_ratio)
    cached0 = min(memory.last_tokens, total)
    cached0 = cached0 if cached0 >= facts.min_prefix_tokens else 0
    scale = provider_scale(facts, memory)
    for first, freed in candidates:
        cached = cached_after(first, prefix_tokens, cached0, facts)
        after = total - freed
        bust = (after - cached) * w + cached * r - ((total - cached0) * w + cached0 * r)
        if freed > 0 and bust * scale <= 0:
            return True
    return False
