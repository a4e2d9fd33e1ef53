"""The pure core of ``repair_tool_chain``: ``repair_messages(messages) -> (messages, repairs)``.

Every tool message is assigned to one call (exact id, nearest preceding call first; then, for
ids that drifted, ``rules.matching``), then the conversation is re-emitted with each call's
results directly after its assistant message. What has no call becomes readable user text; what
has no result gets one short synthetic result; a runaway turn gets one bounded note. Messages
that need nothing keep their very dict, so untouched parts stay byte-identical.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from rules.base import Message, Messages
from rules.chain.call_ids import STRICTEST, CallIdRule
from rules.chain.calls import Slot, collect_slots
from rules.chain.kept_parts import identity, merged, orphans_message
from rules.chain.text import (
    EMPTY_ASSISTANT,
    LATE_RESULT,
    NULL_RESULT,
    SYNTHETIC_RESULT,
    flatten,
    runaway_note,
)
from rules.chain.validator import answered_otherwise, empty_content, find_violations
from rules.matching import Budget, Matcher
from rules.messages import HELD, PLACEHOLDER_PREFIX, append_text, id_text, role
from rules.report import Repair

Repairs = list[Repair]


# Containment comparisons of drifted ids one repair may spend (see rules.matching.Budget): far
# above any real history (a block of 50 calls with 50 drifted results costs 2,500), far below
# seconds of CPU on a hostile one.
MATCH_COMPARISONS = 200_000


def _rep(
    kind: str,
    index: int,
    tool_call_id: str | None,
    action: str,
    *,
    count: int | None = None,
    drifted_from: str | None = None,
) -> Repair:
    rep: Repair = {"kind": kind, "index": index, "tool_call_id": tool_call_id, "action": action}
    if count is not None:
        rep["count"] = count
    if drifted_from is not None:
        rep["from"] = drifted_from
    return rep


def _block_owners(messages: Messages) -> dict[int, int]:
    """tool message index -> index of the assistant message whose block it sits in."""
    owners: dict[int, int] = {}
    owner: int | None = None
    for j, m in enumerate(messages):
        r = role(m)
        if r == "tool":
            if owner is not None:
                owners[j] = owner
        else:
            owner = j if r == "assistant" else None
    return owners


def _pick(slots: list[Slot], keys: list[int], j: int) -> Slot | None:
    """Nearest preceding unanswered call, else a following one, else a duplicate of the nearest.

    ``slots`` are in message order and ``keys`` their message indices, so the nearest preceding
    call is found by bisection: a long history reusing one id stays linear.
    """
    k = bisect_left(keys, j)
    p, nearest = k, None
    while p > 0:  # message by message backwards, calls of one message in their own order
        start = p - 1
        while start > 0 and keys[start - 1] == keys[p - 1]:
            start -= 1
        nearest = nearest or slots[start]
        for s in slots[start:p]:
            if not s.answers:
                return s
        p = start
    for s in slots[k:]:
        if not s.answers:
            return s
    return nearest or (slots[k] if k < len(slots) else None)


class _Assigner:
    def __init__(self, messages: Messages, slots: dict[int, list[Slot]], drift: bool) -> None:
        self.messages = messages
        self.slots = slots
        self.drift = drift
        self.by_raw: dict[str, list[Slot]] = {}
        for i in sorted(slots):
            for s in slots[i]:
                if s.raw_id is not None:
                    self.by_raw.setdefault(s.raw_id, []).append(s)
        self.keys = {raw: [s.index for s in group] for raw, group in self.by_raw.items()}
        # matchers built on first use (most requests have no drift): the block's calls, all calls
        self.budget = Budget(MATCH_COMPARISONS)
        self.local: dict[int | None, Matcher] = {}
        self.everywhere: Matcher | None = None

    def _only_open(self, candidates: tuple[str, ...]) -> str | None:
        return _only_open_of(self.by_raw, candidates)

    def assign(self, j: int, owner: int | None, repairs: Repairs) -> Slot | None:
        tid = id_text(self.messages[j].get("tool_call_id"))
        if tid is None:
            return None
        if tid in self.by_raw:
            return _pick(self.by_raw[tid], self.keys[tid], j)
        if not self.drift:
            return None
        # Drift: first among the calls of the block the result sits in, then among all calls.
        local = self.local.get(owner)
        if local is None:
            group = self.slots.get(owner, []) if owner is not None else []
            local = self.local[owner] = Matcher((s.raw_id for s in group if s.raw_id), self.budget)
        found = local.match(tid)
        if not found.matched and not found.ambiguous:
            if self.everywhere is None:
                self.everywhere = Matcher(self.by_raw, self.budget)
            found = self.everywhere.match(tid)
        raw = found.value
        if raw is None and found.ambiguous:  # of the near misses, the one call still open
            raw = self._only_open(found.candidates)
        if raw is None:
            return None
        slot = _pick(self.by_raw[raw], self.keys[raw], j)
        if slot is not None:
            repairs.append(_rep("id_drift", j, slot.new_id, "id_unified", drifted_from=tid))
        return slot


def _only_open_of(by_raw: dict[str, list[Slot]], candidates: tuple[str, ...]) -> str | None:
    """Of the ids an ambiguous match found, the one whose call alone is still unanswered
    (``call_a`` answered, ``CALL_A`` then answers ``call_A``); None when not exactly one."""
    open_ids = [c for c in candidates if any(not s.answers for s in by_raw.get(c, ()))]
    return open_ids[0] if len(open_ids) == 1 else None


def _assistant_out(
    m: Message, kept: list[Slot], dropped: list[Slot], i: int, reps: Repairs
) -> Message:
    """The assistant message as forwarded (the same dict when nothing changed)."""
    new_calls = [s.call for s in kept]
    raw = m.get("tool_calls")
    if isinstance(raw, list):
        same_calls = (
            bool(raw)
            and len(raw) == len(new_calls)
            and all(a is b for a, b in zip(raw, new_calls, strict=True))
        )
    else:
        same_calls = raw is None  # null tool_calls is accepted; anything else is not
    out = m
    if not same_calls:
        out = dict(m)
        if new_calls:
            out["tool_calls"] = new_calls
        else:
            out.pop("tool_calls", None)
            if not raw or not isinstance(raw, list):
                reps.append(_rep("empty_tool_calls", i, None, "removed_empty_array"))
    if dropped:
        out = append_text(out, runaway_note(dropped))
        reps.append(_rep("runaway_turn", i, None, "collapsed_into_one_note", count=len(dropped)))
    if not new_calls and empty_content(out.get("content")) and not answered_otherwise(out):
        out = {**out, "content": EMPTY_ASSISTANT}
        reps.append(_rep("empty_assistant", i, None, "placeholder_content"))
    return out


def _result_out(slot: Slot, messages: Messages, reps: Repairs) -> Message:
    """The one tool message answering ``slot``: duplicates merged, id unified, content non-null."""
    j = slot.answers[0]
    t = messages[j]
    if t.get("tool_call_id") != slot.new_id:
        t = {**t, "tool_call_id": slot.new_id}
    if t.get("content") is None:
        t = {**t, "content": NULL_RESULT}
        reps.append(_rep("null_tool_content", j, slot.new_id, "placeholder_content"))
    seen = [identity(t)]  # a call's results are few: compared one by one
    for d in slot.answers[1:]:
        dup = messages[d]
        found = identity(dup)
        text, parts, media = found
        if found in seen or not (text or parts or media is not None):
            reps.append(_rep("duplicate_result", d, slot.new_id, "dropped_identical_copy"))
            continue
        seen.append(found)
        note = f"{PLACEHOLDER_PREFIX} another result for this call follows]\n{text}"
        t = merged(t, dup, note, parts)  # its images kept after its text
        reps.append(_rep("duplicate_result", d, slot.new_id, "merged_into_first"))
    return t


def _orphans_out(indices: list[int], messages: Messages, reps: Repairs) -> Message:
    """Results whose call is gone, kept as readable context in one user message."""
    for j in indices:
        tid = id_text(messages[j].get("tool_call_id"))
        reps.append(_rep("orphan_result", j, tid, "kept_as_user_text"))
    return orphans_message([messages[j] for j in indices])


def _held(messages: Messages, calls_at: dict[str, list[int]]) -> set[int]:
    """The results of calls the provider holds (``HELD``) kept where they stand, as the
    validator takes them: the first with its id, where no call before it has that id."""
    held: set[int] = set()
    ids: set[str] = set()
    for j, m in enumerate(messages):
        if role(m) != "tool" or m.get(HELD) is not True:
            continue
        tid = m.get("tool_call_id")
        if isinstance(tid, str) and tid not in ids and calls_at.get(tid, (j + 1,))[0] > j:
            held.add(j)
            ids.add(tid)
    return held


def _rebuild(
    messages: Messages, max_synthetic: int, drift: bool, rule: CallIdRule
) -> tuple[Messages, Repairs]:
    reps: Repairs = []
    slots = collect_slots(messages, reps, rule)
    owners = _block_owners(messages)
    assigner = _Assigner(messages, slots, drift)
    assigned: set[int] = set()
    slot_of: dict[int, Slot] = {}
    held = _held(messages, assigner.keys)
    for j, m in enumerate(messages):
        if role(m) != "tool" or j in held:
            continue
        slot = assigner.assign(j, owners.get(j), reps)
        if slot is None:
            continue
        slot.answers.append(j)
        assigned.add(j)
        slot_of[j] = slot
        if owners.get(j) != slot.index and len(slot.answers) == 1:
            reps.append(_rep("misplaced_result", j, slot.new_id, "moved_next_to_call"))

    late = _late_results(messages, slot_of, assigned, reps)
    out: Messages = []
    orphans: list[int] = []
    for j, m in enumerate(messages):
        r = role(m)
        if r == "tool":
            if j in held:
                if orphans:
                    out.append(_orphans_out(orphans, messages, reps))
                    orphans = []
                if m.get("content") is None:  # kept where it stands, but never sent null
                    m = {**m, "content": NULL_RESULT}
                    reps.append(_rep("null_tool_content", j, m.get("tool_call_id"),
                                     "placeholder_content"))  # fmt: skip
                out.append(m)
            elif j not in assigned and j not in late:
                orphans.append(j)
            continue
        if orphans:
            out.append(_orphans_out(orphans, messages, reps))
            orphans = []
        if r != "assistant":
            out.append(m)
            continue
        group = slots.get(j, [])
        unanswered = [s for s in group if not s.answers]
        runaway = len(unanswered) > max_synthetic
        kept = [s for s in group if s.answers or not runaway]
        dropped = unanswered if runaway else []
        if kept and group[0] is not kept[0]:
            # The turn's first call stays, with the interrupted note: a provider may tie the
            # turn to it (Gemini's thought signature rides on the first of parallel calls, and
            # must come back in that part: a turn whose first call goes unsigned is a 400)
            kept.insert(0, group[0])
            dropped = dropped[1:]
        out.append(_assistant_out(m, kept, dropped, j, reps))
        block: list[tuple[float, int, Message]] = []
        for s in kept:
            if s.answers:
                block.append((s.answers[0], s.pos, _result_out(s, messages, reps)))
            elif s.new_id in late.values():
                synthetic = {"role": "tool", "tool_call_id": s.new_id, "content": LATE_RESULT}
                block.append((float("inf"), s.pos, synthetic))
            else:
                synthetic = {"role": "tool", "tool_call_id": s.new_id, "content": SYNTHETIC_RESULT}
                block.append((float("inf"), s.pos, synthetic))
                reps.append(_rep("unanswered_call", j, s.new_id, "synthesized_result"))
        out.extend(msg for _, _, msg in sorted(block, key=lambda b: (b[0], b[1])))
    if orphans:
        out.append(_orphans_out(orphans, messages, reps))
    if late:
        out.append(orphans_message([messages[j] for j in late], late=True))
    return out, reps


def _late_results(
    messages: Messages, slot_of: dict[int, Slot], assigned: set[int], reps: Repairs
) -> dict[int, str]:
    """The results ending the conversation whose calls lie before its last assistant turn:
    moved back beside their calls, they would leave that turn last (a request ending on the
    model's own turn is a prefill, which newer models refuse). They stay last, as user text
    (index -> the call's id), and each call gets a note that its result comes there."""
    last = len(messages) - 1
    while last >= 0 and role(messages[last]) == "tool":
        last -= 1
    final = [j for j in range(last + 1, len(messages)) if j in assigned]
    if last < 0 or role(messages[last]) != "assistant" or len(final) < len(messages) - last - 1:
        return {}  # ends on a user turn, or a result there stays (an orphan, a held one)
    if not final or any(slot_of[j].index == last for j in final):
        return {}  # the last turn's own results end the conversation
    late: dict[int, str] = {}
    for j in final:
        slot = slot_of[j]
        slot.answers.remove(j)
        assigned.discard(j)
        late[j] = slot.new_id
        reps[:] = [r for r in reps if not (r["kind"] == "misplaced_result" and r["index"] == j)]
        reps.append(_rep("late_result", j, slot.new_id, "kept_last_as_user_text"))
    return late


def repair_messages(
    messages: Messages,
    *,
    max_synthetic_results: int = 16,
    match_drifted_ids: bool = True,
    memo: dict[int, tuple[Message, Any]] | None = None,
    rule: CallIdRule = STRICTEST,
) -> tuple[Messages, Repairs]:
    """(forwarded messages, repairs). The very same list when the chain is already valid.
    ``memo``: the request's validator table (``chain_validator.find_violations``); ``rule``:
    the ids the upstream accepts."""
    if not find_violations(messages, memo, rule):
        return messages, []
    out, reps = _rebuild(messages, max_synthetic_results, match_drifted_ids, rule)
    if find_violations(out, memo, rule):
        out = flatten(out)
        reps.append(_rep("fallback_flatten", 0, None, "calls_and_results_as_text"))
    return out, reps
