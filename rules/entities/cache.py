"""The per-session memory of recent entities: a list of events, oldest first (newest last),
kept in state namespace ``entities``. Bounded by count (the newest N of each kind, 8 N in all)
and age (TTL from first seen).

An event: ``{"type", "name", "path", "action", "first_seen", "call_id", "seq", "tool"}`` plus
``"from"`` for copy/move, ``"how"`` for a project's folder (``clone``: ``git clone``;
``scaffold``: ``npm create``, ``cargo new`` …). ``seq`` orders events
seen at the same ``ctx.now``. ``type`` is the
entity's kind: file and folder (``path`` is the file's), or any other kind of the ``entities``
pack or of a structured result (branch, commit, container, process, table, customer …), whose
``path`` is its key ``kind:id``, with ``"id"``, ``"by"`` (the call that did it), ``"attrs"``
(``{name: value}``) and ``"rel"`` (``[[relation, other key or path], …]``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rules.activity.entity_pack import Made
from rules.activity.shell_parse import Effect

NAMESPACE = "entities"
Event = dict[str, Any]


def make_event(effect: Effect, now: float, call_id: str, seq: int, tool: str) -> Event:
    event: Event = {
        "type": effect.type,
        "name": posixpath.basename(effect.path) or effect.path,
        "path": effect.path,
        "action": effect.action,
        "first_seen": now,
        "call_id": call_id,
        "seq": seq,
        "tool": tool,
    }
    if effect.source:
        event["from"] = effect.source
    if effect.how:
        event["how"] = effect.how
    return event


def made_event(made: Made, now: float, call_id: str, seq: int, tool: str) -> Event:
    """The event of an entity beyond files (see the module's docstring)."""
    event: Event = {
        "type": made.kind,
        "name": made.name or made.id,
        "path": made.key,
        "id": made.id,
        "action": made.action,
        "first_seen": now,
        "call_id": call_id,
        "seq": seq,
        "tool": tool,
        "by": made.by,
    }
    if made.attrs:
        event["attrs"] = dict(made.attrs)
    if made.rel:
        event["rel"] = [list(r) for r in made.rel]
    if made.source:  # renamed: ``note`` ends the old key
        event["from"] = made.source
    return event


def is_file_kind(kind: object) -> bool:
    return kind in ("file", "folder")


_MINOR = ("package", "row")  # entities beyond files that no object verb alone brings to mind


SUMMARY = "entity_kinds"  # state: the kinds and sorts the events hold, kept with them


def summary(events: Iterable[Any]) -> dict[str, Any]:
    """What resolve_refs reads on every request instead of the events: the kinds beyond files
    they hold and their ``sorts`` (also as one string, ``joined``, the memo key of the scan).
    No field is named like a secret: the state's redaction blanks a ``key``'s value, and the
    patterns needing what it said never ran on a stored state."""
    kinds = {str(e.get("type")) for e in events if isinstance(e, dict) and "id" in e}
    held = sorted(sorts(events))
    return {"kinds": sorted(kinds), "sorts": held, "joined": "|".join(held)}


EMPTY_SUMMARY = {"kinds": [], "sorts": [], "joined": ""}


def joined_sorts(held: Any) -> str:
    """The summary's sorts as one string (a summary stored under the older name ``key``, which
    the state's redaction blanked, is read from its ``sorts``)."""
    if not isinstance(held, dict):
        return ""
    joined = held.get("joined")
    if isinstance(joined, str):
        return joined
    found = held.get("sorts")
    return "|".join(sorted(str(s) for s in found)) if isinstance(found, list) else ""


def sorts(events: Iterable[Any]) -> frozenset[str]:
    """Which sorts of entities beyond files ``events`` hold: ``objects`` (packages and rows
    aside), ``listed`` (shown in a list), ``related`` (with a relation kept). Reference patterns
    that need one are not run without it."""
    out: set[str] = set()
    for e in events:
        if not isinstance(e, dict) or "id" not in e:
            continue
        if e.get("type") not in _MINOR:
            out.add("objects")
        for r in e.get("rel") or ():
            out.add("listed" if r and r[0] == "listed_in" else "related")
    return frozenset(out)


def fresh(events: Iterable[Mapping[str, Any]], now: float, ttl: float) -> list[Event]:
    """Events not older than ``ttl`` seconds (valid dicts only: state may come from older code)."""
    out = []
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("path"), str):
            seen = e.get("first_seen")
            if isinstance(seen, (int, float)) and now - seen <= ttl:
                out.append(e)
    return out


def fresh_window(
    events: Iterable[Mapping[str, Any]], now: float, ttl: float
) -> tuple[list[Event], float, float]:
    """``fresh(events, now, ttl)``, with the first-seen times of its oldest event and of the
    newest one left out: ``still_fresh`` tells from these alone whether another clock reading
    gives the same events (``fresh``'s very comparison: subtraction keeps the order)."""
    out: list[Event] = []
    oldest, newest_gone = float("inf"), float("-inf")
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("path"), str):
            seen = e.get("first_seen")
            if isinstance(seen, (int, float)):
                if now - seen <= ttl:
                    out.append(e)
                    oldest = min(oldest, seen)
                else:
                    newest_gone = max(newest_gone, seen)
    return out, oldest, newest_gone


def still_fresh(now: float, ttl: float, oldest: float, newest_gone: float) -> bool:
    """Whether ``fresh`` at ``now`` keeps what ``fresh_window`` kept (see there)."""
    return now - oldest <= ttl and now - newest_gone > ttl


KINDS_KEPT = 8  # the events kept in all: ``capacity`` times this


def add(events: Sequence[Event], new: Iterable[Event], capacity: int) -> list[Event]:
    """Append ``new`` (a repeat of the same path and action replaces the older one), keep the
    newest ``capacity`` of each kind (files, folders, branches, processes … each apart), and the
    newest ``capacity * KINDS_KEPT`` in all: a command touching thirty files does not push out
    the branch made before it. Linear: one dict keyed by (path, action), in insertion order."""
    out: dict[tuple[Any, Any], Event] = {}
    for e in [*events, *new]:
        key = (e["path"], e["action"])
        out.pop(key, None)  # the repeat moves to the end
        out[key] = e
    if capacity <= 0:
        return []
    per_kind: dict[Any, int] = {}
    kept: list[Event] = []
    for e in reversed(out.values()):
        n = per_kind.get(e.get("type"), 0)
        if n < capacity:
            per_kind[e.get("type")] = n + 1
            kept.append(e)
            if len(kept) >= capacity * KINDS_KEPT:
                break
    kept.reverse()
    return kept


def query(
    events: Sequence[Mapping[str, Any]],
    type: str | None = None,
    action: str | None = None,
) -> list[Mapping[str, Any]]:
    """Events matching type and action, newest first."""
    hits = [
        e
        for e in events
        if (type is None or e.get("type") == type) and (action is None or e.get("action") == action)
    ]
    return sorted(hits, key=lambda e: (e.get("first_seen", 0), e.get("seq", 0)), reverse=True)


def known_types(events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """path -> type for what the events say exists now (deleted and moved-away paths left out)."""
    known: dict[str, str] = {}
    for e in sorted(events, key=lambda e: (e.get("first_seen", 0), e.get("seq", 0))):
        note(known, e)
    return known


def note(known: dict[str, str], e: Mapping[str, Any]) -> None:
    """Update ``known`` (see ``known_types``) with one event newer than all it was built from."""
    if e.get("action") == "delete":
        known.pop(e["path"], None)
        return
    if e.get("action") == "move" and isinstance(e.get("from"), str):
        known.pop(e["from"], None)
    known[e["path"]] = e["type"]
