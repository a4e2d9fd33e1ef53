"""What ``seen`` must not take for evidence in view: a diagnostic's text outside its own
command's whole results, a write that failed, a file of the same name in another folder, a
left-out line whose evidence the client cleared since. Each case has its control: the same
line said once the stray evidence is gone, or with ``say_visible``."""

from __future__ import annotations

from typing import Any

from rules.base import SessionState
from rules.context import seen, working_set
from tests.rules.context.test_inject_seen import (
    COLD,
    COMPACTED,
    NOW,
    TASK,
    _block,
    _drop_write,
    _elide,
    _fail,
    _run,
)
from tests.support.factories import assistant, call, ctx, result, shell, user

TRACE = 'Traceback (most recent call last):\n  File "src/parse.py", line 7, in parse\n'


def _ledger_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    out = working_set.apply(ctx(messages, now=NOW, state=SessionState({})), working_set.Config())
    return dict(out.state.get(working_set.NAMESPACE))


def _keyerror_history() -> list[dict[str, Any]]:
    return [
        user(TASK),
        assistant(None, shell("t1", "python -m pytest tests/test_parse.py")),
        result("t1", _fail(TRACE + "    return table[key]\nKeyError: 0\n")),
        assistant(None, shell("l1", "ls src")),
        result("l1", "parse.py\n__init__.py\n(2 files, 0 dirs)"),  # any "0" at all
        assistant("the parser raises"),
        user("go on"),
    ]


def test_open_diagnostic_with_a_short_message_is_said_when_its_run_is_elided() -> None:
    history = _keyerror_history()
    ledger = _ledger_of(history)
    diags = working_set.open_diagnostics(ledger)
    assert diags and diags[0]["message"] == "0", diags
    view = _elide(history, 2)  # the failing run's output elided by a compaction
    block = _block(_run(view, ledger, COMPACTED).messages)
    # the model can read the KeyError nowhere: the Open line and the target must be said
    control = [*view[:4], result("l1", "parse.py"), *view[5:]]
    said = _block(_run(control, ledger, COMPACTED).messages)
    assert "Open: python src/parse.py:7 KeyError 0" in said  # control: said when no "0" elsewhere
    assert "Open:" in block and "Next repair target: src/parse.py:7" in block, block


def test_open_diagnostic_is_not_seen_in_the_source_that_raises_it() -> None:
    message = "empty input is not allowed here"
    history = [
        user(TASK),
        assistant(None, shell("t1", "python -m pytest tests/test_parse.py")),
        result("t1", _fail(TRACE + f"    raise ValueError\nValueError: {message}\n")),
        assistant(None, shell("c1", "cat src/parse.py")),
        result("c1", f'def parse(s):\n    if not s:\n        raise ValueError("{message}")\n'),
        assistant("the parser raises"),
        user("go on"),
    ]
    ledger = _ledger_of(history)
    view = _elide(history, 2)  # the failing run's output elided
    block = _block(_run(view, ledger, COMPACTED).messages)
    control = _elide(view, 4)  # the cat elided too: then it is said
    assert "Next repair target: src/parse.py:7" in _block(_run(control, ledger, COMPACTED).messages)
    assert "Next repair target: src/parse.py:7" in block, block  # no forwarded run shows it


def test_a_changed_file_is_not_seen_in_a_write_that_failed() -> None:
    history = [
        user(TASK),
        assistant(None, call("w1", "write_file", path="src/a.py", content="x = 1\n")),
        result("w1", "wrote src/a.py"),
        assistant(None, call("w2", "write_file", path="src/b.py", content="y = 2\n")),
        result("w2", "wrote src/b.py"),
        assistant(None, call("w3", "write_file", path="src/a.py", content="x = 2\n")),
        result("w3", "Error: permission denied: src/a.py"),
        assistant("a.py is read-only now"),
        user("go on"),
    ]
    ledger = _ledger_of(history)
    assert ledger["changed"] == ["src/a.py", "src/b.py"]
    view = _drop_write(history, 1)  # the write that changed a.py dropped; the failed one stays
    block = _block(_run(view, ledger, COMPACTED).messages)
    control = [*view[:4], *view[6:]]  # the failed write gone too: then a.py is said
    assert "src/a.py" in _block(_run(control, ledger, COMPACTED).messages)
    assert "src/a.py" in block, block  # no forwarded message says a.py was changed


