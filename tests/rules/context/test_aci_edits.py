"""SWE-agent's ``edit N:M … end_of_edit`` (and ``create``, ``insert``) through its shell tool
changes the open file its answer names first: the working set missed every such edit."""

from __future__ import annotations

from tests.rules.context.test_working_set import TASK, ledger_of
from tests.support.factories import assistant, result, shell

EDIT = "edit 4:4\ndef division(a: float, b: float) -> float:\nend_of_edit"
EDITED = (
    "[File: /repo/tests/missing_colon.py (10 lines total)]\n1:#!/usr/bin/env python3\n"
    "4:def division(a: float, b: float) -> float:\nFile updated. Please review the changes."
)


def _changed(command: str, answer: str) -> list[str]:
    return ledger_of(TASK, assistant(None, shell("e", command)), result("e", answer)).get(
        "changed", []
    )


def test_an_edit_changes_the_file_its_answer_names() -> None:
    assert _changed(EDIT, EDITED) == ["/repo/tests/missing_colon.py"]
    made = "[File: /repo/reproduce.py (1 lines total)]\n1:\n\n(Open file: /repo/reproduce.py)"
    assert _changed("create reproduce.py", made) == ["/repo/reproduce.py"]


def test_a_refused_edit_or_another_command_changes_nothing() -> None:
    refused = EDITED + "\nYour proposed edit has introduced new syntax error(s)."
    assert _changed(EDIT, refused) == []
    assert _changed("cat tests/missing_colon.py", EDITED) == []
