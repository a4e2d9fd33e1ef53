"""break_loops: an agent repeating a call that keeps failing, re-reading what has not changed, or
alternating between failing fixes gets an escalating, actionable note inside the newest repeated
tool result (never a new user message: that would break role alternation mid-turn).

Detection (``detect``) looks at the last ``window`` answered calls; a note (``note``) is added only
to results answering the last assistant turn, so the change is at the tail of the conversation.
Once forwarded, a note is history: it is stored in the session's ``loops`` namespace under the
anchor of its result (the overlay's anchors: the message's content hash chained with the one
before) and replayed there byte for byte on later requests, so the prompt cache keeps hitting past
it. Notes whose result left the conversation are dropped. A note is redacted as it is written, so
the bytes stored are the bytes forwarded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from rules.activity.observations import Observation, of_context
from rules.base import Context, Message, RuleConfig, RuleResult, content_hash
from rules.context.overlay import anchors_of
from rules.loops import note, receipts
from rules.loops.detect import Loop, Step, detect, make_step
from rules.messages import (
    INJECT_OPEN,
    INTERRUPTED,
    PLACEHOLDER_PREFIX,
    call_arguments_text,
    call_name,
    harness_turn,
    text_of,
    without_harness,
)
from rules.redact import redact_text
from rules.report import LoopReport, Report
from rules.tool_pairs import pairs_of

NAMESPACE = "loops"
# its ``Context.table``: tool result message -> (it, its ``Step``), checked against the result's
# observation; a step is the call's and the result's content alone, so the runner keeps the table
# across a session's requests
STEPS_MEMO = "loop_steps"
LOOPS_MEMO = "loops_found"  # ``Context.keyed`` name: the loops a list's tail closes


class Config(RuleConfig):
    window: int = Field(
        default=40, ge=4, le=500, description="answered tool calls of recent history searched"
    )
    min_count: int = Field(
        default=3,
        ge=2,
        le=50,
        description="a repeated failure or read is a loop from this count on; the note escalates "
        "at this count, 2 more, then each the sum of the two before (3, 5, 8, 13 …)",
    )
    min_cycles: int = Field(
        default=3, ge=2, le=50, description="alternating failing edits and runs: cycles for a loop"
    )
    elide_from: int = Field(
        default=5,
        ge=0,
        description="from this count, a repeated result the same as the one before keeps only "
        "its first and last lines before the note; 0: never",
    )
    max_candidates: int = Field(
        default=8, ge=1, le=30, description="receipts of a lookup miss: candidates listed at most"
    )
    max_notes: int = Field(
        default=64, ge=1, le=1000, description="notes kept per session for replay (newest kept)"
    )


def _load(value: Any) -> list[dict[str, Any]]:
    notes = value.get("notes") if isinstance(value, dict) else None
    return [
        n
        for n in notes or []
        if isinstance(n, dict) and all(isinstance(n.get(k), str) for k in ("at", "note", "in"))
    ]


def _tail_start(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i + 1
    return len(messages)


def _steps(ctx: Context, window: int) -> list[Step]:
    """The last ``window`` answered calls as steps (each built once per result object)."""
    obs = of_context(ctx)[-window:]
    if not obs:
        return []
    messages, table = ctx.messages, ctx.table(STEPS_MEMO)
    out: list[Step | None] = []
    for o in obs:
        result = messages[o.result_index]
        hit = table.get(id(result))
        # the kept list's observations are the very objects: compared field by field only if not
        if hit is None or hit[0] is not result or (hit[1].obs is not o and hit[1].obs != o):
            out.append(None)
        else:
            out.append(hit[1])
    wanted = {o.result_index for o, step in zip(obs, out, strict=True) if step is None}
    if not wanted:
        return out  # type: ignore[return-value]  # every step known
    # the calls of the results not read yet, from the end (mostly the last turn's few)
    calls: dict[int, Message] = {}
    for _, call, ri in reversed(pairs_of(ctx)):
        if ri in wanted and ri not in calls:  # the last pair naming a result, as a dict's
            calls[ri] = call
            if len(calls) == len(wanted):
                break
    steps = []
    for o, step in zip(obs, out, strict=True):
        if step is None:
            result = messages[o.result_index]
            call = calls[o.result_index]
            step = make_step(
                o, call_name(call), call_arguments_text(call), text_of(result.get("content"))
            )
            table[id(result)] = (result, step)
        steps.append(step)
    return steps


def _latest_plan(ctx: Context, observations: list[Observation]) -> str | None:
    for o in reversed(observations):
        if o.action.kind == "plan":
            call = ctx.messages[o.call_index].get("tool_calls") or []
            for c in call:
                if isinstance(c, dict) and c.get("id") == o.call_id:
                    return call_arguments_text(c)
    return None


def _new_note(
    ctx: Context, cfg: Config, steps: list[Step], loop: Loop, noted_at: int | None
) -> tuple[str, bool, LoopReport]:
    """The note of a loop (``noted_at``: the message number of the loop's full note at this
    escalation, if it has one: then a short one)."""
    tail = loop.steps[-1]
    found = None
    if loop.kind == "repeated_failure" and noted_at is None and not tail.miss:
        # (an edit missing its text names the file, not what the file lacks: no receipts)
        plan = _latest_plan(ctx, of_context(ctx))
        found = receipts.find(tail.outcome.error, tail.arguments, steps, plan, cfg.max_candidates)
    since = loop.steps[0].obs.result_index + 1
    if noted_at is None:
        text = redact_text(note.text(loop, found, cfg.min_count, since))
    else:
        text = note.follow_up(loop, cfg.min_count, noted_at)  # no client text in it
    same = len(loop.steps) > 1 and loop.steps[-2].text == tail.text
    elide = (
        bool(cfg.elide_from)
        and loop.count >= cfg.elide_from
        and same
        and loop.kind != "oscillation"
    )
    item: LoopReport = {
        "kind": loop.kind,
        "count": loop.count,
        "call": redact_text(tail.label),
        "note": text,
        "candidates": [redact_text(c) for c in found.candidates] if found else [],
        "index": tail.obs.result_index,
        "since": since,
    }
    if found is not None and found.near is not None:
        item["near_miss"] = redact_text(found.candidates[found.near])
    if elide:
        item["elided"] = True
    return text, elide, item


def _noted_at(
    loop: Loop, notes: list[dict[str, Any]], index: dict[str, int], cfg: Config
) -> int | None:
    """The message number of the newest full note an earlier step of this loop carries at the
    loop's escalation now (the same kind; None: none, or the loop escalated since)."""
    steps = {s.obs.result_index for s in loop.steps[:-1]}
    now = note.level(loop.count, cfg.min_count)
    for n in reversed(notes):
        i = index.get(n["at"])
        if i is None or i not in steps or n.get("kind") != loop.kind:
            continue
        if note.level(int(n.get("count") or 0), cfg.min_count) != now:
            return None
        if n.get("full", True):
            return i + 1
    return None


