"""The workspace map's "Project" and "Git" lines and the entity lines of "Recent context" are
judged by their evidence like the ledger's lines (``seen``): "Git" is left out while the very
``git status`` the map took it from is forwarded whole, "Project" while a forwarded call names
its manifest, an entity line while the call that took its action is forwarded whole. Each case
has its control: the line said once that evidence is elided, dropped or another call's, or with
``say_visible``."""

from __future__ import annotations

from typing import Any

from rules.base import SessionState
from rules.context import inject, working_set
from rules.workspace import workspace_map
from tests.rules.context.test_inject import FILE, FOLDER, REF, block_of, ev
from tests.rules.context.test_inject import run as run_refs
from tests.rules.context.test_inject_seen import COMPACTED, NOW, _block, _elide, _run
from tests.support.factories import assistant, call, ctx, result, shell, user

ROOT = "/home/u/app"
LISTING = "- /home/u/app/\n  - pyproject.toml\n  - src/\n    - app/\n      - main.py\n"
STATUS = "On branch feature/x\nChanges not staged for commit:\n\tmodified:   src/app/main.py\n"
EDIT = dict(file_path=f"{ROOT}/src/app/main.py", old_string="a", new_string="b")


def _history(*, cat_manifest: bool = True, older_status: bool = False) -> list[dict[str, Any]]:
    """A listing (the manifest seen, not named), maybe a read of the manifest, an edit, a
    ``git status`` (maybe an older one before the edit), the user's nudge."""
    pairs: list[tuple[dict[str, Any], str]] = [(call("t1", "LS", path=ROOT), LISTING)]
    if cat_manifest:
        pairs.append((call("t2", "Read", file_path=f"{ROOT}/pyproject.toml"), "[project]\n"))
    if older_status:
        pairs.append((call("s0", "Bash", command=f"cd {ROOT} && git status"), STATUS))
    pairs.append((call("t3", "Edit", **EDIT), f"The file {EDIT['file_path']} has been updated."))
    pairs.append((call("t4", "Bash", command=f"cd {ROOT} && git status"), STATUS))
    messages: list[dict[str, Any]] = [user("fix the bug in main.py")]
    for c, text in pairs:
        messages += [assistant(None, c), result(c["id"], text)]
    return [*messages, assistant("done"), user("go on")]


