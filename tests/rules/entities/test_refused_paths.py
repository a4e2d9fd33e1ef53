"""A chain whose last command succeeded still did not do what one of its tools refused:
``mkdir app; echo ok`` exits 0 with ``mkdir: cannot create directory ‘app’: File exists``, and
``app`` was not made by that call."""

from __future__ import annotations

import time

import pytest

from rules.activity.refused_paths import refused_names
from tests.rules.entities.test_track_entities import paths, run
from tests.support.factories import assistant, result, shell, user

CASES = [
    (
        "cd /w && mkdir app; mkdir lib; echo done",
        "mkdir: cannot create directory ‘app’: File exists\ndone\n"
        "[Command finished with exit code 0]",
        [("create", "folder", "/w/lib")],
    ),
    (
        "cd /w && rm old.txt new.txt; true",
        "rm: cannot remove 'old.txt': No such file or directory\n<returncode>0</returncode>",
        [("delete", "file", "/w/new.txt")],
    ),
    (
        "cd /w && cp src/a.txt b.txt; touch c.txt; echo ok",
        "cp: cannot stat 'src/a.txt': No such file or directory\nok\nExit code: 0",
        [("create", "file", "/w/c.txt")],
    ),
    (  # a refusal naming another path leaves this one
        "cd /w && mkdir app; ls missing; echo ok",
        "ls: cannot access 'missing': No such file or directory\nok\nExit code: 0",
        [("create", "folder", "/w/app")],
    ),
]


@pytest.mark.parametrize(("command", "output", "made"), CASES)
def test_what_a_tool_refused_is_not_noted(command: str, output: str, made: list[tuple]) -> None:
    out = run([user("go"), assistant(None, shell("c1", command)), result("c1", output)])
    assert [p for p in paths(out.state) if p[2] != "/w"] == made


def test_the_refusals_are_read_in_linear_time() -> None:
    started = time.perf_counter()
    refused_names(("x: cannot " + "a " * 3000 + "\n") * 300)
    refused_names("mkdir: cannot create directory '" + "x" * 500_000)
    assert time.perf_counter() - started < 0.5
