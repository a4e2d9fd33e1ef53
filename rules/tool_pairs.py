"""A request's tool calls with the messages answering them (``messages.tool_pairs``), kept per
session: an agent's next request resends its last list with a call and its result more, so only
the messages after those a kept list shares as the very same objects are walked. What the shared
messages gave stands: a call keeps its answer (the first tool message with its id, and the
shared ones come first); a call unanswered then may be answered by a new message, and is looked
up again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rules.base import Context, ListMemo, Message, shared_prefix

Pair = tuple[int, dict[str, Any], int | None]  # (assistant index, call, answer's index or None)
NAME = "tool_pairs_scan"  # ``Context.memo`` name (``Context.derived``)


@dataclass(frozen=True, slots=True)
class Scan:
    """``tool_pairs`` of one list and what extending it needs (never changed once made)."""

    pairs: list[Pair]
    answered: dict[str, int]  # tool_call_id -> the first tool message carrying it
    open: tuple[tuple[int, str], ...]  # unanswered calls: their place in ``pairs``, their id
    start: int = 0  # the messages the scan took over from its base (none: a scan of all)
    fresh: tuple[int, ...] = ()  # with a base: the pairs added, or answered, since it


def scan(messages: Sequence[Message], base: Scan | None = None, start: int = 0) -> Scan:
    """The pairs of ``messages``; ``base``: the scan of ``messages[:start]`` (the same objects)."""
    answered = dict(base.answered) if base is not None else {}
    calls: list[tuple[int, dict[str, Any], str]] = []
    # role(), tool_calls() and call_id() inlined, as ``messages.tool_pairs`` does
    for i in range(start, len(messages)):
        m = messages[i]
        r = m.get("role")
        if r == "tool":
            tid = m.get("tool_call_id")
            if isinstance(tid, str) and tid not in answered:
                answered[tid] = i
        elif r == "assistant":
            listed = m.get("tool_calls")
            if isinstance(listed, list):
                for call in listed:
                    if isinstance(call, dict):
                        cid = call.get("id")
                        calls.append((i, call, cid if isinstance(cid, str) else ""))
    find = answered.get
    pairs = list(base.pairs) if base is not None else []
    still: list[tuple[int, str]] = []
    fresh: list[int] = []
    for at, cid in base.open if base is not None else ():
        answer = find(cid)
        if answer is None:
            still.append((at, cid))
        else:
            pairs[at] = (pairs[at][0], pairs[at][1], answer)
            fresh.append(at)
    for i, call, cid in calls:
        answer = find(cid)
        if answer is None:
            still.append((len(pairs), cid))
        fresh.append(len(pairs))
        pairs.append((i, call, answer))
    if base is None:
        return Scan(pairs, answered, tuple(still))
    return Scan(pairs, answered, tuple(still), start, tuple(fresh))


def _extended(memo: ListMemo, messages: Sequence[Message]) -> Scan:
    """The scan of ``messages`` from the longest kept list that is all at their start."""
    base, start = None, 0
    for seen, kept in memo.get(NAME) or ():
        length = len(seen)
        if seen.__class__ is tuple and start < length <= len(messages):  # noqa: SIM102
            if shared_prefix(seen, messages) == length:  # after the cheap tests
                base, start = kept, length
    return scan(messages, base, start)


def scan_of(ctx: Context) -> Scan:
    """The scan of ``ctx.messages``, shared by the rules (``Context.derived``); read only."""
    memo = ctx.memo
    found: Scan = ctx.derived(NAME, lambda messages: _extended(memo, messages))
    return found


def pairs_of(ctx: Context) -> list[Pair]:
    """``messages.tool_pairs(ctx.messages)``, shared by the rules; read only."""
    return scan_of(ctx).pairs
