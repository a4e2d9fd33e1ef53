"""The overlay's anchors and replay, incremental across a session's requests.

An agent's next request resends its last one's messages (the same objects: the runner keeps them
per session) and appends a few. Replaying every edit of the overlay on each request costs a
lookup per edit (~150 at 400 messages); with the session's last replay at hand, the rendered
messages of the shared prefix are taken over in one slice and only the edits anchored past it
are applied. Taken over only when the overlay holds the same edits, in the same order, as the
one replayed last, under the same cap: each rendered message is then what ``overlay.apply_edit``
gives for that very message, edit and observation again (an observation is a function of its
call and result, both in the prefix). A dropped run's line depends on its neighbours: an overlay
with drops is rendered whole (``overlay.render``).

An anchor is a function of its message's hash and its predecessor's, numbered when a pair
repeats: the anchors of a resent prefix are its last ones, and only the new messages are hashed.

Kept in ``Context.memo`` (the session's, across its requests): one replay and one list of anchor
keys per session, holding the last request's messages and their renderings, no more than the
session's messages."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from rules.activity.observations import Observation
from rules.base import Context, Message, RenderMemo, TokenCounter, frozen
from rules.context import overlay
from rules.messages import content_hash, shared_prefix, text_of

MEMO = "prune_replay"  # ``Context.memo`` name of the session's last replay
ANCHORS_MEMO = "anchors_last"  # and of its last list of messages and their anchors' keys


def anchors_in(ctx: Context, messages: list[Message]) -> list[str]:
    """``overlay.anchors(messages, ctx.hash_of)``: the messages an agent resends (the same
    objects) keep their keys from the session's last list, only the new ones are made."""
    kept = ctx.memo.get(ANCHORS_MEMO)
    before, keys = kept[0] if kept else ((), [])
    k = shared_prefix(before, messages)
    new = [ctx.hash_of(m) for m in messages[k:]]  # a few: not a list to keep
    previous = [keys[k - 1].partition(".")[0] if k else "", *new]  # a key: "{hash}.{previous}"
    keys = [*keys[:k], *(f"{h}.{p[:8]}" for h, p in zip(new, previous, strict=False))]
    ctx.memo[ANCHORS_MEMO] = [(frozen(messages), keys)]
    return overlay.numbered(list(keys))


@dataclass(frozen=True)
class Replay:
    """One replay of an overlay's edits in place: what it was given and what it made."""

    messages: tuple[Message, ...]
    out: tuple[Message, ...]
    keys: tuple[str, ...]  # the overlay's edits, in order
    edits: tuple[dict[str, str], ...]
    cap: int
    positions: tuple[int, ...]  # where an edit was applied, ascending
    anchored: tuple[str, ...]  # the anchor applied at each of ``positions``
    unplaced: tuple[str, ...]  # edits whose anchor was not in the messages


def render(
    messages: list[Message],
    anchor_list: list[str],
    ov: overlay.Overlay,
    by_result: dict[int, Observation],
    tokens: TokenCounter,
    cap: int,
    placed: list[int] | None = None,
    memo: RenderMemo | None = None,
    hash_of: Callable[[Message], str] = content_hash,
    index: Mapping[str, int] | None = None,
    kept: MutableMapping[str, Any] | None = None,
) -> list[Message]:
    """``overlay.render(…)``, the same messages; with ``kept`` (``Context.memo``), from the
    session's last replay where it holds (see the module's docstring)."""
    edits = ov.edits
    if kept is None or ov.dropped or not edits:
        return overlay.render(
            messages, anchor_list, ov, by_result, tokens, cap, placed, memo, hash_of, index
        )
    if index is None:
        index = dict(zip(anchor_list, range(len(anchor_list)), strict=True))
    keys, values = tuple(edits), tuple(edits.values())
    entry = kept.get(MEMO)
    last: Replay | None = entry[0][1] if entry else None
    if last is not None and last.cap == cap and last.keys == keys and last.edits == values:
        k = shared_prefix(last.messages, messages)
        j = bisect_left(last.positions, k)  # the edits applied inside the shared prefix
        out = list(last.out[:k])
        out.extend(messages[k:])
        positions, anchored = list(last.positions[:j]), list(last.anchored[:j])
        todo: Sequence[str] = (*last.anchored[j:], *last.unplaced)
    else:
        out, positions, anchored, todo = list(messages), [], [], keys
    later: list[tuple[int, str]] = []
    unplaced: list[str] = []
    for a in todo:
        i = index.get(a)
        if i is None:
            unplaced.append(a)
            continue
        out[i] = overlay.apply_edit(
            messages[i], edits[a], by_result.get(i), tokens, cap, memo, hash_of
        )
        later.append((i, a))
    later.sort()
    positions.extend(i for i, _ in later)
    anchored.extend(a for _, a in later)
    replay = Replay(
        frozen(messages), tuple(out), keys, values, cap, tuple(positions), tuple(anchored),
        tuple(unplaced),
    )  # fmt: skip
    kept[MEMO] = [(replay.messages, replay)]
    if placed is not None:
        placed.extend(range(len(messages)))
    return out


def forwarded_results(
    messages: Sequence[Message],
    view: Sequence[Message],
    source: Sequence[int],
    results: Collection[int],
) -> dict[int, str]:
    """The text each of the tool results ``results`` (indices into ``messages``) is forwarded
    as in ``view`` (``source``: the message each of its messages renders), for those not
    forwarded as they came: capped or elided (the rendering), dropped (""), except the last
    result of a dropped run, which is given the run's line (``overlay.dropped_text``: it can list
    the names the run's results showed). One identity test per message: the untouched ones are
    the very objects."""
    out = dict.fromkeys(results, "")  # dropped unless placed
    line, last = "", -1  # a dropped run's line, and the message placed before the run
    for m, i in zip([*view, {}], [*source, len(messages)], strict=True):
        if i < 0:  # a run's line comes right after the run (``overlay.render``)
            line = text_of(m.get("content"))
            continue
        if line:
            run = [j for j in range(i - 1, last, -1) if j in out]
            if run:
                out[run[0]] = line
            line = ""
        last = i
        if i in out:
            if m is messages[i]:
                del out[i]
            else:
                out[i] = text_of(m.get("content"))
    return out
