"""``find … -delete`` and ``find … -exec rm … {} +`` end what they matched of the paths known
to exist (``find_deletes``); a form the reader cannot follow ends nothing."""

from __future__ import annotations

import pytest

from rules.activity.find_deletes import find_deletes
from rules.activity.shell_parse import analyse, load_verbs

KNOWN = {
    "/w/new": "folder",
    "/w/new/a.txt": "file",
    "/w/old": "folder",
    "/w/src/x.pyc": "file",
    "/w/src/x.py": "file",
    "/w/src/__pycache__": "folder",
    "/w/News.md": "file",
    "/elsewhere/x.pyc": "file",
}


def _deleted(command: str) -> list[tuple[str, str]]:
    effects = analyse(command, "/w", load_verbs(), KNOWN).effects
    assert all(e.action == "delete" for e in effects)
    return sorted((e.path, e.type) for e in effects)


@pytest.mark.parametrize(
    ("command", "deleted"),
    [
        ("find . -name new -type d -exec rm -rf {} +", [("/w/new", "folder")]),
        ("find . -name '*.pyc' -delete", [("/w/src/x.pyc", "file")]),
        (
            "find src -type d -name __pycache__ -exec rm -r {} \\;",
            [("/w/src/__pycache__", "folder")],
        ),
        (
            "find /w -iname 'new*' -type f -delete",
            [("/w/News.md", "file")],
        ),
        ("find . -type f -name '*.txt' -execdir rm {} +", [("/w/new/a.txt", "file")]),
        # finding is not deleting; forms not followed end nothing
        ("find . -name new", []),
        ("find . -name new -exec ls {} +", []),
        ("find . -name new -o -name old -delete", []),
        ("find . ! -name old -type d -delete", []),
        ("find . -path './new/*' -delete", []),
        ("find $DIR -name '*.pyc' -delete", []),
        # a predicate not followed narrows or widens what is found: nothing is ended
        ("find . -type d -empty -delete", []),
        ("find . -mindepth 1 -name new -delete", []),
        ("find . -maxdepth 1 -name '*.pyc' -delete", []),
        ("find src -name '*.pyc' -mtime +30 -delete", []),
        ("find src -name '*.pyc' -size +1M -delete", []),
        ('find . -name "$PAT" -delete', []),
    ],
)
def test_what_find_deleted(command: str, deleted: list[tuple[str, str]]) -> None:
    assert _deleted(command) == deleted


def test_a_deletion_ends_at_most_its_cap() -> None:
    known = {f"/w/t{i}.tmp": "file" for i in range(500)}
    effects = analyse("find . -name '*.tmp' -delete", "/w", load_verbs(), known).effects
    assert len(effects) == 64


def test_the_finds_of_a_line_share_one_bound_on_the_paths_they_look_at() -> None:
    known = [(f"/w/t{i}.tmp", "file") for i in range(100)]
    left = [10]
    found = find_deletes(["find", ".", "-name", "*.tmp", "-delete"], "/w", known, left)
    assert len(found) == 10 and left == [0]
    assert find_deletes(["find", ".", "-name", "*.tmp", "-delete"], "/w", known, left) == []
