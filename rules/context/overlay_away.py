"""What a session's overlay keeps for messages a request does not hold.

prune's overlay is kept per session and applies wherever its anchored messages are in a request.
A session can hold more than one conversation: Claude Code's title call and its Task sub-agents
send the main conversation's session id, and two sub-agents may run interleaved. A request of one
of them holds none of the others' messages. Were the others' edits dropped then, the main
conversation's next request would be forwarded unpruned (its prompt cache re-billed, its budget
overrun) and compacted again. So the edits and dropped anchors of the messages a request does not
hold are kept aside, under ``AWAY``, and come back when their messages do. Bounded: the newest
``MAX_AWAY_EDITS`` edits and ``MAX_AWAY_DROPPED`` dropped anchors; older ones go (a conversation
the client rewrote, as an agent's own compaction does, never comes back)."""

from __future__ import annotations

from collections.abc import KeysView, Mapping
from typing import Any

from rules.context.overlay import Overlay

AWAY = "away"
MAX_AWAY_EDITS = 2048
MAX_AWAY_DROPPED = 4096


Loaded = tuple[int, KeysView[str], int, bool]  # compactions, edits' anchors, dropped, moved


def load_split(
    stored: Any, present: Mapping[str, int], own_output: bool
) -> tuple[Overlay, dict[str, Any] | None, Loaded]:
    """The overlay this request sees, what stays away, and what was loaded (to tell a change
    cheaply). ``own_output``: the request is prune's own rendering, so every stored edit stands
    and the away part is kept as it is."""
    if own_output:
        away, moved = stored.get(AWAY), False
    else:
        stored, away, moved = split(stored, present)
    raw = stored if isinstance(stored, dict) else {}
    loaded = (
        int(raw.get("compactions", 0)),
        (raw.get("edits") or {}).keys(),
        len(raw.get("dropped") or []),
        moved,
    )
    return Overlay.load(stored, present, keep_all=own_output), away, loaded


def split(stored: Any, present: Mapping[str, int]) -> tuple[Any, dict[str, Any] | None, bool]:
    """(the stored overlay with only the entries whose anchors are in ``present``, its own and
    those back from away; what stays away, or None; whether anything moved between the two).
    ``present`` maps each anchor of the request to its position. The stored value itself when
    nothing is away and every anchor is here (the common case: no copy)."""
    if not isinstance(stored, dict):
        return stored, None, False
    edits: dict[str, Any] = stored.get("edits") or {}
    dropped: list[str] = stored.get("dropped") or []
    away = stored.get(AWAY)
    away = away if isinstance(away, dict) else {}
    if not away and all(a in present for a in edits) and all(a in present for a in dropped):
        return stored, None, False
    away_edits: dict[str, Any] = away.get("edits") or {}
    away_dropped: list[str] = away.get("dropped") or []
    here_edits = {a: e for a, e in edits.items() if a in present}
    back_edits = {a: e for a, e in away_edits.items() if a in present and a not in here_edits}
    here_dropped = [a for a in dropped if a in present]
    here = set(here_dropped)
    back_dropped = [a for a in away_dropped if a in present and a not in here]
    moved = (
        len(here_edits) != len(edits)
        or len(here_dropped) != len(dropped)
        or bool(back_edits)
        or bool(back_dropped)
    )
    seen = {k: v for k, v in stored.items() if k != AWAY}
    seen["edits"] = {**here_edits, **back_edits}
    seen["dropped"] = sorted({*here_dropped, *back_dropped}, key=present.__getitem__)
    chosen = stored.get("chosen")
    away_chosen = away.get("chosen")
    seen["chosen"] = {
        **_of(away_chosen, back_dropped),
        **_of(chosen, here_dropped),
    }
    if not here_dropped and back_dropped and "names" in away:
        seen["names"] = away["names"]  # the way that conversation's dropped lines were written
    left = _left(stored, away, edits, dropped, present)
    return seen, left, moved


def _left(
    stored: dict[str, Any],
    away: dict[str, Any],
    edits: dict[str, Any],
    dropped: list[str],
    present: Mapping[str, int],
) -> dict[str, Any] | None:
    """What stays away: the stored away entries not back, then this overlay's entries not here
    (the newest last), bounded."""
    left_edits = {a: e for a, e in (away.get("edits") or {}).items() if a not in present}
    left_edits.update((a, e) for a, e in edits.items() if a not in present)
    gone = [a for a in away.get("dropped") or [] if a not in present]
    gone += [a for a in dropped if a not in present]
    if not left_edits and not gone:
        return None
    if len(left_edits) > MAX_AWAY_EDITS:
        left_edits = dict(list(left_edits.items())[-MAX_AWAY_EDITS:])
    gone = list(dict.fromkeys(gone))[-MAX_AWAY_DROPPED:]
    out: dict[str, Any] = {"edits": left_edits, "dropped": gone}
    chosen = {**_of(away.get("chosen"), gone), **_of(stored.get("chosen"), gone)}
    if chosen:
        out["chosen"] = chosen
    own_names = stored.get("names") if any(a not in present for a in dropped) else None
    names = own_names if own_names is not None else away.get("names")
    if gone and names is not None:
        out["names"] = names
    return out


def _of(chosen: Any, anchors: list[str]) -> dict[str, Any]:
    """The entries of a stored ``chosen`` object for these anchors (checked when loaded)."""
    if not isinstance(chosen, dict) or not anchors:
        return {}
    return {a: chosen[a] for a in anchors if a in chosen}
