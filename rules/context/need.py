"""Whether the agent may still need an old tool result, judged before pruning elides it (design
section 4: elide by what the task still needs, not by age).

It may when:
- it is a read of a file the conversation edits, and the file was not rewritten whole since (a
  later whole write supersedes it), or of a file a later call among the agent's last
  ``RECENT_CALLS`` names (its own call aside): the agent copies ``old_str`` lines from such reads;
- the names it showed (paths, identifiers, ids: ``digest.names``) are used by a later call among
  the last ``RECENT_CALLS``: a listing or search whose paths the work is following;
- it is a read of a file the workspace map shows among those the agent works on (``working``:
  ``rules.workspace.render.working_files``), not written at all since: the read still shows the
  file as it is, and keeping it costs less than the agent reading it again.

Each result gets the probability that a later call copies something from it (``reuse``: measured
on the trace corpus by ``bench/next_action.py --learn``, in ``rules/packs/reuse.yaml``, by action
kind, whether it is needed and its age); ``schedule`` charges an elision that probability times
the cost of the re-read it would force."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from rules.activity.observations import Observation
from rules.activity.run_class import run_class
from rules.base import Message
from rules.context import copy_odds, digest, prune_stages
from rules.messages import call_arguments_text, text_of, tool_calls
from rules.packs import load_pack

RECENT_CALLS = 20  # "the agent's recent calls": the names used by the last this many tool calls
LATE_CALLS = 5  # the copy model's "used lately": by one of the agent's last this many tool calls
# Used when the pack holds no figure for a kind: a needed result is copied from often, another
# rarely (the measured figures are in rules/packs/reuse.yaml).
DEFAULT_REUSE = {True: 0.3, False: 0.05}


@dataclass(frozen=True)
class Need:
    needed: bool
    why: str  # "" when not needed
    reuse: float  # the probability that a later call copies from it
    # the probability by the features ``copy_odds`` weighs (a read unchanged since, the
    # result's size, its age, a later use, what a run does, the names no later result shows):
    # what a forced compaction elides by
    odds: float = 0.0
    features: tuple[tuple[str, str], ...] = ()


@functools.lru_cache(maxsize=1)
def _reuse_table() -> dict[tuple[str, bool], float]:
    try:
        pack = load_pack("reuse")
    except (ValueError, FileNotFoundError, KeyError):
        return {}
    table: dict[tuple[str, bool], float] = {}
    rows = pack.get("reuse") if isinstance(pack, Mapping) else None
    for kind, by_need in (rows or {}).items():
        if isinstance(by_need, Mapping):
            for key, p in by_need.items():
                if isinstance(p, (int, float)) and 0 <= p <= 1:
                    table[(str(kind), str(key).lower() in ("true", "needed"))] = float(p)
    return table


@functools.lru_cache(maxsize=1)
def _age_factors() -> tuple[tuple[int, float], ...]:
    """(up to this many turns old, factor), ascending; the last bound covers the rest."""
    try:
        pack = load_pack("reuse")
    except (ValueError, FileNotFoundError, KeyError):
        return ()
    rows = pack.get("age_factor") if isinstance(pack, Mapping) else None
    out = []
    for bound, factor in (rows or {}).items():
        if isinstance(factor, (int, float)) and factor >= 0:
            out.append((int(bound), float(factor)))
    return tuple(sorted(out))


def reuse(kind: str, needed: bool, age: int | None = None) -> float:
    """P(a later call copies from a result of this kind | needed or not, ``age`` turns old)."""
    table = _reuse_table()
    hit = table.get((kind, needed))
    if hit is None:
        hit = table.get(("any", needed), DEFAULT_REUSE[needed])
    if age is not None:
        factors = _age_factors()
        factor = next((f for bound, f in factors if age <= bound), factors[-1][1] if factors else 1)
        hit = min(1.0, hit * factor)
    return hit


Calls = list[tuple[int, frozenset[str]]]  # (message index, the names a call's arguments use)


def recent_calls(messages: list[Message], count: int = RECENT_CALLS) -> Calls:
    """The last ``count`` tool calls: each one's message index and the names its arguments use."""
    out: Calls = []
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        for c in reversed(tool_calls(m)):
            out.append((i, digest.names(call_arguments_text(c))))
            if len(out) >= count:
                return out
    return out


def _used_after(calls: Calls, index: int, names: frozenset[str]) -> bool:
    """Whether a recent call after message ``index`` (so not the result's own) uses a name: the
    definition ``CallsAfter`` answers with one set test."""
    return any(i > index and not used.isdisjoint(names) for i, used in calls)


class CallsAfter:
    """``_used_after`` of one list of recent calls with a single set test: the names of all the
    calls after each message index that holds one (a look asks about every candidate result)."""

    def __init__(self, calls: Calls) -> None:
        # ``recent_calls`` walks back: message indices come newest first, never rising
        self._bounds: list[tuple[int, frozenset[str]]] = []
        names: set[str] = set()
        for i, used in calls:
            names |= used
            if self._bounds and self._bounds[-1][0] == i:
                self._bounds[-1] = (i, frozenset(names))
            else:
                self._bounds.append((i, frozenset(names)))

    def used_after(self, index: int, names: frozenset[str]) -> bool:
        """Whether a call after message ``index`` uses one of ``names``."""
        union: frozenset[str] | None = None
        for i, after in self._bounds:  # the oldest call index still after ``index`` holds all
            if i <= index:
                break
            union = after
        return union is not None and not union.isdisjoint(names)


