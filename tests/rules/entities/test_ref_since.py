"""A resolved reference whose entity the agent ended after the question (the user's "delete the
folder you just created", carried out) keeps pointing at it, marked ``since``, and the injected
line says so: it said "(created)" on every later request of the tool loop, as if the folder
were still there. Answered from the memo or worked out afresh, the same."""

from __future__ import annotations

from typing import Any

import pytest

from rules.context.inject_text import reference_lines
from rules.entities.ref_since import since_ended
from tests.rules.entities.test_ref_memo import FOLDER, Loop, ev


@pytest.mark.parametrize("kept", [True, False])
def test_a_folder_deleted_after_the_question_is_said_deleted(kept: bool) -> None:
    loop = Loop()
    before = loop.request([FOLDER], 1010.0)
    assert "since" not in before[0]
    gone = [FOLDER, ev("/w/new", "folder", "delete", 1015.0, 3)]
    refs = loop.request(gone, 1020.0) if kept else loop.fresh(gone, 1020.0)
    assert refs[0]["entity"]["path"] == "/w/new" and refs[0]["since"] == "deleted"
    (line,) = reference_lines(refs)
    assert line.endswith("means the folder /w/new (created; since deleted)")


def test_made_again_after_its_delete_it_is_not_said_deleted() -> None:
    loop = Loop()
    again = [
        FOLDER,
        ev("/w/new", "folder", "delete", 1015.0, 3),
        ev("/w/new", "folder", "create", 1016.0, 4),
    ]
    refs = loop.request(again, 1020.0)
    assert "since" not in refs[0]


def test_a_delete_before_the_question_is_not_after_it() -> None:
    refs: list[Any] = [{"mention": "m", "lang": "en", "kind": "k",
                        "entity": {"type": "file", "name": "a", "path": "/w/a",
                                   "action": "create"}}]  # fmt: skip
    assert since_ended(refs, []) is refs
    inside = [ev("/w", "folder", "delete", 1.0, 1)]  # its folder deleted: it is gone too
    assert since_ended(refs, inside)[0]["since"] == "deleted"
    moved = [{"action": "move", "from": "/w/a", "path": "/w/b", "type": "file"}]
    assert since_ended(refs, moved)[0]["since"] == "moved"
    other = [ev("/w/b", "file", "delete", 1.0, 1)]
    assert since_ended(refs, other) is refs


def test_its_end_is_no_news_mid_loop_and_said_in_a_block_said_anew() -> None:
    """The block that pointed at the folder was forwarded already: its end is not said again
    after the agent's own result of ending it (a block inside that result); a block said anew (a
    compaction, a cold cache) says it."""
    from rules.context.inject_text import Sections, delta

    ref = {"mention": "the folder you just created",
           "entity": {"type": "folder", "name": "new", "path": "/w/new", "action": "create"}}
    (shown,) = reference_lines([ref])
    (now,) = reference_lines([{**ref, "since": "deleted"}])  # fmt: skip
    assert now == shown.replace("(created)", "(created; since deleted)")
    assert delta(Sections(refs=[now]), Sections(refs=[shown])).refs == []
    assert delta(Sections(refs=[now]), Sections()).refs == [now]