def test_a_root_file_name_inside_another_folder_is_not_the_root_file() -> None:
    by_folder, root = seen._touched_by_folder(
        {
            "nodes": {"/srv/app/setup.py": ["f", "r"], "/srv/app/pkg/core.py": ["f", "r"]},
            "cwd": "/srv/app",
        }
    )
    assert root == "/srv/app"
    assert not seen._folder_seen(by_folder["."], {"docs/old/setup.py"}, root)
    assert not seen._folder_seen(by_folder["pkg"], {"vendor/subpkg/core.py"}, root)
    for named in ({"setup.py"}, {"./setup.py"}, {"/srv/app/setup.py"}):  # the control
        assert seen._folder_seen(by_folder["."], named, root)
    assert seen._folder_seen(by_folder["pkg"], {"pkg/core.py"}, root)


def test_the_paths_a_call_names_are_its_arguments_not_its_prose() -> None:
    view = [
        user(TASK),
        assistant("I might look at setup.py later", shell("c1", "cat /srv/app/pkg/core.py:12")),
        result("c1", "x = 1"),
    ]
    assert seen._named_paths(view) == {"/srv/app/pkg/core.py"}


def test_a_left_out_line_whose_evidence_the_client_cleared_is_said_again() -> None:
    """Claude Code's context editing / Codex's trimming replace an old result in place (no
    compaction by prune); the block hosts are untouched, so ``shown`` keeps the left-out line."""
    message = "empty input is not allowed here"
    history = [
        user(TASK),
        assistant(None, shell("t1", "python -m pytest tests/test_parse.py")),
        result("t1", _fail(TRACE + f"    raise ValueError\nValueError: {message}\n")),
        assistant("the parser raises"),
        user("go on"),
        assistant("looking"),
        user("go on"),
    ]
    ledger = {**_ledger_of(history), "plan": [{"text": "fix parse", "status": "in_progress"}]}
    first = _run(history, ledger, cache=COLD)
    b1 = _block(first.messages)
    assert "Plan" in b1 and message not in b1  # the diagnostic left out: in view
    cleared = [
        *first.messages[:2],
        {**history[2], "content": "[Old tool result content cleared]"},
        *first.messages[3:],
        assistant("ok"),
        user("and now?"),
    ]
    ledger2 = {**ledger, "plan": [{"text": "fix parse", "status": "completed"}]}
    again = _run(cleared, ledger2, cache=COLD, state=first.state.to_json())
    text = "\n".join(str(m.get("content")) for m in again.messages)
    assert message in text, _block(again.messages)  # nowhere in the request: the model lost it


# the run the ledger took a diagnostic from, not an older run of the same command
CMD = "python -m pytest tests/test_parse.py"
MSG = "empty input is not allowed here"


def _tb(line: int) -> str:
    where = f'  File "src/parse.py", line {line}, in parse\n'
    return f"Traceback (most recent call last):\n{where}    raise ValueError\nValueError: {MSG}\n"


def test_target_moved_by_an_edit_is_said_when_the_new_run_is_elided() -> None:
    history = [
        user(TASK),
        assistant(None, shell("t1", CMD)),
        result("t1", _fail(_tb(7))),  # whole, in view: line 7
        assistant(None, call("w1", "write_file", path="src/parse.py", content="# moved\n" * 5)),
        result("w1", "wrote src/parse.py"),
        assistant(None, shell("t2", CMD)),
        result("t2", _fail(_tb(12) + "x\n" * 3000)),  # the same failure, now at line 12
        assistant("still failing"),
        user("go on"),
    ]
    ledger = _ledger_of(history)
    view = _elide(history, 6)  # the newer (large) run elided, the older stays whole
    block = _block(_run(view, ledger, COMPACTED).messages)
    # nowhere in the view does line 12 appear: the target must be said
    assert "Next repair target: src/parse.py:12" in block, block


def test_failure_back_after_a_pass_is_said_when_its_run_is_elided() -> None:
    history = [
        user(TASK),
        assistant(None, shell("t1", CMD)),
        result("t1", _fail(_tb(7))),
        assistant(None, shell("t2", CMD)),
        result("t2", "<returncode>0</returncode>\n<output>\n1 passed\n</output>"),
        assistant(None, shell("t3", CMD)),
        result("t3", _fail(_tb(7) + "x\n" * 3000)),
        assistant("hm"),
        user("go on"),
    ]
    ledger = _ledger_of(history)
    assert ledger["runs"], ledger
    view = _elide(history, 6)  # the model reads: failed, then passed; the newest failure elided
    block = _block(_run(view, ledger, COMPACTED).messages)
    assert MSG in block, block
