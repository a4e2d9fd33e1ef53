"""Text that is no shell, lexed as a command line (SWE-agent's ``edit 4:4`` body: ``def
division(a: float, b: float) -> float:``), made redirections to ``float:``, ``=`` and ``None:``:
files "created" and "changed" that do not exist. A target ending in a colon, or without a letter
or digit, names no file."""

from __future__ import annotations

import json

from rules.activity.observations import classify
from rules.activity.shell_parse import analyse, load_verbs

EDIT = "edit 4:4\ndef division(a: float, b: float) -> float:\n    x = a >= b\nend_of_edit"


def test_no_file_from_a_body_that_is_no_shell() -> None:
    effects = analyse(EDIT, "/repo", load_verbs()).effects
    assert [e.path for e in effects] == []
    action = classify("bash", json.dumps({"command": EDIT}))
    assert action.writes == ()


def test_real_redirections_still_count() -> None:
    effects = analyse("echo x > out.txt; echo y >> logs/run.log", "/repo", load_verbs()).effects
    assert [e.path for e in effects] == ["/repo/out.txt", "/repo/logs/run.log"]
