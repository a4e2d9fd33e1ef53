"""Whether the agent may still need an old tool result, judged before pruning elides it (design
section 4: elide by what the task still needs, not by age).

It may when:
- it is a read of a file the conversation edits, and the file was not written since (a later
  write supersedes it): the agent copies ``old_str`` lines from such reads;
- the names it showed (paths, identifiers, ids: ``digest.names``) are used by the agent's recent
  calls: a listing or search whose paths the work is following.

Each result gets the probability that a later call copies something from it (``REUSE``: measured
on the trace corpus by ``bench/next_action.py --learn``, by action kind and whether it is needed);
``schedule`` charges an elision that probability times the cost of the re-read it would force."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rules.activity.observations import Observation
from rules.base import Message
from rules.context import digest
from rules.messages import call_arguments_text, text_of, tool_calls
from rules.packs import load_pack

RECENT_CALLS = 10  # "the agent's recent calls": the names used by the last this many tool calls
# Used when the pack holds no figure for a kind: a needed result is copied from often, another
# rarely (the measured figures are in rules/packs/reuse.yaml).
DEFAULT_REUSE = {True: 0.3, False: 0.05}


@dataclass(frozen=True)
class Need:
    needed: bool
    why: str  # "" when not needed
    reuse: float  # the probability that a later call copies from it


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


def reuse(kind: str, needed: bool) -> float:
    """P(a later call copies from a result of this kind | needed or not)."""
    table = _reuse_table()
    hit = table.get((kind, needed))
    if hit is None:
        hit = table.get(("any", needed), DEFAULT_REUSE[needed])
    return hit


def recent_names(messages: list[Message], count: int = RECENT_CALLS) -> frozenset[str]:
    """The names the last ``count`` tool calls' arguments use."""
    out: set[str] = set()
    seen = 0
    for m in reversed(messages):
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        for c in reversed(tool_calls(m)):
            out.update(digest.names(call_arguments_text(c)))
            seen += 1
            if seen >= count:
                return frozenset(out)
    return frozenset(out)


def judge(
    messages: list[Message], observations: list[Observation], candidates: Iterable[int]
) -> dict[int, Need]:
    """A ``Need`` for each candidate result index (results of ``observations``)."""
    wanted = set(candidates)
    if not wanted:
        return {}
    edited: set[str] = set()
    written_after: set[str] = set()  # files written after the observation being looked at
    by_index: dict[int, Observation] = {}
    for o in observations:
        if o.action.kind == "write":
            edited.add(o.action.target)
            edited.update(o.action.writes)
        if o.result_index in wanted:
            by_index[o.result_index] = o
    used = recent_names(messages)
    out: dict[int, Need] = {}
    for o in reversed(observations):
        a = o.action
        if o.result_index in by_index:
            why = ""
            if a.kind == "read" and a.target in edited and a.target not in written_after:
                why = "a read of a file being edited, unchanged since"
            elif used and not used.isdisjoint(
                digest.names(text_of(messages[o.result_index].get("content")))
            ):
                why = "names it showed are used by recent calls"
            out[o.result_index] = Need(bool(why), why, reuse(a.kind, bool(why)))
        if a.kind == "write":
            written_after.add(a.target)
            written_after.update(a.writes)
    return out
