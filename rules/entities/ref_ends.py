"""What a sub-agent (or a nearer ancestor) ended of what its lead made: a lead's file the
sub-agent deleted, moved, or deleted with its folder is no longer there, and "the file I just
created" asked in the sub-agent must not point at it. Each ancestor's events get the ends the
sessions nearer the question saw of the paths they hold, and of what a container they ended
held (``rules/entities/contents_end``). Pure; bounded: ``MAX_FOLDER_ENDS`` folders looked into
per ancestor, each a pass over its paths.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

MAX_FOLDER_ENDS = 16
MAX_DEPTH = 3  # a database's tables' rows
MAX_CONTENTS = 64  # ends of what containers held, per ancestor

Event = Mapping[str, Any]


def ends_of(events: Sequence[Event]) -> list[Event]:
    """The events that end a path or key: deletes, and moves away from one."""
    return [
        e
        for e in events
        if e.get("action") == "delete"
        or (e.get("action") == "move" and isinstance(e.get("from"), str))
    ]


def with_ends(events: Sequence[Event], ends: Sequence[Event]) -> Sequence[Event]:
    """``events`` with those of ``ends`` that end something they hold (what a folder's delete
    ends inside it too, as a delete of each path); ``events`` itself when none does."""
    if not ends or not events:
        return events
    held = {str(e.get("path")): str(e.get("type")) for e in events}
    added: list[Event] = []
    folders = 0
    for end in ends:
        gone = str(end["from"] if end.get("action") == "move" else end.get("path"))
        if gone in held:
            added.append(end)
        if end.get("action") != "delete" or end.get("type") != "folder":
            continue
        if folders >= MAX_FOLDER_ENDS:
            continue
        folders += 1
        prefix = gone.rstrip("/") + "/"
        added += [
            {**end, "path": path, "name": posixpath.basename(path), "type": typ}
            for path, typ in held.items()
            if path.startswith(prefix)
        ]
    added += _contents(events, [e for e in [*ends, *added] if e.get("action") == "delete"])
    return [*events, *added] if added else events


def _contents(events: Sequence[Event], deletes: Sequence[Event]) -> list[Event]:
    """Ends of what ``events`` hold ``in`` a deleted entity (a lead's deployment in the namespace
    a sub-agent deleted, its table in a dropped database), and of what those held in turn: up
    to ``MAX_DEPTH`` containers deep, ``MAX_CONTENTS`` ends."""
    inside: dict[str, list[Event]] = {}
    for e in events:
        for r in e.get("rel") or ():
            if isinstance(r, (list, tuple)) and len(r) == 2 and r[0] == "in":
                inside.setdefault(str(r[1]), []).append(e)
    if not inside:
        return []
    out: list[Event] = []
    frontier = [(str(d.get("path")), d) for d in deletes]
    seen = {key for key, _ in frontier}
    for _ in range(MAX_DEPTH):
        found = []
        for key, end in frontier:
            for e in inside.get(key, ()):
                path = str(e.get("path"))
                if path not in seen and len(out) < MAX_CONTENTS:
                    seen.add(path)
                    out.append({**end, "path": path, "type": e.get("type"), "name": e.get("name"),
                                "id": e.get("id")})  # fmt: skip
                    found.append((path, end))
        frontier = found
    return out
