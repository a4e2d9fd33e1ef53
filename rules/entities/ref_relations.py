"""Mentions that name an entity through another or through a list: "the file in the folder you
just made" (contains: a path under the folder's), "the table that script created" (an edge the
tracker kept: ``created_by``, ``on``, ``serves``, ``mounts``, ``in``), "the second customer from
that list" (``listed_in`` a call, at a position). The anchor is resolved first, then only
entities related to it are candidates: a relation never falls back to the anchor itself, and
two related entities are ambiguous (abstain).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rules.entities.ref_candidates import candidates
from rules.entities.ref_detect import Mention

Event = Mapping[str, Any]


def _edges(e: Event) -> set[str]:
    return {str(r[1]) for r in e.get("rel") or () if isinstance(r, list) and len(r) == 2}


def related(head: Event, anchor: Event) -> bool:
    """An edge between two entities, either way: a path under a folder, or a kept relation."""
    hp, ap = str(head.get("path")), str(anchor.get("path"))
    if anchor.get("type") == "folder" and hp.startswith(ap.rstrip("/") + "/"):
        return True
    return ap in _edges(head) or hp in _edges(anchor)


def _anchor_mention(mention: Mention) -> Mention:
    a = mention.anchor
    assert a is not None
    return dataclasses.replace(
        mention, type=a.type, action=a.action, actions=a.actions, entity_actions=a.entity_actions,
        actor=a.actor, recency=a.recency, hint=None, named=False, extensions=(), kinds=(),
        ordinal=None, anchor=None,
    )  # fmt: skip


def _by_relation(mention: Mention, events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """(related heads newest first, the others that fit as well) through the newest anchor
    that has related heads."""
    heads = candidates(dataclasses.replace(mention, anchor=None, ordinal=None), events)
    for anchor in candidates(_anchor_mention(mention), events):
        hits = [h for h in heads if related(h, anchor) and h.get("path") != anchor.get("path")]
        if hits:
            return hits, hits[1:]
    return [], []


def _by_position(mention: Mention, events: Sequence[Event]) -> list[Event]:
    """The entity at the mention's position in the newest list that showed entities of its
    kind (the list a call returned)."""
    plain = dataclasses.replace(mention, ordinal=None, anchor=None)
    listed = [e for e in candidates(plain, events) if _list_of(e)]
    if not listed:
        return []
    newest = _list_of(listed[0])
    for e in listed:
        if _list_of(e) == newest and str((e.get("attrs") or {}).get("position")) == str(
            mention.ordinal
        ):
            return [e]
    return []


def _list_of(e: Event) -> str | None:
    return next((str(r[1]) for r in e.get("rel") or () if r[0] == "listed_in"), None)


def pick(mention: Mention, events: Sequence[Event]) -> tuple[list[Event], list[Event], bool]:
    """(candidates newest first, those tied with the first, whether a crowd lowers the
    confidence) for one session's entities."""
    if mention.anchor is not None:
        hits, ties = _by_relation(mention, events)
        return hits, ties, False
    if mention.ordinal is not None:
        return _by_position(mention, events), [], False
    cands = candidates(mention, events)
    if not cands:
        return [], [], True
    top = cands[0]
    ties = [
        c
        for c in cands[1:]
        if c.get("call_id") == top.get("call_id") and c.get("first_seen") == top.get("first_seen")
    ]
    return cands, ties, True
