"""An ancestor's entities as a sub-agent sees them: what the sub-agent ended is gone."""

from __future__ import annotations

from typing import Any

from rules.entities.cache import known_types
from rules.entities.ref_ends import MAX_FOLDER_ENDS, ends_of, with_ends


def _e(action: str, path: str, seq: int, typ: str = "file", **more: Any) -> dict[str, Any]:
    name = path.rsplit("/", 1)[-1]
    return {"type": typ, "name": name, "path": path, "action": action, "first_seen": 100.0 + seq,
            "call_id": f"c{seq}", "seq": seq, "tool": "bash", **more}  # fmt: skip


LEAD = [
    _e("create", "/w/notes.md", 1),
    _e("create", "/w/build", 2, "folder"),
    _e("create", "/w/build/out.txt", 3),
    _e("create", "/w/build2/keep.txt", 4),
]


def test_a_delete_of_a_lead_path_ends_it() -> None:
    seen = with_ends(LEAD, ends_of([_e("delete", "/w/notes.md", 10)]))
    assert "/w/notes.md" not in known_types(seen)


def test_a_folder_delete_ends_what_the_lead_made_inside_it_only() -> None:
    seen = with_ends(LEAD, ends_of([_e("delete", "/w/build", 10, "folder")]))
    assert set(known_types(seen)) == {"/w/notes.md", "/w/build2/keep.txt"}


def test_a_move_moves_it() -> None:
    seen = with_ends(LEAD, ends_of([_e("move", "/w/done.md", 10, **{"from": "/w/notes.md"})]))
    alive = known_types(seen)
    assert "/w/done.md" in alive and "/w/notes.md" not in alive


def test_ends_of_other_paths_leave_the_events_as_they_are() -> None:
    ends = ends_of([_e("delete", "/w/other.txt", 10), _e("create", "/w/new.txt", 11)])
    assert with_ends(LEAD, ends) is LEAD


def test_folder_ends_are_bounded() -> None:
    many = [_e("delete", f"/w/d{i}", 10 + i, "folder") for i in range(MAX_FOLDER_ENDS + 5)]
    lead = [_e("create", f"/w/d{i}/f", i) for i in range(MAX_FOLDER_ENDS + 5)]
    alive = known_types(with_ends(lead, ends_of(many)))
    assert len(alive) == 5
