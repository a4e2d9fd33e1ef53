""" "The other one": "also remove the other container", "borra también la otra carpeta",
"supprime aussi l'autre branche". Of the entities of the mention's kind, the one the session
dealt with last (made, started, removed, stopped: its newest event of the kind) is the one the
user sets aside; the other is what still exists of the rest, when exactly one does. Two or more
left: ambiguous (the resolver abstains); none: no candidate. Pure; linear in the events."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rules.entities import cache as entity_cache
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
