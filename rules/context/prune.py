"""prune: task-aware pruning under the token budget, sticky through the overlay, scheduled by the
provider's prompt-cache economics.

Every request: a tool result over ``max_result_tokens`` is capped when it first appears (head and
tail kept). A compaction edits older messages in stages: supersede (stale copies), shrink (old
prose and large call arguments, every call keeping its envelope), mask (results older than the
last M that the task no longer needs, with a digest of what they showed), drop whole turns;
forced by the budget, masks (those the task may need and the recent ones too, but the last two)
and drops go in one order, the least likely copied from per token first (``forced``). When one
runs, and how deep, is ``schedule``'s choice: for free when the cache is cold; over the budget,
the cut of least expected cost that leaves room for several requests of growth; under it with
a warm cache, once carrying what it frees has cost its bust (break-even). Edits are replayed
byte-for-byte on later requests (the overlay), so the prefix stays the same between
compactions. Calls are never split from results; protected evidence (``evidence``) and the
current turn are never touched. Provider-owned state is left alone. With ``restore_elided``, a
forced compaction also re-judges what earlier ones elided that the agent points at again
(``restore``).
"""

from __future__ import annotations

import operator

from rules.base import Context, Message, RuleResult, frozen
from rules.context import (
    budget_floor,
    carrying,
    free_cut,
    prune_settled,
    prune_stages,
    resend,
    restore,
    risk_budget,
    schedule,
    session_roots,
    ski_draw,
    sticky,
    warm_cut,
)
from rules.context.overlay import Overlay
from rules.context.prune_config import Config as Config  # the registry reads it here
from rules.context.prune_plan import Run
from rules.context.schedule import Step
from rules.messages import HELD, shared_prefix
from rules.report import PruneSummary, Report

NAMESPACE = "prune"
SESSION = "prune_session"  # the schedule's memory of the session's requests
CARRYING = "prune_carrying"  # each reclaimable step's carrying at the last warm look
WARM_LOOK_EVERY = 4  # warm, the most requests between looks (sooner when a cut may have paid)
FREE_MEMO = "prune_free"  # ``Context.memo`` name: the last list without provider-owned items


def provider_owned(ctx: Context) -> str | None:
    """Why the provider owns this conversation's state (then nothing is pruned), or None."""
    if ctx.request.get("previous_response_id"):
        return "previous_response_id"
    if ctx.request.get("conversation"):  # the Responses API's server-side conversation
        return "conversation"
    if ctx.request.get("cachedContent") or ctx.request.get("cached_content"):  # Gemini's
        return "cachedContent"
    # The Responses API's items the chat view does not show: a provider compaction item stands
    # for history only the provider can read. Encrypted reasoning does not: it is the adapter's
    # to keep, with the call it led to (dropped only with it), so pruning goes on around it.
    items = ctx.request.get("input")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("type") == "compaction":
                return "provider compaction item"
    # each message, then its content parts; not those of the session's last list found free
    # of them, resent as the same objects (``Context.memo``)
    kept = ctx.memo.get(FREE_MEMO)
    messages = ctx.messages
    for m in messages[shared_prefix(kept[0][0], messages) :] if kept else messages:
        if m.get("type") == "compaction" or "encrypted_content" in m:
            return "provider compaction item"
        if m.get(HELD) is True:  # its call is an item only the provider can read
            return "provider-held call"
        parts = m.get("content")
        if parts.__class__ is not str and isinstance(parts, list):  # text: most messages
            for item in parts:
                if isinstance(item, dict) and (
                    item.get("type") == "compaction" or "encrypted_content" in item
                ):
                    return "provider compaction item"
    ctx.memo[FREE_MEMO] = [(frozen(messages), None)]
    return None


