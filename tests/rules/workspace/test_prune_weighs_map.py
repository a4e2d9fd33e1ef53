"""prune's need judgement weighs the workspace map: an old read of a file the map shows the
agent working on, not written since, is kept (cheaper than a re-read); rewritten since, or not
in the map's working files, it is not."""

from __future__ import annotations

from typing import Any

from rules.activity.observations import observations
from rules.context import need
from rules.workspace import render, workspace_map
from tests.support.factories import assistant, call, ctx, result, shell, system, user


def _conversation(rewrite: bool = False) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [system(), user("fix the parser")]
    messages += [
        assistant(None, call("r1", "Read", file_path="src/parse.py")),
        result("r1", "def parse(text):\n    return text.split()\n"),
    ]
    if rewrite:
        messages += [
            assistant(None, call("w1", "Write", file_path="src/parse.py", content="x = 1\n")),
            result("w1", "File created successfully at: src/parse.py"),
        ]
    for i in range(25):  # unrelated later calls: nothing names the file again
        messages += [assistant(None, shell(f"s{i}", f"echo step{i}")), result(f"s{i}", f"step{i}")]
    return messages


def _need(messages: list[dict[str, Any]], working: frozenset[str]) -> need.Need:
    obs = observations(messages)
    read = next(o for o in obs if o.call_id == "r1")
    return need.judge(messages, obs, [read.result_index], working)[read.result_index]


def _working(messages: list[dict[str, Any]]) -> frozenset[str]:
    out = workspace_map.apply(ctx(messages, now=10.0), workspace_map.Config())
    return render.working_files(out.state.get(workspace_map.NAMESPACE), 20)


def test_a_read_of_a_file_being_worked_on_is_kept() -> None:
    messages = _conversation()
    working = _working(messages)
    assert "src/parse.py" in working
    kept = _need(messages, working)
    assert kept.needed and "workspace map" in kept.why
    assert not _need(messages, frozenset()).needed  # without the map: not needed


def test_a_read_rewritten_since_is_not_kept_for_the_map() -> None:
    messages = _conversation(rewrite=True)
    assert not _need(messages, _working(messages)).needed


def test_working_files_are_the_newest_touched() -> None:
    wsmap = {
        "nodes": {f"/p/f{i}.py": ["f", "r", i] for i in range(30)} | {"/p/l.py": ["f", "l", 99]},
        "cwd": "/p",
    }
    files = render.working_files(wsmap, 5)
    assert files == frozenset(
        {f"/p/f{i}.py" for i in range(25, 30)} | {f"f{i}.py" for i in range(25, 30)}
    )
    assert render.working_files(wsmap, 0) == frozenset()
    assert render.working_files(None, 5) == frozenset()
