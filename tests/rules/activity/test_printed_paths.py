"""Paths a command names only in what it printed: ``mktemp`` made the file or folder it printed,
``git clean -f`` removed the paths after "Removing". A dry run, a ``$(…)`` and a failed branch
(``||``) say nothing."""

from __future__ import annotations

import pytest

from rules.activity.printed_paths import printed_effects
from rules.activity.shell_parse import Effect


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        ("mktemp -d", "/tmp/tmp.Xa81kQ\n", [Effect("create", "folder", "/tmp/tmp.Xa81kQ")]),
        ("mktemp", "/tmp/tmp.b2\n", [Effect("create", "file", "/tmp/tmp.b2")]),
        ("mktemp -p /w x.XXXX", "/w/x.aB3d", [Effect("create", "file", "/w/x.aB3d")]),
        ("cd /w && mktemp --directory", "/tmp/tmp.q", [Effect("create", "folder", "/tmp/tmp.q")]),
        ("mktemp -u", "/tmp/tmp.Zz\n", []),  # only a name: nothing made
        ("echo $(mktemp -d)", "/tmp/tmp.Q\n", []),  # printed by echo
        ("false || mktemp -d", "/tmp/tmp.Q\n", []),
        (
            "git clean -fd",
            "Removing build/\nRemoving notes.txt\n",
            [Effect("delete", "folder", "/w/build"), Effect("delete", "file", "/w/notes.txt")],
        ),
        ("git clean -nd", "Would remove build/\n", []),
        ("git clean -fd --dry-run", "Removing build/\n", []),
        ("git status", "Removing build/\n", []),
    ],
)
def test_printed_effects(command: str, output: str, expected: list[Effect]) -> None:
    assert list(printed_effects(command, output, "/w")) == expected


def test_a_git_clean_is_read_for_a_bounded_number_of_paths() -> None:
    output = "".join(f"Removing f{i}.txt\n" for i in range(10_000))
    assert len(printed_effects("git clean -f", output, "/w")) == 256
