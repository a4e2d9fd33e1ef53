"""What the agent made that only the shell could name (``mkdir out-$(date +%s)``, ``touch
"$f"``, ``cp a b "$DEST"``): no entity can be remembered for it, but "the folder you just created"
after it is not the folder made before it. track_entities keeps the newest few such makings of a
session (``remember``, in its meta), and resolution abstains when one is newer than the entity it
would point at and could be what the mention means (``newer_than``).

A marker: ``[seq, action, type or None, first_seen, call_id]`` (``seq`` and ``first_seen`` order
it among the session's events as theirs order them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.base import Context
from rules.entities import cache as entity_cache
from rules.entities.ref_mention import Mention

KEY = "unknown"  # in track_entities' meta
# an action's prefix for a making a failed call tried ("tried:create"): "the container you just
# started" after a `docker run` that failed is not the container started before it
TRIED = "tried:"
MAX_KEPT = 4  # the newest count: an older one is older than some entity made since, most often

Marker = Sequence[Any]


def remember(
    kept: Sequence[Marker],
    made: Sequence[tuple[str, str | None]],
    seq: int,
    now: float,
    call: str,
) -> tuple[list[list[Any]], int]:
    """(``kept`` with one marker per distinct making of a call added, the sequence number after)."""
    out = [list(m) for m in kept]
    for action, typ in dict.fromkeys(made):
        seq += 1
        out.append([seq, action, typ, now, call])
    return out[-MAX_KEPT:], seq


def markers(meta: Any) -> list[Marker]:
    """The well-formed markers of a stored meta (state may come from older code)."""
    found = meta.get(KEY) if isinstance(meta, Mapping) else None
    if not isinstance(found, list):
        return []
    return [
        m
        for m in found
        if isinstance(m, list)
        and len(m) == 5
        and isinstance(m[0], int)
        and isinstance(m[3], (int, float))
    ]


def in_view(
    found: Sequence[Marker], now: float, ttl: float, asked_at: float | None, later: set[str]
) -> list[Marker]:
    """Markers not past ``ttl``, made before the question: not after ``asked_at``, nor by one of
    the ``later`` calls (those after the question in the request)."""
    return [
        m
        for m in found
        if now - m[3] <= ttl and (asked_at is None or m[3] <= asked_at) and str(m[4]) not in later
    ]


def newer_than(mention: Mention, top: Mapping[str, Any], found: Sequence[Marker]) -> bool:
    """Whether a making the shell alone named is newer than ``top`` and could be what
    ``mention`` means: a file or folder it names by its kind and what was done, not by a word
    its name holds ("the backup folder") nor by a relation, a position or a maker; or a making
    of ``top``'s kind a failed call tried, newer than it, when the mention says just made ("the
    container you just started": the newest start failed)."""
    if not found:
        return False
    if mention.recency and _tried_since(mention, top, found):
        return True
    found = [m for m in found if not str(m[1]).startswith(TRIED)]
    if not found or not entity_cache.is_file_kind(top.get("type")):
        return False
    if (
        mention.hint
        or mention.named
        or mention.how is not None
        or mention.extensions
        or mention.paths
        or mention.by is not None
        or mention.anchor is not None
        or mention.ident is not None
        or mention.ordinal is not None
    ):
        return False
    at = (top.get("first_seen", 0), top.get("seq", 0))
    return any(
        (m[3], m[0]) > at
        and (not mention.actions or m[1] in mention.actions)
        and (m[2] is None or mention.type in (None, "any", m[2]))
        for m in found
    )


def in_reach(
    ctx: Context,
    meta_key: str,
    ttl: float,
    ancestors_too: bool,
    max_depth: int,
    asked_at: float | None,
    later: set[str],
) -> dict[str, list[Marker]]:
    """Per session a reference searches (the request's own, and its ancestors up to
    ``max_depth`` when ``ancestors_too``), its markers in view (``in_view``; the ancestors' as
    their events are taken, whatever the question's time)."""
    out = {}
    own = markers(ctx.state.get(meta_key))
    if own:
        out[ctx.session_id] = in_view(own, ctx.now, ttl, asked_at, later)
    for anc in ctx.ancestors if ancestors_too else ():
        found = markers(anc.state.get(meta_key))
        if found and anc.depth <= max_depth:
            out[anc.session_id] = in_view(found, ctx.now, ttl, None, set())
    return out


def _tried_since(mention: Mention, top: Mapping[str, Any], found: Sequence[Marker]) -> bool:
    """Whether a failed call tried to make a thing of ``top``'s kind after it, by an action the
    mention's verb fits (``mention.entity_actions``; any, with no verb)."""
    at = (top.get("first_seen", 0), top.get("seq", 0))
    for m in found:
        action = str(m[1])
        if not action.startswith(TRIED) or m[2] != top.get("type") or (m[3], m[0]) <= at:
            continue
        if not mention.action or action[len(TRIED) :] in mention.entity_actions:
            return True
    return False
