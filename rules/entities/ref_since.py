"""What the agent did, after the question, to what a resolved reference points at: the user's
"delete the folder I just created", carried out, left a pointer saying "(created)" on every
later request of the tool loop, as if the folder were still there. A reference whose entity an
event after the question ended (deleted, or moved away, and not made again since) is marked
``since`` ("deleted", "moved"), and its line says so. Pure; one pass over those events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rules.report import Reference

Event = Mapping[str, Any]


def since_ended(refs: list[Reference], after: Sequence[Event]) -> list[Reference]:
    """``refs`` with ``since`` set on each whose entity an event of ``after`` (the events after
    the question, in order) ended last; ``refs`` itself when none did."""
    wanted = {
        str(ent.get("path")) for r in refs if isinstance(ent := r.get("entity"), Mapping)
    }
    if not wanted or not after:
        return refs
    state: dict[str, str | None] = {}
    for e in after:
        action, path = e.get("action"), str(e.get("path"))
        if action == "move" and isinstance(e.get("from"), str) and e["from"] in wanted:
            state[e["from"]] = "moved"
        if action == "delete" and e.get("type") == "folder":
            inside = path.rstrip("/") + "/"
            for held in wanted:
                if held == path or held.startswith(inside):
                    state[held] = "deleted"
        elif path in wanted:
            state[path] = "deleted" if action == "delete" else None  # made or changed again
    if not any(state.values()):
        return refs
    out: list[Reference] = []
    for r in refs:
        ent = r.get("entity")
        word = state.get(str(ent.get("path"))) if isinstance(ent, Mapping) else None
        out.append({**r, "since": word} if word else r)
    return out
