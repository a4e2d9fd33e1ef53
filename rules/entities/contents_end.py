"""What an entity held ends with it: a deleted Kubernetes namespace ends the deployments,
services and releases made in it, a dropped database the tables made in it, a dropped table the
rows inserted in it (their relation ``in``, ``rules/activity/placement``). Without this a thing
gone with its container stayed a candidate ("scale the deployment you just made" pointing at one
whose namespace was deleted). Pure; bounded: at most ``MAX_CONTENTS`` ends per call, containers
of containers followed to ``MAX_DEPTH``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rules.activity.entity_pack import Made

MAX_CONTENTS = 64  # entities a call's ends end with them
MAX_DEPTH = 3  # a database's table's rows


def contents_ended(gone: Iterable[Made], alive: Mapping[str, Mapping[str, Any]]) -> list[Made]:
    """The ends of what ``alive`` holds ``in`` one of ``gone`` (deletions), and of what those
    held in turn (by the call that ended their container)."""
    deletes = [m for m in gone if m.action == "delete"]
    if not deletes:
        return []
    ended, by = {m.key for m in deletes}, deletes[0].by
    frontier, out = set(ended), list[Made]()
    for _ in range(MAX_DEPTH):
        found = set()
        for key, e in alive.items():
            if key in ended or len(out) >= MAX_CONTENTS:
                continue
            if any(
                isinstance(r, (list, tuple)) and len(r) == 2 and r[0] == "in" and r[1] in frontier
                for r in e.get("rel") or ()
            ):
                out.append(Made(str(e.get("type")), str(e.get("id")), "delete",
                                str(e.get("name") or ""), (), (), by))  # fmt: skip
                found.add(key)
        if not found:
            break
        ended |= found
        frontier = found
    return out
