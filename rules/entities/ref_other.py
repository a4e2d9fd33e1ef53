""" "The other one" and "the one before that": entities named against the one the session dealt
with last (made, started, removed, stopped: its newest event of the kind).

"Also remove the other container", "borra también la otra carpeta", "supprime aussi l'autre
branche": that one is set aside, the other is what still exists of the rest, when exactly one
does. Two or more left: ambiguous (the resolver abstains); none: no candidate.

"Stop the container before that one", "now the one before that too" (after "delete the last
branch you created" and its deletion): of that one's kind, what was made last before it and
still exists; with no kind said, the kind of the one dealt with last. Pure; linear in the
events."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rules.entities import cache as entity_cache
from rules.entities.forgotten import MAKING
from rules.entities.ref_candidates import candidates
from rules.entities.ref_mention import Mention

Event = Mapping[str, Any]


def the_other(mention: Mention, events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """(the candidate, those tied with it) for a mention of "the other" of its kind."""
    if mention.type is None:  # "the other one": of which kind is not said
        return [], []
    plain = dataclasses.replace(mention, other=False)
    existing = candidates(plain, events)  # what fits and still exists, newest first
    if not existing:
        return [], []
    latest = entity_cache.query(events, type=mention.type)
    if not latest:
        return [], []
    set_aside = latest[0]["path"]
    rest = [e for e in existing if e["path"] != set_aside]
    return rest[:1], rest[1:]


def the_one_before(mention: Mention, events: Sequence[Event]) -> list[Event]:
    """The candidate for a mention of "the one before that" (of its kind, or of any)."""
    latest = [e for e in entity_cache.query(events, type=mention.type) if _dealt_with(e)]
    if not latest:
        return []
    that = latest[0]
    made = [e for e in entity_cache.query(events, type=that["type"]) if e.get("action") in MAKING]
    when = next((_order(e) for e in made if e["path"] == that["path"]), None)
    if when is None:  # the one dealt with last was never seen made: nothing comes before it
        return []
    plain = dataclasses.replace(mention, before=False, type=that["type"])
    existing = {e["path"] for e in candidates(plain, events)}
    for e in made:  # newest first
        if _order(e) < when and e["path"] != that["path"] and e["path"] in existing:
            return [e]
    return []


def _dealt_with(e: Event) -> bool:
    """An event that names its entity itself (not one implied by another's end)."""
    return not (e.get("attrs") or {}).get("implied")


def _order(e: Event) -> tuple[Any, Any]:
    return (e.get("first_seen", 0), e.get("seq", 0))
