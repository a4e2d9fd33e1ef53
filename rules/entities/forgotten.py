"""Which kinds of entity a session has forgotten some of: past the time events are kept, or past
the count kept of a kind. "The first branch you made" counts from the oldest one remembered, which
is not the first one made once an older one was forgotten: that is not answered (a pointer to the
second branch would be a wrong one). Kept in ``track_entities``' meta under ``KEY``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules.entities.ref_mention import Mention

KEY = "forgot"  # in track_entities' meta: the kinds, sorted
# the verbs whose objects are counted in the order they were made (``ref_relations``)
MAKING = frozenset({"create", "write", "start", "copy", "commit"})


def dropped(before: Iterable[Any], after: Iterable[Mapping[str, Any]]) -> set[str]:
    """The kinds of the events of ``before`` that ``after`` does not keep (by path and action:
    a repeat moved to the end is kept)."""
    kept = {(e.get("path"), e.get("action")) for e in after}
    return {
        str(e.get("type"))
        for e in before
        if isinstance(e, dict) and (e.get("path"), e.get("action")) not in kept
    }


def recorded(meta: Any) -> frozenset[str]:
    """The kinds a stored meta says were forgotten (state may come from older code)."""
    found = meta.get(KEY) if isinstance(meta, Mapping) else None
    if not isinstance(found, list):
        return frozenset()
    return frozenset(k for k in found if isinstance(k, str))


def counts_from_first(mention: Mention) -> bool:
    """ "The first (second …) X you made": a place counted from the oldest one made."""
    return (
        mention.anchor is None
        and mention.ordinal is not None
        and mention.ordinal > 0
        and mention.action in MAKING
    )


def unsure(mention: Mention, forgot: frozenset[str]) -> bool:
    """Whether a kind the mention may mean had one forgotten: its count from the first is not
    known."""
    if not forgot:
        return False
    kinds = {mention.type} if mention.type else set(mention.kinds)
    if mention.type in ("file", "folder"):
        kinds = {"file", "folder"}  # a file kind ("the first script") is a file
    return not kinds or bool(kinds & forgot)


def of_session(meta: Any, stored: Any, fresh: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """What a session forgot: what its meta records, and what ``fresh`` (its stored events
    within the time they are kept) no longer holds."""
    forgot = recorded(meta)
    if isinstance(stored, list) and len(stored) != len(fresh):
        forgot |= dropped(stored, fresh)
    return forgot
