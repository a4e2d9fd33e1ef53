"""A rename makes the entity known by its new name: the old one ends, and a reference to what
was made finds it under the new name."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import SessionState
from rules.context.inject_text import reference_lines
from rules.entities.cache import known_types
from tests.support.factories import assistant, user
from tests.support.scenarios import _Session


def _ask(agent: _Session, text: str) -> list[Any]:
    agent.messages += [assistant("Done."), user(text)]
    return list(agent.send(resolve=True)["references"])


def _tracked(*steps: tuple[str, str]) -> list[dict[str, Any]]:
    agent = _Session("a", "/w", 1_700_000_000.0)
    for command, output in steps:
        agent.step({"shell": command, "output": output})
    state: SessionState = agent.state
    return list(state.get("entities") or [])


@pytest.mark.parametrize(
    ("steps", "old", "new"),
    [
        (
            [("git checkout -b a", ""), ("git branch -m a b", "")],
            "branch:a",
            "branch:b",
        ),
        (
            [("git branch a", ""), ("git branch --move a b", "")],
            "branch:a",
            "branch:b",
        ),
        (
            [("docker run -d --name web nginx", ""), ("docker container rename web api", "")],
            "container:web",
            "container:api",
        ),
        (
            [
                ("psql -c 'CREATE TABLE t1 (id int)'", "CREATE TABLE"),
                ("psql -c 'ALTER TABLE t1 RENAME TO t2'", "ALTER TABLE"),
            ],
            "table:t1",
            "table:t2",
        ),
        (
            [
                ("mysql -e 'CREATE TABLE t1 (id int)'", ""),
                ("mysql -e 'RENAME TABLE t1 TO t2'", ""),
            ],
            "table:t1",
            "table:t2",
        ),
        ([("touch a.txt", ""), ("mv a.txt b.txt", "")], "/w/a.txt", "/w/b.txt"),
    ],
)
def test_a_rename_ends_the_old_name_and_keeps_the_new(
    steps: list[tuple[str, str]], old: str, new: str
) -> None:
    events = _tracked(*steps)
    alive = known_types(events)
    assert new in alive and old not in alive
    (moved,) = [e for e in events if e["action"] == "move"]
    assert moved["from"] == old


@pytest.mark.parametrize(
    "steps",
    [
        [("git checkout -b a", ""), ("git branch -m b", "")],
        [("git checkout -b a && git branch -M b", "Switched to a new branch 'a'")],
        [("git branch a", ""), ("git switch a", "Switched to branch 'a'"), ("git branch -m b", "")],
        [
            ("git checkout -b a", ""),
            ("git checkout -- src/x.py", "Updated 1 path from the index"),
            ("git checkout src/y.py", "Updated 1 path from the index"),
            ("git branch -m b", ""),
        ],
        [
            ("git switch -c a", ""),
            ("git checkout main", "Switched to branch 'main'"),
            ("git checkout -", "Switched to branch 'a'"),
            ("git branch --move b", ""),
        ],
        [
            ("git checkout -b a", ""),
            ("git status", "On branch a\nnothing to commit"),
            ("git branch -m b", ""),
        ],
    ],
)
def test_renaming_the_current_branch_alone_renames_the_branch_checked_out(
    steps: list[tuple[str, str]],
) -> None:
    events = _tracked(*steps)
    alive = known_types(events)
    assert "branch:b" in alive and "branch:a" not in alive
    (moved,) = [e for e in events if e["action"] == "move"]
    assert moved["from"] == "branch:a"


@pytest.mark.parametrize(
    "steps",
    [
        # another branch checked out since: the rename is of that one
        [
            ("git checkout -b a", ""),
            ("git checkout main", "Switched to branch 'main'"),
            ("git branch -m b", ""),
        ],
        # checked out elsewhere with nothing printed: which one is renamed is not known
        [("git checkout -b a", ""), ("git checkout main", ""), ("git branch -m b", "")],
        [("git checkout -b a", ""), ("git switch --detach HEAD~1", ""), ("git branch -m b", "")],
        # made, never checked out
        [("git branch a", ""), ("git branch -m b", "")],
    ],
)
def test_renaming_the_current_branch_alone_leaves_a_branch_not_checked_out(
    steps: list[tuple[str, str]],
) -> None:
    events = _tracked(*steps)
    assert "branch:a" in known_types(events)
    assert not any(e.get("from") == "branch:a" for e in events)


def test_renaming_the_current_branch_a_second_time_follows_the_first_rename() -> None:
    events = _tracked(("git checkout -b a", ""), ("git branch -m a b", ""), ("git branch -m c", ""))
    alive = known_types(events)
    assert "branch:c" in alive and "branch:a" not in alive and "branch:b" not in alive


def test_a_renamed_column_is_no_renamed_table() -> None:
    events = _tracked(
        ("sqlite3 x.db 'CREATE TABLE t (a int)'", ""),
        ("sqlite3 x.db 'ALTER TABLE t RENAME COLUMN a TO b'", ""),
    )
    assert "table:t" in known_types(events)
    assert all(e["action"] != "move" for e in events)


def test_a_later_delete_of_the_new_name_ends_it() -> None:
    events = _tracked(
        ("docker run -d --name web nginx", ""),
        ("docker rename web api", ""),
        ("docker rm -f api", ""),
    )
    assert not [k for k in known_types(events) if k.startswith("container:")]


def test_the_pointer_names_the_new_name_and_the_old_one() -> None:
    agent = _Session("a", "/w", 1_700_000_000.0)
    agent.step({"shell": "git checkout -b feat/x", "output": "Switched to a new branch 'feat/x'"})
    agent.step({"shell": "git branch -m feat/x feat/y", "output": ""})
    (ref,) = _ask(agent, "push the branch you just made")
    assert ref["pointer"]["id"] == "feat/y"
    assert reference_lines([ref]) == [
        '- "the branch you just made" means the git branch feat/y '
        "(was feat/x; created by git checkout -b feat/x, 4 s ago)"
    ]


def test_a_name_reused_after_a_rename_is_the_new_thing() -> None:
    # a renamed away, then made again: "the branch you made" is the newest a
    agent = _Session("a", "/w", 1_700_000_000.0)
    agent.step({"shell": "git checkout -b a", "output": ""})
    agent.step({"shell": "git branch -m a b", "output": ""})
    agent.step({"shell": "git checkout -b a", "output": ""})
    (ref,) = _ask(agent, "push the branch you just made")
    assert ref["pointer"]["id"] == "a"


def test_the_pointer_follows_a_rename_of_the_branch_checked_out() -> None:
    # across requests: the branch checked out is kept in the session's state
    agent = _Session("a", "/w", 1_700_000_000.0)
    agent.step({"shell": "git checkout -b feat/x", "output": "Switched to a new branch 'feat/x'"})
    agent.send()
    agent.step({"shell": "git branch -m feat/y", "output": ""})
    (ref,) = _ask(agent, "push the branch you just made")
    assert ref["pointer"]["id"] == "feat/y"


@pytest.mark.parametrize(
    ("steps", "renamed"),
    [
        # another tool checked out a branch: which one is renamed is not known
        ([("git checkout -b a", ""), ("gh pr checkout 42", "Switched to a new branch 'fix'"),
          ("git branch -m b", "")], None),
        # checked out in another folder (another repository): not the one renamed here
        ([("cd /w && git checkout -b a", ""), ("cd /tmp/other && git checkout -b x", ""),
          ("cd /w && git branch -m b", "")], None),
        # each git status reads its own "On branch" line
        ([("git checkout -b a", ""),
          ("git status && git checkout main && git status",
           "On branch a\nSwitched to branch 'main'\nOn branch main"),
          ("git branch -m trunk", "")], "branch:main"),
    ],
    ids=["another-tool", "another-folder", "two-statuses"],
)  # fmt: skip
def test_renaming_the_current_branch_names_no_branch_checked_out_elsewhere(
    steps: list[tuple[str, str]], renamed: str | None
) -> None:
    events = _tracked(*steps)
    moves = [e["from"] for e in events if e["action"] == "move"]
    assert moves == ([renamed] if renamed else [])
