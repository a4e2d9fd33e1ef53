"""When prune compacts, and how deep (design section 4). Pure arithmetic over figures prune
gathers; costs are in units of one fresh input token.

- **Cache state.** Cold when the session's previous request is older than the provider's TTL, or
  the upstream reported no cached tokens for a prompt above the minimum although that request kept
  its predecessor's prefix; warm when it was recent; unknown before the first answer.
- **This request.** ``(T - C) × w + C × r``: ``C`` tokens read from the cache at ``r``, the rest
  written at ``w`` (1, or Anthropic's 1.25). A compaction changes the prompt from its earliest
  edit on, so ``C`` shrinks to the tokens before it: that is the bust.
- **What is lost.** Eliding what the agent needs again forces a re-read: another request (the
  whole prompt, at ``r``) plus the result's tokens, fresh. A step is charged that cost times the
  probability that it is needed (``Step.reuse``, from ``need``), times its stage's weight.

Three cases:
- **Cold**, under the budget: the prompt is billed whole anyway, so the steps that cost nothing to
  the task (stale copies, old prose, results no longer needed) are taken for free.
- **Warm, under the budget** (``warm_cut``, ``payback``). Carrying reclaimable tokens costs
  ``r`` each a request; a compaction costs its bust once. The session's memory keeps what
  carrying each step has cost since it was first offered (``carrying``), and a cut is credited
  with its own steps' figures. A compaction is made once that reaches its bust plus its expected
  loss (break-even, ski rental: paid for in hindsight, at most twice the best schedule's
  carrying and busts whatever the session's length), taken deeper when the steps before it
  would pay within ``HEADROOM`` requests (one bust, not two), or (prune's ``bet_on_length``, off
  by default) earlier, once that reaches half of it and the session's expected remaining
  requests (a survival estimate) say the cut repays twice its price (at most 3× the best,
  whatever the estimate). Never within ``HEADROOM`` requests of the session's last compaction.
  The cut may start late in the conversation (the steps from some message on), where the bust
  is small: of the cuts that qualify, the one of most value over the session. The bust is priced
  in the provider's tokens (``provider_scale``): what a cut frees is text counted exactly, but
  the prompt it re-bills also holds what the count leaves out, and the provider's count of the
  previous prompt says how much.
- **Over the budget.** The cut of least expected cost that leaves room for ``HEADROOM`` requests
  of the session's observed growth under the budget, so a session at the budget compacts once and
  then not for several requests (never a message or two each time). Fewer than ``HEADROOM``
  requests after the session's last compaction a request over the budget is held (``_hold``):
  sent as it is, on a warm cache, within the model's window. The horizon (the corpus' session
  lengths) weighs depth against the re-bills of later forced compactions."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from rules.base import CacheFacts
from rules.context import payback, warm_cut
from rules.context.cut_price import Choice, Step, cached_after, provider_scale, step_loss
from rules.context.session_memory import HEADROOM, Memory, trigger
from rules.packs import load_pack

__all__ = [
    "HEADROOM", "LAST_RESORT", "Choice", "Memory", "Step", "cached_after", "choose",
    "provider_scale", "step_loss", "trigger",
]  # fmt: skip

LAST_RESORT = "a file's latest write: only to fit the budget"  # a Step's reason (``forced``)


def cache_state(facts: CacheFacts, memory: Memory, now: float) -> tuple[str, str]:
    """(warm | cold | unknown, why)."""
    last_at = facts.last_at if facts.last_at is not None else memory.last_at
    if last_at is None:
        return "unknown", "no earlier request"
    idle = now - last_at
    if idle > facts.ttl_s:
        return "cold", f"idle {idle:.0f} s > ttl {facts.ttl_s:.0f} s"
    prompt, cached = facts.last_prompt_tokens, facts.last_cached_tokens
    if (
        memory.expect_hit
        and prompt is not None
        and prompt >= facts.min_prefix_tokens
        and cached == 0
    ):
        return "cold", f"upstream read 0 of {prompt} prompt tokens from its cache"
    return "warm", f"idle {idle:.0f} s"


@functools.lru_cache(maxsize=1)
def _lengths() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The corpus' session lengths, sorted, and the sum of those from each index on."""
    pack = load_pack("horizon")
    table = tuple(sorted(int(x) for x in pack.get("lengths") or [] if int(x) > 0))
    return table, payback.suffix_sums(table)


