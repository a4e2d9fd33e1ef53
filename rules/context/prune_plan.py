"""One request's pruning machinery for ``prune``: the overlay being built, per-message sizes,
the first-seen cap of large results (``prune_caps``), the plan of every step a compaction could
take (in stage order: supersede, shrink, mask, drop; each with its estimated gain and the
probability that what it removes is needed again, for ``schedule``), and the compaction itself
down to a target with the stages ``schedule`` chose.

The agent's own old turns shrink before any tool result is masked; results are masked by need
(``need``), not by age alone: those the task may still need are left out of a compaction the
budget does not force, and come last in one it does; a masked result keeps a digest of the
names it showed (``digest``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rules.activity.observations import Observation, of_context
from rules.base import Context, Message
from rules.context import (
    drop_names,
    evidence,
    forced,
    need,
    overlay,
    prune_caps,
    prune_stages,
    replay,
    shrink,
)
from rules.context.overlay_away import AWAY, load_split
from rules.context.schedule import Step
from rules.report import Pruning
from rules.workspace import render as workspace_render
from rules.workspace import workspace_map

STAGES = ("supersede", "shrink", "mask", "drop")
PLACEHOLDER_TOKENS = 30  # an elided result's line, about
_DIGEST_TOKENS = forced.DIGEST_TOKENS  # a masked result's line with its digest, about
SHRINK_REUSE = 0.02  # the agent's own old prose and executed scripts: rarely copied again


class Options(Protocol):
    """The options of prune this machinery reads (prune.Config)."""

    max_result_tokens: int
    max_evidence_tokens: int
    keep_last_observations: int
    keep_last_writes: int
    keep_last_turns: int
    shrink_lines: int
    shrink_arg_chars: int
    drop_turns: bool
    workspace_reads: int


class Run:
    """One request's pruning: the overlay being built, sizes per message, decisions made."""

    def __init__(self, ctx: Context, cfg: Options, namespace: str) -> None:
        self.ctx, self.cfg, self.tokens = ctx, cfg, ctx.tokens
        self.messages = ctx.messages
        self.anchors = ctx.derived(overlay.MEMO, lambda m: replay.anchors_in(ctx, m))
        # Applied again to its own output, the edited messages' anchors are gone: the stored
        # overlay still stands (it is what made them), so it is kept whole (idempotence). Only
        # worth a look at every message when some stored anchor is missing.
        stored = ctx.state.get(namespace)
        self.index = overlay.anchor_index(ctx, self.anchors)  # which anchors are here, where
        own_output = overlay.anchors_missing(stored, self.index) and any(
            overlay.is_rendered(m) for m in self.messages
        )
        # another conversation's entries under this session (a sub-agent's) are kept away
        self.overlay, self.away, self._loaded = load_split(stored, self.index, own_output)
        self.obs: list[Observation] = of_context(ctx)
        self.by_result = {o.result_index: o for o in self.obs}
        self.decisions: list[Pruning] = []
        self.stages: dict[str, int] = {}
        self._evidence: evidence.Evidence | None = None
        # the last rendering: its overlay, the view, and the message each of its messages renders
        self._placed: tuple[overlay.Overlay, list[Message], list[int]] | None = None

    @property
    def evidence(self) -> evidence.Evidence:
        if self._evidence is None:
            self._evidence = evidence.find(self.messages, self.obs, self.cfg.keep_last_writes)
        return self._evidence

    def render(self, ov: overlay.Overlay) -> list[Message]:
        placed: list[int] = []
        view = replay.render(
            self.messages,
            self.anchors,
            ov,
            self.by_result,
            self.tokens,
            self.cfg.max_result_tokens,
            placed,
            self.ctx.renders,
            self.ctx.hash_of,
            self.index,
            self.ctx.memo,  # the session's last replay: its prefix taken over
        )
        self._placed = (ov, view, placed)  # what ``sizes`` counts, for this overlay
        return view

    def view(self, ov: overlay.Overlay) -> list[Message]:
        """``render(ov)``, or its last result when that was for ``ov`` (``compact`` renders its
        trial to size it)."""
        if self._placed is not None and self._placed[0] is ov:
            return self._placed[1]
        return self.render(ov)

    def decide(
        self, ov: overlay.Overlay, i: int, action: str, edit: dict[str, str], freed: int
    ) -> None:
        ov.edits[self.anchors[i]] = edit
        obs = self.by_result.get(i)
        self.decisions.append(
            {
                "index": i,
                "tool_call_id": obs.call_id if obs else self.messages[i].get("tool_call_id"),
                "action": action,
                "reason": edit["reason"],
                "tokens_freed": freed,
            }
        )
        self.stages[action] = self.stages.get(action, 0) + freed

    def cap_new_results(self) -> None:
        """Cap oversized results when first seen (``prune_caps``)."""
        prune_caps.cap_new_results(self)

    # --- the plan: every step a compaction could take, with estimated gains ---------------------

    def overlay_changed(self, stored: object) -> bool:
        """Whether the overlay differs from the stored one: a decision was made this request, or
        loading it moved entries of absent messages away or back (``overlay_away``). Cheap."""
        if self.decisions or self.overlay.compactions != self._loaded[0] or self._loaded[3]:
            return True
        if (
            self.overlay.edits.keys() != self._loaded[1]
            or len(self.overlay.dropped) != self._loaded[2]
        ):
            return True
        return stored is None and bool(self.overlay.edits or self.overlay.dropped)

    def stored_json(self) -> dict[str, Any]:
        """The overlay as stored: this request's, and what is kept away."""
        out = self.overlay.to_json()
        if self.away:
            out[AWAY] = self.away
        return out

    def share_anchors(self, view: list[Message]) -> list[str] | None:
        """Tell the rules after prune (inject) the anchors of ``view``, and return them: each
        rendered message keeps its source message's anchor, a dropped run's line gets one of its
        own. Saves them hashing every edited message again, and keeps an anchor the same when
        its message is elided later."""
        if (
            self._placed is None
            or self._placed[0] is not self.overlay
            or self._placed[1] is not view
        ):
            return None  # the view is not the last rendering (a compaction tried and not kept)
        source = self._placed[2]
        if len(view) == len(self.anchors) and not self.overlay.dropped:
            anchors = self.anchors  # edits in place: the very same anchors
        else:
            mine, hash_of = self.anchors, self.ctx.hash_of
            anchors = [
                mine[i] if i >= 0 else "dropped." + hash_of(m)
                for m, i in zip(view, source, strict=True)
            ]
        self.ctx.share(overlay.MEMO, view, anchors)
        return anchors

    def sizes(self) -> dict[int, int]:
        """Tokens of each message as the overlay renders it now (dropped ones count 0)."""
        if self._placed is None or self._placed[0] is not self.overlay:
            self.render(self.overlay)
        assert self._placed is not None
        _, view, source = self._placed
        count = self.tokens.count_message
        if len(view) == len(self.messages) and not self.overlay.dropped:
            return dict(enumerate(map(count, view)))
        sizes = dict.fromkeys(range(len(self.messages)), 0)
        for m, i in zip(view, source, strict=True):
            if i >= 0:
                sizes[i] = count(m)
        return sizes

    def forwarded(self) -> dict[int, str]:
        """``replay.forwarded_results`` of the overlay's rendering (the one ``sizes`` counted)."""
        view = self.view(self.overlay)
        assert self._placed is not None
        return replay.forwarded_results(self.messages, view, self._placed[2], self.by_result)

    def _elided(self) -> set[str]:
        """Anchors of the messages a compaction has nothing left to do with: dropped, elided or
        shrunk already (a set, as the plan asks about every candidate)."""
        done = set(self.overlay.dropped)
        stale = (*overlay.ELIDE_ACTIONS, "shrink")
        done.update(a for a, edit in self.overlay.edits.items() if edit["action"] in stale)
        return done

    def _shrink_edit(self) -> dict[str, str]:
        lines, chars = self.cfg.shrink_lines, self.cfg.shrink_arg_chars
        return {
            "action": "shrink",
            "reason": f"older than the last {self.cfg.keep_last_turns} turns",
            "lines": str(lines),
            "chars": str(chars),
        }

    def shrink_candidates(self, protected: set[int]) -> list[int]:
        current = prune_stages.current_start(self.messages, self.evidence.first_user)
        return shrink.candidates(
            self.messages, self.obs, protected, current, self.cfg.keep_last_turns
        )

    def plan(self, sizes: dict[int, int], drops: bool = True) -> list[Step]:
        """Every step, in the order a compaction takes them, with its estimated gain. ``drops``
        (only a compaction the budget forces): results still needed are masked, after the
        others, and whole turns dropped, last."""
        protected = set(self.evidence.protected)
        done, anchors = self._elided(), self.anchors
        steps: list[Step] = []
        seen: set[int] = set()
        for i, reason in prune_stages.supersede(self.obs, protected, self.messages):
            if anchors[i] not in done and sizes[i] > PLACEHOLDER_TOKENS:
                seen.add(i)
                steps.append(Step("supersede", sizes[i] - PLACEHOLDER_TOKENS, i, (i,), reason))
        estimates = self.ctx.table(shrink.ESTIMATE_MEMO)
        for i in self.shrink_candidates(protected):
            if anchors[i] not in done:
                gain = shrink.estimate_in(
                    estimates, self.messages[i], self.cfg.shrink_lines, self.cfg.shrink_arg_chars
                )
                if gain > 0:
                    steps.append(Step("shrink", gain, i, (i,), reuse=SHRINK_REUSE))
        masks = [
            (i, reason)
            for i, reason in prune_stages.mask(self.obs, protected, self.cfg.keep_last_observations)
            if i not in seen and anchors[i] not in done and sizes[i] > _DIGEST_TOKENS
        ]
        kept = (
            forced.kept_last(self.obs, self.messages, sizes, self.ctx.budget)
            if drops
            else forced.KEEP_LAST
        )
        if drops:  # forced: the recent results too (but the last few), before any turn goes
            planned = {i for i, _ in masks} | seen | protected
            masks += forced.recent_masks(
                self.obs,
                self.cfg.keep_last_observations,
                lambda i: i not in planned and anchors[i] not in done and sizes[i] > _DIGEST_TOKENS,
                kept,
            )
        working = workspace_render.working_files(
            self.ctx.state.get(workspace_map.NAMESPACE), self.cfg.workspace_reads
        )
        turns = self._droppable_turns(protected) if drops and self.cfg.drop_turns else []
        whole = {i for t in turns for i in t if i in self.by_result and anchors[i] not in done}
        judged = [i for i, _ in masks] + sorted(whole)
        sent = self.forwarded() if drops else None  # the copy model orders forced cuts alone
        needs = need.judge(self.messages, self.obs, judged, working, sent, odds=drops)
        if drops:  # masks and drops by the least expected loss per token (``forced``)
            late = prune_stages.latest_write_calls(self.obs)
            late |= forced.kept_turns(self.messages, self.obs[-kept:], turns)
            return steps + forced.order(masks, turns, needs, sizes, whole, steps, late)
        steps.extend(
            Step("mask", sizes[i] - _DIGEST_TOKENS, i, (i,), reason, needs[i].reuse)
            for i, reason in masks
            if not needs[i].needed
        )
        return steps

    def _droppable_turns(self, protected: set[int]) -> list[list[int]]:
        gone = set(self.overlay.dropped)
        dropped = {i for i, a in enumerate(self.anchors) if a in gone}
        return prune_stages.droppable_turns(
            self.messages, self.obs, self.evidence.first_user, protected, dropped
        )

    # --- the compaction ------------------------------------------------------------------------

    def compact(
        self,
        steps: Sequence[Step],
        take: int,
        total: int,
        fixed: int,
        sizes: dict[int, int],
        fit: int | None = None,
        room: int | None = None,
    ) -> tuple[overlay.Overlay, int]:
        """The first ``take`` planned steps, and more after them while the request is over
        ``fit`` (a last resort only while over ``room``, the budget): a new overlay and its
        exact size (plus ``fixed``, the tokens outside the messages, which ``total`` includes
        as well)."""
        trial = overlay.Overlay(
            dict(self.overlay.edits),
            list(self.overlay.dropped),
            self.overlay.compactions + 1,
            self.overlay.names,
            dict(self.overlay.chosen),
        )
        sizes = dict(sizes)
        dropped = set(trial.dropped)
        for n, step in enumerate(steps):
            if n >= take and (fit is None or total <= fit):
                break
            if n >= take and step.reason == forced.LAST_RESORT and total <= (room or 0):
                continue  # to reach the goal, not a file's latest write: only to fit
            if step.stage == "drop":
                if any(self.anchors[i] in dropped for i in step.messages):
                    continue
                freed = sum(sizes[i] for i in step.messages)
                dropped.update(self.anchors[i] for i in step.messages)
                total -= freed
                self.decisions.append(
                    {
                        "index": step.first,
                        "tool_call_id": None,
                        "action": "drop",
                        "reason": f"dropped {len(step.messages)} messages to fit the budget",
                        "tokens_freed": freed,
                    }
                )
                self.stages["drop"] = self.stages.get("drop", 0) + freed
                continue
            i = step.first
            a = self.anchors[i]
            if a in dropped or (a in trial.edits and trial.edits[a]["action"] != "cap"):
                continue
            if step.stage == "shrink":
                edit = self._shrink_edit()
            else:
                # the result's size (its media's too) goes with the edit: its replay need not
                # count the whole text again on every later request
                size = overlay.result_size(self.messages[i], self.tokens)
                edit = {"action": step.stage, "reason": step.reason, "tokens": str(size)}
                if step.stage == "mask":
                    edit["digest"] = "1"  # the names it showed stay (``overlay.elided_text``)
            freed = sizes[i] - self.tokens.count_message(self.edited(i, edit))
            if freed > 0:
                self.decide(trial, i, step.stage, edit, freed)
                sizes[i], total = sizes[i] - freed, total - freed
        trial.dropped = [a for a in self.anchors if a in dropped]
        chosen = dict(trial.chosen)
        named = (trial, self.overlay, dropped, self.index, self.messages, self.anchors)
        view = drop_names.named_view(*named, self._rendered)
        size = self.tokens.count_messages(view) + fixed
        wide = trial.names == drop_names.NAMES_WIDE and trial.chosen.keys() - chosen.keys()
        if fit is not None and size > fit + fixed and wide:
            # still over: its new runs name as many as the older ways did, before naming none
            trial.chosen = chosen
            view = drop_names.named_view(*named, self._rendered, drop_names.legacy_count_for)
            size = self.tokens.count_messages(view) + fixed
        if fit is not None and size > fit + fixed:  # still over: the names it added go
            drop_names.take_back(trial, self.overlay)
            size = self.tokens.count_messages(self.render(trial)) + fixed
        return trial, size

    def _rendered(self, ov: overlay.Overlay) -> tuple[list[Message], list[int]]:
        """``ov`` rendered, and the message each of its messages renders (-1: a run's line)."""
        view = self.render(ov)
        assert self._placed is not None
        return view, self._placed[2]

    def edited(self, i: int, edit: dict[str, str]) -> Message:
        return overlay.apply_edit(
            self.messages[i],
            edit,
            self.by_result.get(i),  # a cap reads none
            self.tokens,
            self.cfg.max_result_tokens,
            self.ctx.renders,
            self.ctx.hash_of,
        )