def _swap(
    run: Run, before: Overlay, total: int, schema: int, goal: int, room: int
) -> tuple[list[Message], int, list[int]] | None:
    """After a forced compaction (``run.overlay``, ``total`` tokens with the tools' ``schema``),
    the results earlier compactions masked or dropped (``before``: the overlay it started from)
    that the agent's last calls point at again (``restore.named_lately``), from the first message
    the compaction changed on (nothing earlier is re-billed for them), are re-judged against
    what is still shown (``restore``): from the overlay without their elisions, the forced order
    is taken again down to the same depth. Those that now rank above something still shown come
    back. The view, its size and the restored messages, or None."""
    cut = run.overlay
    elided = restore.elided_results(run.anchors, before, run.by_result)
    wanted = restore.named_lately(run.messages, run.obs, set(elided))
    turns = prune_stages.turns(run.messages, run.evidence.first_user)
    start = restore.first_change(run.anchors, before, cut)
    base = restore.reopened(run.anchors, cut, wanted, turns, start)
    if base is None:
        return None
    base.compactions = cut.compactions - 1  # the same compaction, taken again
    decisions, stages = list(run.decisions), dict(run.stages)
    run.overlay = base
    sizes = run.sizes()
    steps = run.plan(sizes, drops=True)
    size = sum(sizes.values())
    trial, _ = run.compact(steps, 0, size, schema, sizes, total - schema, room - schema)
    restore.settle(trial, cut)
    view = run.render(trial)
    trial_total = run.tokens.count_messages(view) + schema
    back = restore.restored(run.anchors, cut, trial)
    if back and trial_total <= max(total, goal):
        run.overlay = trial
        return view, trial_total, back
    run.overlay, run.decisions, run.stages = cut, decisions, stages
    return None


def _opening(ctx: Context) -> str:
    """The hash of the conversation's first message past its system prompt ("" for none)."""
    for m in ctx.messages:
        if m.get("role") != "system":
            return ctx.hash_of(m)
    return ""