def horizon(requests: int, lengths: Sequence[int] | None = None) -> float:
    """Expected requests still to come after ``requests`` were made: the mean of ``L - n`` over
    corpus sessions longer than ``n``; past the longest, as many as made so far (a session that
    has lasted long tends to last as long again)."""
    if lengths is not None:
        table = tuple(sorted(lengths))
        return payback.mean_remaining(requests, table, payback.suffix_sums(table))
    return payback.mean_remaining(requests, *_lengths())  # stored sums: every request asks


def _growth(memory: Memory, total: int) -> float:
    """Growth per request: smoothed once two requests were seen, else the session's average so
    far."""
    return max(memory.growth, 0.0) if memory.requests >= 2 else total / max(memory.requests, 1)


def _outlook(facts: CacheFacts, memory: Memory, total: int) -> tuple[float, float, float]:
    """(write price ratio, horizon, growth per request)."""
    w = max(facts.write_ratio, facts.read_ratio)
    return w, horizon(memory.requests), _growth(memory, total)


def warm_ceiling(room: int, budget: int | None, memory: Memory, total: int) -> float:
    """The size a warm cut must leave the request under: ``HEADROOM`` requests of growth below
    the size the budget forces a compaction at (the budget's would follow within them)."""
    return trigger(room, budget, memory) - HEADROOM * _growth(memory, total)


def choose(
    steps: Sequence[Step],
    prefix_tokens: Sequence[int],
    total: int,
    room: int,
    floor: int,
    facts: CacheFacts,
    memory: Memory,
    state: str,
    loss: Mapping[str, float],
    min_gain: int,
    bet: bool = False,
    budget: int | None = None,
    hard_limit: int | None = None,
    threshold: Callable[[int], float] | None = None,
    risk: float | None = None,
    guard: float | None = None,
    collapsed: Sequence[int] | None = None,
) -> Choice:
    """How many of ``steps`` to take. ``prefix_tokens[i]``: tokens before message ``i``.
    ``bet``: under the budget, warm, also the cuts the session's expected length pays for.
    ``budget``: the budget itself (``room`` less inject's reserve; default ``room``).
    ``hard_limit``: what the request may never pass (``Context.window_room``): no cut is held
    past it, nor without it. ``threshold``: warm, the share of its price a cut from message
    ``i`` on waits for (``warm_cut``; None: break-even). ``risk``: warm, the session's risk
    budget, which bets on the estimate are guarded by (``risk_budget``; None: off); ``guard``:
    warm, the session's risk budget every cut under the budget waits for (None: off). Neither
    holds a compaction the budget forces. ``collapsed[i]``: warm, the tokens of inject's stored
    blocks a cut from message ``i`` on takes out of the prompt (``sticky.tokens_from``)."""
    r = facts.read_ratio
    w, h, g = _outlook(facts, memory, total)
    # Unknown (no earlier request seen): the prompt may be cached all the same, as far as we
    # know; assuming it is keeps a first request from being rewritten for a gain it may not have.
    seen = total if state == "unknown" else min(memory.last_tokens, total)
    cached0 = seen if state != "cold" else 0
    cached0 = cached0 if cached0 >= facts.min_prefix_tokens else 0

    def now_cost(after: int, cached: int) -> float:
        return (after - cached) * w + cached * r

    def rate(after: int) -> float:
        """Cost per later request when the prompt is brought back to ``after`` each time the
        budget forces it: cache reads of the average prompt, plus the re-bill amortised over
        the requests the room lasts."""
        return r * (after + room) / 2 + (w - r) * after * g / max(room - after, 1)

    figures: dict[str, Any] = {
        "cache": state,
        "read_ratio": r,
        "horizon": round(h, 1),
        "growth": round(g, 1),
    }
    forced = total > trigger(room, budget, memory)
    if state == "unknown" and not forced:  # nothing known of the cache: leave it be
        figures.update(decision="none", bust_cost=0, expected_saving=0)
        return Choice(0, total, figures)
    free = [s for s in steps if s.stage != "drop"]
    if state == "cold" and not forced:
        freed = sum(s.freed for s in free)
        figures.update(decision="cold" if freed > 0 else "none", bust_cost=0)
        return Choice(len(free) if freed > 0 else 0, total - freed, figures)
    if not forced:
        # a warm cut that leaves less than HEADROOM requests of growth under the size the
        # budget forces a compaction at is not made: the budget's would follow within them
        ceiling = warm_ceiling(room, budget, memory, total)
        return warm_cut.break_even(
            free, prefix_tokens, total, cached0, facts, memory, loss, figures, bet, ceiling,
            threshold, risk, guard, collapsed,
        )  # fmt: skip
    # Over the budget: room for HEADROOM requests of growth (not below the floor), so the
    # session does not come back over the budget on the next request.
    goal = room - int(min(HEADROOM * g, max(room - floor, 0)))
    # the deepest any cut reaches (every step), and without the turns kept to fit only
    deepest = total - sum(s.freed for s in steps)
    figures.update(
        goal=goal, before=total, deepest=deepest,
        deepest_spare=total - sum(s.freed for s in steps if s.reason != LAST_RESORT),
    )  # fmt: skip
    # the growth measured between requests (before two, ``g`` is a whole prompt's average)
    measured = g if memory.requests >= 2 else 0.0
    limit = room if budget is None else budget
    scale = provider_scale(facts, memory)  # the window is the provider's count, not ours
    held = _hold(total, deepest, measured, limit, hard_limit, memory, state, scale)
    if held is not None:
        figures.update(decision="held", held=held, bust_cost=0, expected_saving=0)
        return Choice(0, total, figures)
    # in stage order, turns are dropped only when nothing else makes the request fit; a plan
    # whose drops come among its masks ordered them by expected loss: all are usable
    interleaved = any(a.stage == "drop" and b.stage != "drop" for a, b in pairwise(steps))
    usable = steps if interleaved or total - sum(s.freed for s in free) > room else free
    # the last resorts (a turn holding a file's latest write) only when all else leaves it over
    spare = [s for s in usable if s.reason != LAST_RESORT]
    if total - sum(s.freed for s in spare) <= room:
        usable = spare
    best: tuple[float, int, int, float] | None = None  # cost, k, after, bust
    freed = 0
    lost = 0.0
    first = len(prefix_tokens)
    for k, step in enumerate(usable, 1):
        if step.reason == LAST_RESORT and k > 1 and total - freed <= room:
            break  # a last resort only to fit the budget, and the steps before did
        freed += step.freed
        lost += step_loss(step, total, r, loss)
        first = min(first, step.first)
        after = total - freed
        if after < floor and k > 1 and after + step.freed <= goal:
            break  # deeper than the floor, and the step before already reached the goal
        fits_before_last = k < len(usable) and usable[k].reason == LAST_RESORT and after <= room
        if after > goal and k < len(usable) and not fits_before_last:
            continue
        if after > room and freed < min_gain:
            continue  # it cannot fit and frees too little to be worth the bust
        cached = cached_after(first, prefix_tokens, cached0, facts)
        bust = now_cost(after, cached) - now_cost(total, cached0)
        cost = now_cost(after, cached) + lost + h * rate(after)
        if best is None or cost < best[0]:
            best = (cost, k, after, bust)
    if best is None:
        figures.update(decision="none", bust_cost=0, expected_saving=0)
        return Choice(0, total, figures)
    cost, k, after, bust = best
    figures.update(
        decision="forced", bust_cost=round(bust), expected_saving=0, expected_cost=round(cost)
    )
    return Choice(k, after, figures)