def file_names(path: str) -> frozenset[str]:
    """A file's path as later calls may name it: whole, by its base name, without ``./``."""
    path = path.strip()
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return frozenset(x for x in (path, path.removeprefix("./"), base) if len(x) >= 4)


def new_names(
    shown: frozenset[str], later: set[str], enough: int = copy_odds.NEW_NAMES[-1][0]
) -> int:
    """How many of ``shown`` are not in ``later``, counted up to ``enough`` (the top bucket of
    ``copy_odds.NEW_NAMES``): a result showing many new names stops early."""
    count = 0
    for name in shown:
        if name not in later:
            count += 1
            if count >= enough:
                break
    return count


def judge(
    messages: list[Message],
    observations: list[Observation],
    candidates: Iterable[int],
    working: Collection[str] = frozenset(),
    forwarded: Mapping[int, str] | None = None,
    odds: bool = True,
) -> dict[int, Need]:
    """A ``Need`` for each candidate result index (results of ``observations``); ``working``:
    the files the workspace map shows being worked on; ``forwarded``: the text a result is
    forwarded as when it is not its own (capped: its head and tail; elided: its placeholder;
    dropped: "", the last of a dropped run: the run's line, which can list the names the run
    showed), as the names a later result shows are those the model is shown; ``odds``:
    whether to give each its copy model features and odds (a forced compaction's order), else
    only the need and ``reuse``."""
    wanted = set(candidates)
    if not wanted:
        return {}
    edited: set[str] = set()
    written_after: set[str] = set()  # files written after the observation being looked at
    changed_after: set[str] = set()  # files written at all (edits too) after it
    by_index: dict[int, Observation] = {}
    for o in observations:
        if o.action.kind == "write":
            edited.add(o.action.target)
            edited.update(o.action.writes)
        if o.result_index in wanted:
            by_index[o.result_index] = o
    calls = recent_calls(messages)
    after = CallsAfter(calls)
    late = CallsAfter(calls[:LATE_CALLS]) if odds else after
    out: dict[int, Need] = {}
    turns = 0  # assistant messages with calls after the one looked at
    last_call = None
    later_names: set[str] = set()  # the names the results after the one looked at show
    as_sent = forwarded or {}
    oldest = min(by_index, default=-1)
    for o in reversed(observations):
        if o.result_index < oldest:
            break  # nothing older is judged: its names and writes matter to none
        if o.call_index != last_call:
            turns, last_call = turns + 1, o.call_index
        a = o.action
        sent = as_sent.get(o.result_index)
        if o.result_index in by_index:
            text = text_of(messages[o.result_index].get("content"))
            shown = digest.names(text)
            why = ""
            if a.kind == "read" and a.target in edited and a.target not in written_after:
                why = "a read of a file being edited, unchanged since"
            elif (
                a.kind == "read"
                and a.target not in written_after
                and after.used_after(o.call_index, file_names(a.target))
            ):
                why = "a read of a file later recent calls work on"
            elif (
                a.kind == "read"
                and a.target not in changed_after
                and a.target.removeprefix("./") in working
            ):
                why = "a read of a file the agent works on (workspace map), unchanged since"
            if not why and calls and after.used_after(o.call_index, shown):
                why = "names it showed are used by later recent calls"
            chance, values = 0.0, None
            if odds:
                changed = a.target in changed_after if a.kind == "read" else None
                does = run_class(a.command) if a.kind == "run" else "-"
                # a result that shows no names at all: unknown, not 'all came back later'
                new = new_names(shown, later_names) if shown or len(text) < 500 else None
                lately = late.used_after(o.call_index, shown) or (
                    a.kind == "read" and late.used_after(o.call_index, file_names(a.target))
                )
                values = copy_odds.features(
                    a.kind, changed, len(text), turns, bool(why), does, new, lately
                )
                chance = copy_odds.odds(values)
            out[o.result_index] = Need(
                bool(why),
                why,
                reuse(a.kind, bool(why), turns),
                chance,
                tuple(values.items()) if values else (),
            )
        # as forwarded: a name only in what a cap or an elision cut is not shown later. A
        # result not judged is scanned only when forwarded whole (the last few and the evidence;
        # an elided one is a placeholder of a line): a look's scans stay with its candidates
        if odds and o.result_index != oldest:  # (nothing older counts the oldest's names)
            if sent is not None:
                later_names.update(digest.names(sent))
            elif o.result_index in by_index:
                later_names.update(shown)
            else:
                later_names.update(digest.names(text_of(messages[o.result_index].get("content"))))
        if a.kind == "write":
            changed_after.update(a.writes or (a.target,))
            if prune_stages.full_write(messages, o):
                written_after.add(a.target)  # rewritten whole: the read is stale (superseded)
    return out
