"""The working folder a harness names (Claude Code's system prompt, Codex's environment context)
is where an agent's relative paths are, until a ``cd`` says otherwise: ``mkdir reports`` then
``cd /tmp`` pointed at "the folder reports", which now reads as /tmp/reports."""

from __future__ import annotations

from typing import Any

import pytest

from rules.activity.harness_cwd import harness_cwd
from rules.entities import resolve_refs, track_entities
from tests.support.factories import apply_rules, assistant, ctx, result, shell, system, user

CLAUDE = (
    "You are Claude Code.\nYou have been invoked in the following environment: \n"
    " - Primary working directory: /home/u/proj\n - Is a git repository: false\n"
)
CODEX = (
    "<environment_context>\n  <cwd>/home/u/codex</cwd>\n  <shell>bash</shell>\n"
    "</environment_context>"
)


@pytest.mark.parametrize(
    ("messages", "cwd"),
    [
        ([{"role": "system", "content": CLAUDE}, user("go")], "/home/u/proj"),
        ([system(), {"role": "system", "content": "<env>\nWorking directory: /srv/app/\n</env>"}],
         "/srv/app"),
        ([user(CODEX), user("go")], "/home/u/codex"),
        ([system(), user("the Working directory: relative/dir is mine")], None),  # not absolute
        ([system(), user("go"), assistant("ok"), user("a"), user("b"), user(CODEX)], None),  # late
    ],
)  # fmt: skip
def test_the_harness_names_the_folder(messages: list[dict[str, Any]], cwd: str | None) -> None:
    assert harness_cwd(messages) == cwd


def _ask(first: dict[str, Any], *commands: str) -> str | None:
    msgs = [first, user("go")]
    for i, command in enumerate(commands):
        msgs += [assistant(None, shell(f"c{i}", command)), result(f"c{i}", "")]
    msgs += [assistant("Done."), user("delete the folder you just created")]
    report = apply_rules(
        ctx(msgs, now=1000.0, session_id="s"),
        (track_entities, track_entities.Config()),
        (resolve_refs, resolve_refs.Config()),
    ).report
    (ref,) = report["references"]
    return (ref.get("entity") or {}).get("path")


def test_a_relative_folder_is_made_where_the_harness_says() -> None:
    assert _ask({"role": "system", "content": CLAUDE}, "mkdir reports", "cd /tmp && ls") == (
        "/home/u/proj/reports"
    )
    assert _ask(user(CODEX), "mkdir out") == "/home/u/codex/out"
    assert _ask(system(), "mkdir reports") == "reports"  # named nowhere: as the command said it


def test_a_cd_says_otherwise() -> None:
    assert _ask({"role": "system", "content": CLAUDE}, "cd /srv && mkdir data") == "/srv/data"
