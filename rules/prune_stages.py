"""The candidates of each pruning stage, oldest first. Pure functions of the conversation, its
tool observations and the protected evidence; ``prune`` applies them until the target is met."""

from __future__ import annotations

from rules.base import Message
from rules.messages import role, tool_calls
from rules.observations import Observation


def supersede(observations: list[Observation], protected: set[int]) -> list[tuple[int, str]]:
    """(result index, reason) of older reads re-read or rewritten later, older runs of the same
    command and older listings of the same folder."""
    later_touch: dict[str, str] = {}  # file path -> what touched it later
    later_run: set[str] = set()
    later_list: set[str] = set()
    out: list[tuple[int, str]] = []
    for obs in reversed(observations):
        a = obs.action
        if a.kind == "read":
            if a.target in later_touch and obs.result_index not in protected:
                out.append((obs.result_index, f"superseded by a later {later_touch[a.target]}"))
            later_touch.setdefault(a.target, f"read of {a.target}")
        elif a.kind == "write":
            later_touch[a.target] = f"write to {a.target}"
        elif a.kind == "run":
            if a.target in later_run and obs.result_index not in protected:
                out.append((obs.result_index, "superseded by a later run of the same command"))
            later_run.add(a.target)
        elif a.kind == "list":
            if a.target in later_list and obs.result_index not in protected:
                out.append((obs.result_index, "superseded by a later listing"))
            later_list.add(a.target)
    out.reverse()
    return out


def mask(
    observations: list[Observation], protected: set[int], keep_last: int
) -> list[tuple[int, str]]:
    """(result index, reason) of observations older than the last ``keep_last``."""
    older = observations[: max(0, len(observations) - keep_last)]
    reason = f"older than the last {keep_last} tool results"
    return [(o.result_index, reason) for o in older if o.result_index not in protected]


def current_start(messages: list[Message], first_user: int | None) -> int:
    """Where the current task turn begins; nothing from there on is ever dropped. That is the
    latest user message when it came after the original task, else the last turn (the last
    assistant message and its results, or the last user message), trailing system messages aside.
    """
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if role(messages[i]) == "user"),
                     None)  # fmt: skip
    if last_user is not None and first_user is not None and last_user > first_user:
        return last_user
    j = len(messages) - 1
    while j >= 0 and role(messages[j]) == "system":
        j -= 1
    while j > 0 and role(messages[j]) == "tool":
        j -= 1
    return max(j, 0)


def turns(messages: list[Message], first_user: int | None) -> list[list[int]]:
    """Droppable turns after the first user message and before the current task turn
    (``current_start``): an assistant or user message with the tool results that follow it.
    System messages are never part of a turn."""
    if first_user is None:
        return []
    out: list[list[int]] = []
    for i in range(first_user + 1, current_start(messages, first_user)):
        r = role(messages[i])
        if r in ("assistant", "user"):
            out.append([i])
        elif r == "tool" and out and out[-1] and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([])  # a system message or a stray result: a boundary, never dropped
    return [t for t in out if t]


def droppable(
    turn: list[int], messages: list[Message], protected: set[int], results: dict[str, list[int]]
) -> bool:
    """A turn can go when nothing in it is protected and no call or result in it has its partner
    outside it (``results``: tool_call_id -> indices of the tool messages answering it)."""
    if any(i in protected for i in turn):
        return False
    inside = set(turn)
    ids = {c.get("id") for i in turn for c in tool_calls(messages[i])}
    answered = {messages[i].get("tool_call_id") for i in turn if role(messages[i]) == "tool"}
    if not answered <= ids:
        return False
    return all(j in inside for cid in ids for j in results.get(cid, []))  # type: ignore[arg-type]
