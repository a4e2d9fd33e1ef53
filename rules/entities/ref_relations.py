"""Mentions that name an entity through another or through a list: "the file in the folder you
just made" (contains: a path under the folder's), "the table that script created" (an edge the
tracker kept: ``created_by``, ``on``, ``serves``, ``mounts``, ``in``), "the second customer from
that list" (``listed_in`` a call, at a position). The anchor is resolved first, then only
entities related to it are candidates: a relation never falls back to the anchor itself, and
two related entities are ambiguous (abstain).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rules.entities import cache as entity_cache
from rules.entities.forgotten import MAKING
from rules.entities.parallel_calls import KEY as BATCH
from rules.entities.parallel_calls import same_batch
from rules.entities.ref_candidates import candidates
from rules.entities.ref_detect import Mention
from rules.entities.ref_other import the_one_before, the_other

Event = Mapping[str, Any]


def _edges(e: Event) -> set[str]:
    return {str(r[1]) for r in e.get("rel") or () if isinstance(r, list) and len(r) == 2}


def _stem(path: str) -> str:
    """A file's name up to its first dot: "format" for format.test.ts and format.ts."""
    return posixpath.basename(path).split(".", 1)[0].lower()


def related(head: Event, anchor: Event, edge: str | None = None) -> bool:
    """An edge between two entities, either way: a path under a folder, or a kept relation (of
    kind ``edge`` when one is named); ``next_to``: a file in the same folder."""
    hp, ap = str(head.get("path")), str(anchor.get("path"))
    if edge == "next_to":
        return entity_cache.is_file_kind(head.get("type")) and posixpath.dirname(
            hp
        ) == posixpath.dirname(ap)
    if edge is not None:
        return _kept(head, edge, lambda t: t == ap) or _kept(anchor, edge, lambda t: t == hp)
    if anchor.get("type") == "folder" and hp.startswith(ap.rstrip("/") + "/"):
        return True
    return ap in _edges(head) or hp in _edges(anchor)


def _kept(e: Event, edge: str, fits: Callable[[str], bool]) -> bool:
    return any(
        isinstance(r, list) and len(r) == 2 and r[0] == edge and fits(str(r[1]))
        for r in e.get("rel") or ()
    )


def names(target: str, ident: str) -> bool:
    """Whether a relation's target is what the text called it: "5173" names port:5173, "data"
    the folder /app/data, "feat/x" the branch branch:feat/x."""
    ident = ident.strip().strip("/").lower()
    target = target.lower()
    if not ident:
        return False
    return (
        target == ident
        or target.split(":", 1)[-1] == ident
        or target.rstrip("/").endswith("/" + ident)
    )


def _by_ident(mention: Mention, events: Sequence[Event]) -> list[Event]:
    """The entities of the mention's kind whose ``edge`` reaches what the text named."""
    plain = dataclasses.replace(mention, ident=None, edge=None)
    ident, edge = str(mention.ident), str(mention.edge)
    return [e for e in candidates(plain, events) if _kept(e, edge, lambda t: names(t, ident))]


def _anchor_mention(mention: Mention) -> Mention:
    a = mention.anchor
    assert a is not None
    return dataclasses.replace(
        mention, type=a.type, action=a.action, actions=a.actions, entity_actions=a.entity_actions,
        actor=a.actor, recency=a.recency, hint=None, named=False, extensions=(), kinds=(),
        ordinal=None, anchor=None, edge=None,
    )  # fmt: skip


# a word saying one thing is inside another ("の中の", "内の", "里的", "안의", "in", "under")
_INSIDE = re.compile(r"中|内|里|裡|안|속|下|\b(?:in|inside|within|under|into)\b", re.IGNORECASE)


