"""A clone or a project scaffolder makes a folder: the repository's name, or the one given."""

from __future__ import annotations

import pytest

from rules.activity.shell_parse import analyse, load_verbs


def _made(command: str) -> list[tuple[str, str, str]]:
    return [(e.action, e.type, e.path) for e in analyse(command, "/w", load_verbs()).effects]


@pytest.mark.parametrize(
    ("command", "folder"),
    [
        ("git clone https://github.com/psf/requests.git", "/w/requests"),
        ("git clone https://github.com/psf/requests/", "/w/requests"),
        ("git clone --depth 1 -b main git@github.com:o/tool.git mytool", "/w/mytool"),
        ("git clone git@host:tool.git", "/w/tool"),
        ("npm create vite@latest my-app -- --template react", "/w/my-app"),
        ("npm init vite@latest app", "/w/app"),
        ("yarn create vite app2", "/w/app2"),
        ("pnpm create vite app3", "/w/app3"),
        ("pnpm dlx create-vite app4", "/w/app4"),
        ("npx create-react-app my-app", "/w/my-app"),
        ("npx -y create-next-app@latest web --ts", "/w/web"),
        ("cargo new --lib hello", "/w/hello"),
        ("django-admin startproject mysite", "/w/mysite"),
        ("django-admin startapp polls", "/w/polls"),
        ("rails new blog -d postgresql", "/w/blog"),
        ("poetry new pkg", "/w/pkg"),
        ("uv init proj", "/w/proj"),
        ("cd /srv && git clone https://x.org/a/b.git", "/srv/b"),
    ],
)
def test_the_folder_a_project_command_makes(command: str, folder: str) -> None:
    assert _made(command) == [("create", "folder", folder)]


@pytest.mark.parametrize(
    "command",
    [
        "git clone https://x.org/r.git .",  # into the folder it is in
        "npm init -y",  # a package.json, no folder
        "npm create vite@latest -- --template react",  # asks for the name
        "npx prettier --write .",  # no scaffolder
        "uv init",
        "git clone $REPO",
    ],
)
def test_what_makes_no_project_folder(command: str) -> None:
    assert _made(command) == []