def _hold(
    total: int,
    deepest: int,
    growth: float,
    limit: int,
    hard_limit: int | None,
    memory: Memory,
    state: str,
    scale: float = 1.0,
) -> str | None:
    """Why a request over the budget is sent as it is (``held``), or None: the session's last
    compaction (any: the budget's, a warm cut, a cold one) came fewer than ``HEADROOM`` requests
    ago, and a cut now would be its second within them. The request goes over the budget;
    ``HEADROOM`` requests after the last compaction it is cut again, so a session held at the
    budget compacts at most once per ``HEADROOM`` requests. The reason says what a cut would
    have done: even the deepest (``deepest``, the floor) is over the budget (``"over"``); it
    fits, but leaves less than ``HEADROOM`` requests of the measured ``growth`` (``"floor"``; 0
    before it is measured, so ``"spacing"`` then), so the session would be back over within
    them; or it would hold them, the session having grown faster than the last compaction left
    room for (a burst, ``"spacing"``). Never past the window as the provider counts it
    (``scale``: its tokens per one of ours), nor where it is not known (a budget the window sets
    is one such limit), and not on a cold cache, where the whole prompt is billed anyway and the
    cut costs nothing more."""
    if state != "warm" or hard_limit is None or not memory.cut_within(HEADROOM):
        return None
    if total * scale > hard_limit:
        return None
    if deepest > limit:
        return "over"
    if deepest + HEADROOM * growth > limit:  # what the session adds in the requests a cut is for
        return "floor"
    return "spacing"