def _users_own(message: Message) -> bool:
    """Whether a user-role message holds the user's own words: not only a harness's tagged blocks
    (a ``<system-reminder>``), its marks and nudges (``harness_turn``), or the proxy's text."""
    if message.get("role") != "user":
        return False
    text = text_of(message.get("content"))
    cut = text.find(INJECT_OPEN)
    text = without_harness(text[:cut] if cut >= 0 else text).strip()
    if text.startswith(INTERRUPTED):  # Claude Code's mark; the user's words, if any, follow it
        end = text.find("]")
        text = text[end + 1 :].strip() if end >= 0 else ""
    return bool(text) and not (text.startswith(PLACEHOLDER_PREFIX) or harness_turn(text))


def _users_turn(messages: Sequence[Message], low: int, high: int) -> int:
    """The index of the last message in ``messages[low:high]`` the user wrote, or -1."""
    for i in range(high - 1, low - 1, -1):
        if _users_own(messages[i]):
            return i
    return -1


def _loops(ctx: Context, cfg: Config) -> list[tuple[int, Loop, list[Step]]]:
    """The loops the results answering the last assistant turn close (those without a note).
    A loop is the agent's own: a turn the user wrote between its repeats (an answer to a
    rejected edit, "try again") starts the count anew."""
    messages = ctx.messages
    start = _tail_start(messages)
    tail = [i for i in range(start, len(messages)) if messages[i].get("role") == "tool"]
    loops: list[tuple[int, Loop, list[Step]]] = []
    if tail:
        steps = _steps(ctx, cfg.window)
        at = {s.obs.result_index: k for k, s in enumerate(steps)}
        for i in tail:
            k = at.get(i)
            if k is None or note.has_note(messages[i]):
                continue
            loop = detect(steps, k, cfg.min_count, cfg.min_cycles)
            if loop is None:
                continue
            # looked for only once a loop is found: a loop in the steps since is one in them all
            users = _users_turn(messages, loop.steps[0].obs.result_index + 1, start)
            if users >= 0:  # the count starts again after it (no step since: none counted)
                lo = next((n for n, s in enumerate(steps) if s.obs.call_index > users), len(steps))
                found = lo <= k  # a step since the user's turn
                loop = detect(steps[lo:], k - lo, cfg.min_count, cfg.min_cycles) if found else None
            if loop is not None:
                loops.append((i, loop, steps))
    return loops


def apply(ctx: Context, cfg: Config) -> RuleResult:
    messages = ctx.messages
    raw = ctx.state.get(NAMESPACE)
    stored = _load(raw)
    # a function of the messages and the options alone: a resent list is not searched again
    loops = ctx.keyed(LOOPS_MEMO, (cfg,), lambda: _loops(ctx, cfg))
    if not stored and not loops:
        return RuleResult.unchanged(ctx)  # the common case: no message hashed
    hashes = ctx.hashes_of(messages)
    rendered = {n["out"]: n["in"] for n in stored if isinstance(n.get("out"), str)}
    done = [h in rendered for h in hashes]  # already carries its note (this rule's own output)
    anchors = anchors_of([rendered.get(h, h) for h in hashes])
    index = dict(zip(anchors, range(len(anchors)), strict=True))
    notes = [n for n in stored if n["at"] in index]
    noted = {n["at"] for n in notes}
    found: list[LoopReport] = []
    for i, loop, steps in loops:
        if anchors[i] in noted or done[i]:
            continue  # noted on an earlier request: replayed below as stored
        noted_at = _noted_at(loop, notes, index, cfg)
        text, elide, item = _new_note(ctx, cfg, steps, loop, noted_at)
        out_hash = content_hash(note.render(messages[i], text, elide))
        entry = {
            "at": anchors[i],
            "in": hashes[i],
            "out": out_hash,
            "note": text,
            "elide": elide,
            "kind": loop.kind,
            "count": loop.count,
        }
        if noted_at is not None:
            entry["full"] = False  # a follow-up: the next repeat points at the full note
        notes.append(entry)
        found.append(item)
    notes = notes[-cfg.max_notes :]
    out = list(messages)
    changed = False
    for n in notes:
        i = index[n["at"]]
        if not done[i]:
            out[i] = note.render(messages[i], n["note"], bool(n.get("elide")))
            changed = True
    state = ctx.state
    if raw is not None or notes:
        value = {"notes": notes}
        if value != raw:
            state = state.with_value(NAMESPACE, value)
    report: Report = {"loops": found} if found else {}
    return RuleResult(out if changed else messages, state, report)
