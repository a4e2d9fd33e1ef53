"""A way back for what earlier compactions elided (``prune``, with ``restore_elided``).

Drops and masks are decided with what the session knew then. A compaction the budget forces
rewrites the prompt from its first change on anyway, so it re-judges the results they masked or
dropped that the agent's last ``LATELY`` calls point at again (``named_lately``: a read whose
file they name, a result whose names they use) and that lie past that first change
(``first_change``: nothing earlier is re-billed for them). From the overlay without those
elisions (``reopened``; a dropped turn comes back whole) it takes the forced order
(``forced.order``: the least likely copied from per token freed first) down to the depth the
compaction reached. One that now ranks above something still shown comes back verbatim and the
cut takes the other; one that still ranks low is elided again, with the edit it had (``settle``:
the same bytes). Caps, stale copies (supersede) and shrunk turns stay: they lose nothing a later
call copies.

Only at such a compaction: on any other request the overlay is replayed byte for byte, so the
cached prefix stays the same."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from rules.activity.observations import Observation
from rules.base import Message
from rules.context import digest, need
from rules.context.overlay import Overlay
from rules.messages import text_of

REOPENED = ("mask",)  # edits re-judged at a forced compaction (with drops)
LATELY = 2  # the agent's last calls whose use of a result brings it back in question


def elided_results(anchors: Sequence[str], ov: Overlay, results: Iterable[int]) -> list[int]:
    """Of the tool results at ``results``, those ``ov`` masks or drops."""
    gone = set(ov.dropped)
    out = []
    for i in results:
        a = anchors[i]
        edit = ov.edits.get(a)
        if a in gone or (edit is not None and edit["action"] in REOPENED):
            out.append(i)
    return out


def reopened(
    anchors: Sequence[str],
    ov: Overlay,
    wanted: Collection[int],
    turns: Sequence[Sequence[int]],
    start: int = 0,
) -> Overlay | None:
    """``ov`` without the masks of the results at ``wanted`` and the drops of the turns holding
    them (a turn comes back whole, its calls with their results), or None when that changes
    nothing. Only what lies from message ``start`` on (where the compaction's rewrite begins:
    bringing back anything before it would re-bill more of the prompt)."""
    back = {i for i in wanted if i >= start}
    for turn in turns:
        if back.intersection(turn):
            if turn[0] < start:
                back.difference_update(turn)
            else:
                back.update(turn)
    if not back:
        return None
    reopen = {anchors[i] for i in back}
    edits = {a: e for a, e in ov.edits.items() if not (a in reopen and e["action"] in REOPENED)}
    dropped = [a for a in ov.dropped if a not in reopen]
    if len(edits) == len(ov.edits) and len(dropped) == len(ov.dropped):
        return None
    chosen = {a: p for a, p in ov.chosen.items() if a not in reopen}
    return Overlay(edits, dropped, ov.compactions, ov.names, chosen)


def settle(trial: Overlay, before: Overlay) -> None:
    """``trial`` (a compaction from the reopened overlay) keeps ``before``'s edit of a result it
    masks again, so the result renders as it did; and ``before``'s way of naming dropped runs
    (a run dropped again renders the same line)."""
    for a, edit in trial.edits.items():
        old = before.edits.get(a)
        if old is not None and old["action"] == edit["action"] and old != edit:
            trial.edits[a] = old
    if before.dropped:
        trial.names = before.names
        for a in set(trial.dropped).intersection(before.dropped):  # dropped again: as it was
            if a in before.chosen:
                trial.chosen[a] = before.chosen[a]
            else:
                trial.chosen.pop(a, None)


def restored(anchors: Sequence[str], before: Overlay, after: Overlay) -> list[int]:
    """Indices of the messages ``before`` elided or dropped that ``after`` shows whole again."""
    gone_before, gone_after = set(before.dropped), set(after.dropped)
    out = []
    for i, a in enumerate(anchors):
        edit = before.edits.get(a)
        was = a in gone_before or (edit is not None and edit["action"] in REOPENED)
        now = after.edits.get(a)
        if was and a not in gone_after and (now is None or now["action"] not in REOPENED):
            out.append(i)
    return out


def named_lately(
    messages: list[Message],
    observations: Sequence[Observation],
    candidates: Collection[int],
    calls: int = LATELY,
) -> list[int]:
    """Of the results at ``candidates``, those the agent's last ``calls`` tool calls point at
    again: a read whose file they name, or a result whose names (``digest.names``) they use."""
    recent = need.CallsAfter(need.recent_calls(messages, calls))
    out = []
    for o in observations:
        if o.result_index not in candidates:
            continue
        names = need.file_names(o.action.target) if o.action.kind == "read" else frozenset()
        if not names or not recent.used_after(o.call_index, names):
            text = text_of(messages[o.result_index].get("content"))
            names = digest.names(text)
            if not recent.used_after(o.call_index, names):
                continue
        out.append(o.result_index)
    return out


def first_change(anchors: Sequence[str], before: Overlay, after: Overlay) -> int:
    """The first message ``after`` renders otherwise than ``before`` (its edit or its drop
    differs), or ``len(anchors)``: where a compaction's rewrite of the prompt begins."""
    gone_before, gone_after = set(before.dropped), set(after.dropped)
    for i, a in enumerate(anchors):
        if (a in gone_before) != (a in gone_after) or before.edits.get(a) != after.edits.get(a):
            return i
    return len(anchors)