def _by_relation(mention: Mention, events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """(related heads newest first, the others that fit as well) through the newest anchor
    that has related heads."""
    spec = _anchor_mention(mention)
    place = mention.anchor.ordinal if mention.anchor is not None else None
    # "the file in the folder you created before the last one": that folder, or none
    anchors = (
        _by_position(dataclasses.replace(spec, ordinal=place), events)
        if place is not None
        else candidates(spec, events)
    )
    # "プロジェクトのフォルダ": the project's folder is itself (not "プロジェクトの中のフォルダ")
    project = mention.anchor is not None and mention.anchor.project and mention.type == "folder"
    plain = mention.edge is None and mention.ordinal is None and not _INSIDE.search(mention.text)
    if project and plain:
        return anchors, anchors[1:]
    heads = candidates(dataclasses.replace(mention, anchor=None, ordinal=None, edge=None), events)
    for anchor in anchors:
        hits = [
            h
            for h in heads
            if related(h, anchor, mention.edge) and h.get("path") != anchor.get("path")
        ]
        if mention.edge == "next_to" and len(hits) > 1:  # the one named after it, if one is
            stem = _stem(str(anchor.get("path")))
            hits = [h for h in hits if _stem(str(h.get("path"))) == stem] or hits
        if hits:
            return hits, hits[1:]
    return [], []


def _by_position(mention: Mention, events: Sequence[Event]) -> list[Event]:
    """The entity at the mention's position: with a verb of making, writing or starting ("the
    first file you created", "the second container you started"), in the order they were made;
    else in the newest list that showed entities of its kind (the list a call returned). None
    there: none (never the newest)."""
    plain = dataclasses.replace(mention, ordinal=None, anchor=None)
    fitting = candidates(plain, events)
    if mention.action in MAKING:  # what the verb fits, oldest first
        made = list(reversed(fitting))
        place = mention.ordinal or 0  # "the second-to-last file you made": -2, from the end
        at = place - 1 if place > 0 else place
        return [made[at]] if -len(made) <= at < len(made) and place else []
    listed = [e for e in fitting if _list_of(e)]
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
    if mention.ident is not None and mention.edge is not None:
        hits = _by_ident(mention, events)
        return hits, hits[1:], False
    if mention.ordinal is not None:
        hits = _by_position(mention, events)
        # among things made at once the order is unknown: "the first" of them is any of them
        mates = [e for e in events if hits and e is not hits[0] and same_batch(e, hits[0])]
        return hits, [e for e in mates if e.get("type") == hits[0].get("type")], False
    if mention.other:
        hits, ties = the_other(mention, events)
        return hits, ties, False
    if mention.before:
        return the_one_before(mention, events), [], False
    cands = candidates(mention, events)
    if not cands:
        return [], [], True
    top = cands[0]
    # made by the same call, or by calls made at once: none is the newer (but one thing told as
    # two kinds, a database's user that is a role, is one)
    ties = [c for c in cands[1:] if _made_together(c, top) and not _one_thing(c, top)]
    if mention.kind == "pronoun_op" and not ties:  # "delete it": anything that call made
        ties = _made_beside(top, events, mention)
    return cands, ties, True


def _made_together(a: Event, b: Event) -> bool:
    """Made by one call (seen in one request, of one batch or none: a client's ids may repeat
    from one message to the next), or by calls made at once (``parallel_calls``)."""
    one_call = (
        a.get("call_id") == b.get("call_id")
        and a.get("first_seen") == b.get("first_seen")
        and a.get(BATCH) == b.get(BATCH)
    )
    return one_call or same_batch(a, b)


# Kinds one thing is told as at once (``CREATE USER app``: a user, and a role that may log in).
_ONE_THING = frozenset({"user", "role"})


def _one_thing(a: Event, b: Event) -> bool:
    kinds = {a.get("type"), b.get("type")}
    same_id = a.get("id") is not None and a.get("id") == b.get("id")
    return same_id and len(kinds) == 2 and kinds <= _ONE_THING


def _made_beside(top: Event, events: Sequence[Event], mention: Mention) -> list[Event]:
    """What the call that made ``top`` also made of a kind the pronoun's verb does not take
    (`git checkout -b feat/x && mkdir src/x`, then "delete it": the branch as much as the
    folder), of the kinds a mention with no noun may mean; still existing."""
    if top.get("action") not in MAKING:
        return []
    beside = [
        e
        for e in entity_cache.query(events)
        if _made_together(e, top)
        and e.get("action") in MAKING
        and e.get("type") not in mention.kinds
        and e.get("type") not in mention.needs_noun
    ]
    if not beside:
        return []
    alive = entity_cache.known_types(events)
    return [e for e in beside if e["path"] in alive]
