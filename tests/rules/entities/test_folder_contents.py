"""A folder's delete or move ends or moves what track_entities knew inside it."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import SessionState
from rules.entities import track_entities
from rules.entities.cache import known_types
from tests.support.factories import assistant, ctx, result, shell, system, user


def _tracked(*commands: str) -> SessionState:
    msgs: list[dict[str, Any]] = [system(), user("go")]
    for i, cmd in enumerate(commands):
        msgs += [assistant(None, shell(f"c{i}", cmd)), result(f"c{i}", "")]
    msgs.append(user("thanks"))
    return track_entities.apply(ctx(msgs, now=1000.0), track_entities.Config()).state


def _alive(state: SessionState) -> dict[str, str]:
    return known_types(state.get("entities") or [])


@pytest.mark.parametrize(
    "commands",
    [
        ("mkdir -p /w/build && touch /w/build/a.txt /w/build/b.txt", "rm -rf /w/build/"),
        ("mkdir -p /w/build/sub && touch /w/build/sub/a.txt /w/build/b.txt && rm -r /w/build",),
        ("echo x > /w/build/a.txt", "echo y > /w/build/b.txt", "rmdir /w/build"),
    ],
)
def test_deleting_a_folder_ends_what_it_held(commands: tuple[str, ...]) -> None:
    alive = _alive(_tracked("touch /w/keep.txt", *commands))
    assert alive == {"/w/keep.txt": "file"}


def test_a_sibling_sharing_the_folder_name_as_a_prefix_stays() -> None:
    alive = _alive(_tracked("mkdir /w/build /w/build2 && touch /w/build2/a.txt", "rm -rf /w/build"))
    assert alive == {"/w/build2": "folder", "/w/build2/a.txt": "file"}


def test_moving_a_folder_moves_what_it_held() -> None:
    state = _tracked("mkdir -p /w/src/pkg && touch /w/src/pkg/a.py /w/src/b.py", "mv /w/src /w/lib")
    assert _alive(state) == {
        "/w/lib": "folder",
        "/w/lib/pkg": "folder",
        "/w/lib/pkg/a.py": "file",
        "/w/lib/b.py": "file",
    }
    moved = [(e["path"], e.get("from")) for e in state.get("entities") if e["action"] == "move"]
    assert ("/w/lib/pkg/a.py", "/w/src/pkg/a.py") in moved


def test_moving_a_folder_into_another_keeps_its_name() -> None:
    state = _tracked("mkdir -p /w/src /w/old && touch /w/src/a.py", "mv /w/src /w/old/")
    assert "/w/old/src/a.py" in _alive(state) and "/w/src/a.py" not in _alive(state)


def test_deleting_a_file_leaves_the_rest_alone() -> None:
    alive = _alive(_tracked("mkdir /w/d && touch /w/d/a /w/d/b", "rm /w/d/a"))
    assert alive == {"/w/d": "folder", "/w/d/b": "file"}


@pytest.mark.parametrize("delete", ["rm -rf /w/.venv", "rm -rf /w", "rm -r /w/.venv/"])
def test_deleting_a_path_ends_what_it_named_beyond_files(delete: str) -> None:
    """A virtualenv is known by its folder: deleted with it, "activate the virtualenv you
    created" pointed at one gone."""
    state = _tracked("python -m venv /w/.venv", delete)
    made = [e for e in state.get("entities") or [] if e.get("id") == "/w/.venv"]
    assert [e["action"] for e in made] == ["create", "delete"]


@pytest.mark.parametrize("delete", ["rm -rf .venv", "cd /w && rm -rf .venv"])
def test_a_relative_path_ends_what_it_named_beyond_files(delete: str) -> None:
    """Made where the working folder was not known, a virtualenv's id is the relative path the
    command gave: deleted by that path (or by the one it resolves to since), it is gone."""
    state = _tracked("python -m venv .venv", delete)
    made = [e for e in state.get("entities") or [] if e.get("id") == ".venv"]
    assert [e["action"] for e in made] == ["create", "delete"]


def test_a_relative_name_is_no_path_of_another_kind() -> None:
    """A branch named like the deleted folder stays: only kinds known by a path end with it."""
    state = _tracked("git checkout -b build", "rm -rf build")
    made = [e for e in state.get("entities") or [] if e.get("id") == "build"]
    assert [e["action"] for e in made] == ["create"]


def test_a_path_beside_the_deleted_one_stays_beyond_files_too() -> None:
    state = _tracked("python -m venv /w/.venv2", "rm -rf /w/.venv")
    made = [e for e in state.get("entities") or [] if e.get("id") == "/w/.venv2"]
    assert [e["action"] for e in made] == ["create"]


@pytest.mark.parametrize(
    ("delete", "left"),
    [
        ("rm -rf /w/tmp*", {"/w/keep.txt": "file", "/w/other": "folder"}),
        ("rm /w/tmp?/a.log", {"/w/keep.txt": "file", "/w/other": "folder", "/w/tmp1": "folder",
                              "/w/tmp2": "folder"}),
        ("rm -r /w/t*p1", {"/w/keep.txt": "file", "/w/other": "folder", "/w/tmp2": "folder",
                           "/w/tmp2/a.log": "file"}),
    ],
)  # fmt: skip
def test_a_deleted_pattern_ends_the_paths_it_names(delete: str, left: dict[str, str]) -> None:
    """The shell expands ``rm -rf tmp*``: the folders it named, and what they held, are gone
    ("delete the folder you just created" pointed at one)."""
    made = "mkdir -p /w/tmp1 /w/tmp2 /w/other && touch /w/tmp1/a.log /w/tmp2/a.log"
    assert _alive(_tracked("touch /w/keep.txt", made, delete)) == left
