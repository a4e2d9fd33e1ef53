"""`cd -`, `pushd` and `popd` move the working directory as the shell does; a directory left
before the command line began is not known, and is not guessed."""

from __future__ import annotations

import pytest

from rules.activity.shell_parse import analyse, load_verbs


@pytest.mark.parametrize(
    ("command", "paths", "cwd"),
    [
        ("cd build && cd - && touch a", ["/w/a"], "/w"),
        ("cd /x && cd /y && cd - && touch a && cd - && touch b", ["/x/a", "/y/b"], "/y"),
        ("pushd sub && touch a && popd && touch b", ["/w/sub/a", "/w/b"], "/w"),
        ("pushd /a && pushd /b && popd && touch c", ["/a/c"], "/a"),
        ("pushd /a && popd && cd - && touch d", ["/a/d"], "/a"),
        ("cd - && touch a", ["a"], None),  # the previous directory is another line's
        ("popd && touch b", ["b"], None),  # pushed by another line
        ("pushd +1 && touch b", ["b"], None),  # a rotation of a stack not known
    ],
)
def test_the_directory_after_cd_back_and_popd(
    command: str, paths: list[str], cwd: str | None
) -> None:
    outcome = analyse(command, "/w", load_verbs())
    assert [e.path for e in outcome.effects] == paths
    assert outcome.cwd == cwd