def _state(history: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ledger and the workspace map after ``history``, as one request leaves them."""
    context = ctx(history, now=NOW, state=SessionState({}))
    wsmap = workspace_map.apply(context, workspace_map.Config()).state.get(workspace_map.NAMESPACE)
    ledger = working_set.apply(context, working_set.Config()).state.get(working_set.NAMESPACE)
    return dict(ledger), {workspace_map.NAMESPACE: wsmap}


def _said(view: list[dict[str, Any]], history: list[dict[str, Any]], **cfg: Any) -> str:
    ledger, state = _state(history)
    return _block(_run(view, ledger, COMPACTED, state=state, cfg=inject.Config(**cfg)).messages)


def _index(messages: list[dict[str, Any]], call_id: str) -> int:
    return next(i for i, m in enumerate(messages) if m.get("tool_call_id") == call_id)


def test_the_map_keeps_the_call_each_git_fact_came_from() -> None:
    _, state = _state(_history(older_status=True))
    git = state[workspace_map.NAMESPACE]["git"]
    assert git["branch"] == "feature/x" and git["branch_call"] == "t4"
    assert git["dirty_call"] == "t4"  # the newest status, not the older s0


def test_git_line_is_left_out_while_its_status_is_forwarded_whole() -> None:
    history = _history()
    assert "Git:" in _said(history, history, say_visible=True)  # control: it is a line to say
    assert "Git:" not in _said(history, history)


def test_git_line_is_said_when_its_status_is_elided() -> None:
    history = _history()
    view = _elide(history, _index(history, "t4"))
    assert "Git: branch feature/x; 1 dirty: src/app/main.py" in _said(view, history)


def test_an_older_git_status_is_not_the_git_lines_evidence() -> None:
    history = _history(older_status=True)
    view = _elide(history, _index(history, "t4"))  # the newest status elided, s0 forwarded
    assert "Git:" in _said(view, history)
    assert "Git:" not in _said(history, history)  # control: with t4 in view it is left out


def test_project_line_is_left_out_where_a_call_names_its_manifest() -> None:
    history = _history()
    assert "Project:" in _said(history, history, say_visible=True)  # control: a line to say
    assert "Project:" not in _said(history, history)


def test_project_line_is_said_when_no_forwarded_call_names_its_manifest() -> None:
    # a listing shows pyproject.toml, but no call of the view names it
    history = _history(cat_manifest=False)
    assert "Project: python (pyproject.toml) in /home/u/app" in _said(history, history)


def test_an_entity_line_whose_call_is_forwarded_whole_is_left_out() -> None:
    # the folder was created by call c1, forwarded with its result; the file's call c2 is not
    msgs = [
        user("make a folder"),
        assistant(None, shell("c1", "mkdir ~/Desktop/123")),
        result("c1", ""),
        assistant("done"),
        user("删除刚创建的文件夹"),
    ]
    block = block_of(run_refs(msgs, [FOLDER, FILE], [REF]).messages)
    assert "- modified file /w/a.py" in block  # its call is not in view: said
    assert "created folder ~/Desktop/123" not in block.split("Resolved references")[0]
    assert '"刚创建的文件夹" means the folder ~/Desktop/123 (created)' in block  # always said
    said = run_refs(msgs, [FOLDER, FILE], [REF], inject.Config(say_visible=True))
    assert "- modified file /w/a.py\n- created folder ~/Desktop/123" in block_of(said.messages)


def test_an_entity_line_whose_result_is_elided_is_said() -> None:
    msgs = [
        user("make a folder"),
        assistant(None, shell("c1", "mkdir ~/Desktop/123")),
        result("c1", "created"),
        assistant("done"),
        user("删除刚创建的文件夹"),
    ]
    view = _elide(msgs, 2)
    block = block_of(run_refs(view, [FOLDER, FILE], [REF]).messages)
    assert "- modified file /w/a.py\n- created folder ~/Desktop/123" in block


def test_a_git_line_is_said_when_the_client_cleared_its_status_in_place() -> None:
    """An agent's own context editing replaces an old result with a placeholder (Claude Code's
    "[Old tool result content cleared]"): the call is still forwarded, its facts are not."""
    history = _history()
    i = _index(history, "t4")
    view = list(history)
    view[i] = {**history[i], "content": "[Old tool result content cleared]"}
    assert "Git:" in _said(view, history)
    assert "Git:" not in _said(list(history), history)  # control: the status forwarded whole


def test_an_ambiguous_reference_keeps_every_candidate_in_recent_context() -> None:
    """No reference line is written for it: "Recent context (newest first)" is what the model
    chooses by, so the newest folder stays listed though its call is in view."""
    ambiguous = {
        "mention": "it", "entity": None, "confidence": 0.5, "chain": [], "abstained": "ambiguous",
    }  # fmt: skip
    msgs = [
        user("make two folders"),
        assistant(None, shell("c1", "mkdir ~/Desktop/old")),
        result("c1", "created ~/Desktop/old"),
        assistant(None, shell("c2", "mkdir ~/Desktop/new")),
        result("c2", ""),
        assistant("done"),
        user("delete it"),
    ]
    msgs = _elide(msgs, 2)  # the older mkdir's result elided, the newer one's in view
    old = ev("~/Desktop/old", "folder", "create", 1)
    new = ev("~/Desktop/new", "folder", "create", 2)
    assert "~/Desktop/new" in block_of(run_refs(msgs, [old, new], [ambiguous]).messages)
    resolved = {**ambiguous, "abstained": None, "entity": "~/Desktop/old"}
    control = block_of(run_refs(msgs, [old, new], [resolved]).messages)
    assert "created folder ~/Desktop/new" not in control  # resolved: the call in view is left out