def apply(ctx: Context, cfg: Config) -> RuleResult:
    owned = provider_owned(ctx)
    if owned:
        return RuleResult.unchanged(ctx, {"prune": {"skipped": owned}})
    run, view = prune_settled.begin(ctx, cfg, NAMESPACE)  # no Run: messages seen, none capped
    schema = ctx.tokens.count_tools(ctx.tools)  # sent with every request: counts against it
    stored = ctx.state.get(NAMESPACE)
    blocks = sticky.stored_tokens(ctx.state.get(sticky.NAMESPACE))  # inject replays them
    own = ctx.tokens.count_messages(view) + schema
    # the memory of this conversation's requests (a sub-agent's under one session: its own)
    root = ctx.hash_of(ctx.messages[0]) if ctx.messages else ""
    stored_memo = ctx.state.get(SESSION)
    session = session_roots.mine(stored_memo, root)
    other = session_roots.switched(stored_memo, root)
    print_ = resend.fingerprint(ctx, own)
    repeated = resend.repeated(session, print_)  # a resend: what its first attempt ran on
    # a resend (of a compacting request too) leaves the memory as its first attempt saved it
    stands = repeated is not None or resend.repeats_cut(session, print_)
    ran_on = session if repeated is None else repeated.memory
    if repeated is not None:  # the blocks as the first attempt counted them (not its own new one)
        blocks = repeated.blocks
    total = own + blocks
    arrived = total  # the request as it came, the previous cuts replayed
    budget = ctx.budget
    steps_in = resend.steps_read(repeated, ctx.state.get(CARRYING))
    memory = schedule.Memory.load(ran_on, None if other else steps_in)
    ledger, risk, guard = risk_budget.allowances(  # the session's risk ledger, when kept
        ran_on, cfg.bet_budget_share, cfg.warm_risk_share
    )
    look: tuple[float, int] | None = None  # a warm look at what is reclaimable
    stale: dict[str, tuple[float, int]] | None = None  # each step's carrying, at a warm look
    due = -1  # the request by which the next warm look is due
    info: PruneSummary = {"budget": budget, "compacted": False}
    if schema:
        info["tools_tokens"] = schema
    if blocks:
        info["inject_tokens"] = blocks
    if budget is not None:
        target = int(budget * cfg.target_ratio)
        reserve = min(cfg.reserve_tokens, int(budget * cfg.reserve_ratio), budget - target)
        room = budget - reserve  # the rest is inject's
        min_gain = (
            cfg.min_gain_tokens
            if cfg.min_gain_tokens is not None
            else int(budget * cfg.min_gain_ratio)
        )
        state, why = schedule.cache_state(ctx.cache, memory, ctx.now)
        forced = total > schedule.trigger(room, budget, memory)
        # Warm and under the budget, what is reclaimable is looked at every few requests, when
        # a cut may have paid, or when a superseded result is free to cut (``carrying``: the
        # figures kept add up the carrying cost between looks). Unknown: nothing is done.
        # A resend whose first attempt did not compact is forwarded as that one was: its warm
        # look (on the same memory and messages) found no cut worth it, so none is looked for
        # again (a client resending one body would otherwise plan a look on every request).
        resent = stands and state == "warm"
        quiet = not forced and (
            state == "unknown"
            or (state == "warm" and (resent or not memory.look_due(WARM_LOOK_EVERY)))
        )
        # no warm cut comes within HEADROOM requests of the last compaction: nor a look for one
        free = quiet and not resent and state == "warm" and not memory.cut_within(schedule.HEADROOM)
        sizes: dict[int, int] = {}
        steps: list[Step] = []
        prefix: list[int] | tuple[int, ...] = [0]
        if free:  # between looks: a superseded result free to cut now (an elided one is not)
            tail, built = free_cut.tail(ctx, cfg, NAMESPACE, run)
            if built is not None:  # the same view, rendered by the Run that sized it
                run, view = built, built.view(built.overlay)
            if tail.freed:
                # nor one that leaves the request so near the budget that its compaction follows
                ceiling = schedule.warm_ceiling(room, budget, memory, total)
                cut = total - sum(max(f, 0) for _, f in tail.freed)
                quiet = cut > ceiling or not warm_cut.free_now(
                    tail.freed, tail.prefix, total, ctx.cache, memory
                )
        if not quiet:
            if not isinstance(run, Run):  # the same view, rendered by the Run that plans
                run, view = prune_settled.run_of(ctx, cfg, NAMESPACE)
            sizes = run.sizes()
            prefix = free_cut.prefix_tokens(sizes)
        if not quiet and isinstance(run, Run):
            steps = run.plan(sizes, drops=forced)
        if state == "warm" and not forced and not quiet and isinstance(run, Run):
            r = ctx.cache.read_ratio
            steps, stale = carrying.own(
                steps, run.anchors, memory.steps(), memory.requests - memory.looked,
                memory.carried_now(r), r,
            )  # fmt: skip
            reclaimable = sum(s.freed for s in steps if s.stage != "drop")
            look = (sum(c for c, _ in stale.values()), reclaimable)
        anchors = run.anchors if isinstance(run, Run) else []
        choice = schedule.choose(
            steps, prefix, total, room, target, ctx.cache, memory, state, cfg.loss_weights,
            min_gain, bet=cfg.bet_on_length, budget=budget, hard_limit=ctx.window_room,
            risk=risk, guard=guard,
            collapsed=sticky.tokens_from(ctx, anchors) if steps and state == "warm" else None,
            threshold=ski_draw.thresholds(
                cfg.warm_threshold, cfg.warm_threshold_floor, ctx.session_id, anchors
            ),
        )  # fmt: skip
        info["schedule"] = {"why": why, **choice.figures}  # type: ignore[typeddict-item]
        if isinstance(choice.figures.get("look_in"), int):
            due = memory.requests + int(choice.figures["look_in"])
        if choice.chosen is not None:  # a cut that is not the first steps in plan order
            steps = [steps[i] for i in choice.chosen]
        if choice.steps and isinstance(run, Run):  # a quiet request takes none
            decision = choice.figures.get("decision")
            kept_decisions, kept_stages = list(run.decisions), dict(run.stages)
            # the compacted prompt carries no stored blocks: inject collapses them into one;
            # forced, steps past the chosen cut go on while the request is above the goal that
            # leaves room for several requests of growth (their gains were estimated)
            fit = int(choice.figures.get("goal", room)) - schema if decision == "forced" else None
            trial, trial_total = run.compact(
                steps, choice.steps, total - blocks - schema, schema, sizes, fit, room - schema
            )
            if trial_total < total - blocks:  # it edited something
                before = run.overlay
                run.overlay, view, total = trial, run.view(trial), trial_total
                info["compacted"] = True
                first = min(s.first for s in steps[: choice.steps]) if choice.steps else 0
                if decision == "forced" and cfg.restore_elided:
                    swapped = _swap(run, before, total, schema, int(choice.figures["goal"]), room)
                    if swapped is not None:
                        view, total, back = swapped
                        info["restored"] = len(back)
                # inject keeps the blocks placed before it (their bytes are still the prefix)
                info["compacted_from"] = run.anchors[first]
            else:
                run.decisions, run.stages = kept_decisions, kept_stages
            if info["compacted"] and stale is not None:  # the cut steps are gone
                for step in steps[: choice.steps]:
                    if step.stage != "drop":
                        stale.pop(carrying.step_key(step.stage, run.anchors[step.first]), None)
            if info["compacted"] and look is not None:  # a warm cut: what its steps left
                cut = sum(s.freed for s in steps[: choice.steps])
                left = float(choice.figures.get("carried_left") or 0.0)
                look = (left, max(look[1] - cut, 0))
        info.update({"target": target, "min_gain": min_gain, "reserve": budget - room})
    over = budget is not None and total > budget
    info.update(
        {
            "stages": run.stages,
            "tokens_after": total,
            "over_budget": over,
            "compactions": run.overlay.compactions,
            "edits": len(run.overlay.edits),
            "dropped": len(run.overlay.dropped),
            # which conversation under the session id (a sub-agent's, a title call's): /ui's
            # session page charts each apart
            "conversation": root[:16],
            "opening": _opening(ctx)[:16],
        }
    )
    report: Report = {"prune": info, "pruning": run.decisions}
    below = None
    if over:
        report["warnings"] = [{"kind": "over_budget", "tokens": total, "budget": budget}]
        below = budget_floor.floor_warning(ctx, info.get("schedule"), view, schema, blocks, budget)
        if below is not None:  # the first time this session is over a budget below its floor
            report["warnings"].append(below)
    # The overlay changes only at a compaction (or a first cap), the session's memory on every
    # request: two namespaces, so the large one is not copied, compared deeply or redacted again
    # on every request.
    state_out = ctx.state
    if below is not None and budget is not None:
        state_out = budget_floor.told(state_out, budget)
    if isinstance(run, Run) and run.overlay_changed(stored):
        state_out = state_out.with_value(NAMESPACE, run.stored_json())
    if stands and not info["compacted"]:  # a retry is not one more request, nor another look
        memo = resend.retried(session, ctx.now)
    else:
        memo = memory.after(
            ctx.now, total, bool(info["compacted"]), session, look, ctx.cache.min_prefix_tokens,
            arrived=arrived, due=due,
            ledger=risk_budget.settle(ledger, ctx.cache, memory, arrived, info),
        )  # fmt: skip
    if memo is not session:
        replaced = stale is not None or bool(info["compacted"] and memory.stale)
        memo = resend.noted(
            memo, print_, ran_on, blocks, steps_in if replaced else resend.UNCHANGED
        )
        state_out = state_out.with_value(SESSION, session_roots.kept(stored_memo, memo, root))
        # the per-step figures change at a look or a compaction only: their own namespace
        if stale is not None:
            state_out = state_out.with_value(CARRYING, carrying.dump(stale))
        elif info["compacted"] and memory.stale:
            state_out = state_out.with_value(CARRYING, {})
    unchanged = all(map(operator.is_, view, ctx.messages))
    same = len(view) == len(ctx.messages) and unchanged
    told = None if same else run.share_anchors(view)
    if isinstance(run, Run):
        prune_settled.settle(ctx, NAMESPACE, run, None if same else view, told)
    return RuleResult(ctx.messages if same else view, state_out, report)
