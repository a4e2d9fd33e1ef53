"""inject leaves out of its block each working-set line the model can still read in the messages
forwarded with it (``seen``), and says the ones whose evidence a compaction elided."""

from __future__ import annotations

import copy
from typing import Any

from rules.base import CacheFacts, SessionState
from rules.context import inject, overlay, seen, working_set
from rules.messages import INJECT_OPEN, text_of
from tests.support.factories import assistant, call, ctx, result, shell, user

NOW = 10_000.0
WARM = CacheFacts(last_at=NOW - 5)
COLD = CacheFacts(last_at=0.0)
COMPACTED = {"prune": {"compacted": True, "schedule": {"cache": "warm"}}}
TASK = "make the parser accept empty input"
MESSAGE = "empty input is not allowed here"
ERROR = f"ValueError: {MESSAGE}"


def _fail(output: str) -> str:
    return f"<returncode>1</returncode>\n<output>\n{output}</output>"


def _history() -> list[dict[str, Any]]:
    """A task, two writes (a.py, b.py) and a failing test run, then the user's nudge."""
    return [
        user(TASK),
        assistant(None, call("w1", "write_file", path="src/a.py", content="x = 1\n")),
        result("w1", "wrote src/a.py"),
        assistant(None, call("w2", "write_file", path="src/b.py", content="y = 2\n")),
        result("w2", "wrote src/b.py"),
        assistant(None, shell("t1", "python -m pytest tests/test_parse.py")),
        result(
            "t1",
            _fail(
                'Traceback (most recent call last):\n  File "src/parse.py", line 7, in parse\n'
                f"    raise ValueError\n{ERROR}\n"
            ),
        ),
        assistant("the parser raises"),
        user("go on"),
    ]


def _ledger(messages: list[dict[str, Any]]) -> dict[str, Any]:
    state = SessionState({})
    out = working_set.apply(ctx(messages, now=NOW, state=state), working_set.Config())
    ledger = out.state.get(working_set.NAMESPACE)
    assert ledger["changed"] == ["src/a.py", "src/b.py"] and ledger["runs"]
    return dict(ledger)


def _elide(messages: list[dict[str, Any]], *indices: int) -> list[dict[str, Any]]:
    """``messages`` as prune forwards them with these messages' results elided."""
    out = list(messages)
    for i in indices:
        text = overlay.elided_text(messages[i], None, "stale", 120, names=True)
        out[i] = {**messages[i], "content": text}
    return out


def _drop_write(messages: list[dict[str, Any]], at: int) -> list[dict[str, Any]]:
    """``messages`` with the write call at ``at`` and its result dropped for a placeholder."""
    text = "[ctxproxy: dropped 2 earlier messages (a write) to fit the token budget]"
    dropped = {"role": "user", "content": text}
    return [*messages[:at], dropped, *messages[at + 2 :]]


def _run(
    view: list[dict[str, Any]],
    ledger: dict[str, Any],
    report: dict[str, Any] | None = None,
    cache: CacheFacts = WARM,
    state: dict[str, Any] | None = None,
    cfg: inject.Config | None = None,
) -> Any:
    data = {**(state or {}), working_set.NAMESPACE: ledger}
    context = ctx(view, now=NOW, state=SessionState(data), cache=cache, report=report or {})
    return inject.apply(context, cfg or inject.Config())


def _block(messages: list[dict[str, Any]]) -> str:
    text = text_of(messages[-1]["content"])
    return text[text.index(INJECT_OPEN) :] if INJECT_OPEN in text else ""


def test_a_compaction_with_every_line_in_view_adds_no_block() -> None:
    history = _history()
    out = _run(history, _ledger(history), COMPACTED)
    assert out.messages == history  # the goal, both writes and the error are all in view
    said = _run(history, _ledger(history), COMPACTED, cfg=inject.Config(say_visible=True))
    assert TASK in _block(said.messages)  # asked to say everything, it does


def test_a_line_whose_evidence_was_elided_is_said_and_the_visible_ones_are_left_out() -> None:
    history = _history()
    ledger = _ledger(history)
    view = _elide(_drop_write(history, 3), 5)  # b.py's write dropped, the test output elided
    block = _block(_run(view, ledger, COMPACTED).messages)
    assert "Changed files: src/b.py" in block and "src/a.py" not in block
    assert MESSAGE in block and "Next repair target: src/parse.py:7" in block
    assert TASK not in block  # the task's message is forwarded unchanged


def test_the_goal_is_said_when_its_message_is_no_longer_the_task() -> None:
    history = _history()
    ledger = _ledger(history)
    clipped = [user(TASK[:12] + " [ctxproxy: clipped 30 more characters]"), *history[1:]]
    block = _block(_run(clipped, ledger, COMPACTED).messages)
    assert f"Goal: {TASK}" in block
    assert "src/a.py" not in block and MESSAGE not in block  # still in view


def test_a_cold_cache_block_leaves_out_what_is_in_view() -> None:
    history = _history()
    ledger = _ledger(history)
    view = _elide(history, 6)
    out = _run(view, ledger, cache=COLD)
    block = _block(out.messages)
    assert MESSAGE in block and TASK not in block and "src/b.py" not in block
    assert _run(history, ledger, cache=COLD).messages == history  # nothing hidden: no block


def test_a_left_out_line_is_judged_again_and_a_later_delta_says_it_only_once_hidden() -> None:
    history = _history()
    ledger = _ledger(history)
    first = _run(_elide(history, 6), ledger, cache=COLD)
    assert "src/a.py" not in _block(first.messages)
    shown = first.state.get(inject.sticky.NAMESPACE)["shown"]["ws"]
    assert ["Open", f"python src/parse.py:7 ValueError {MESSAGE}"] in shown  # said: recorded
    # left out: not recorded as said, so the next block judges it against its own view
    assert ["Goal", TASK] not in shown and ["Changed files", "src/a.py"] not in shown
    later = [
        *first.messages,
        assistant(None, call("w3", "write_file", path="src/c.py", content="z = 3\n")),
        result("w3", "wrote src/c.py"),
        assistant("c.py is in"),
        user("and now?"),
    ]
    ledger2 = _ledger_with(ledger, "src/c.py")
    state = first.state.to_json()
    again = _run(_elide(later, 6), ledger2, cache=COLD, state=state)
    assert _block(again.messages) == ""  # c.py's write is in view too: nothing to say
    hidden = _elide(_drop_write(later, len(first.messages)), 6)  # c.py's write dropped
    said = _block(_run(hidden, ledger2, cache=COLD, state=state).messages)
    assert "changed since" in said and "src/c.py" in said
    assert "src/a.py" not in said and TASK not in said and MESSAGE not in said


def _ledger_with(ledger: dict[str, Any], path: str) -> dict[str, Any]:
    return {**ledger, "changed": [*ledger["changed"], path]}


def test_same_view_same_block_and_the_client_request_untouched() -> None:
    history = _history()
    ledger = _ledger(history)
    view = _elide(_drop_write(history, 3), 5)
    before = copy.deepcopy(view)
    one = _run(view, ledger, COMPACTED)
    two = _run(copy.deepcopy(view), ledger, COMPACTED)
    assert one.messages == two.messages and view == before


def test_a_folder_touched_is_in_view_where_a_call_names_a_file_touched_in_it() -> None:
    paths = ("/srv/app/pkg/core.py", "/srv/app/setup.py", "/srv/app/docs/a.md")
    nodes = {p: ["f", "r"] for p in paths}
    by_folder, root = seen._touched_by_folder({"nodes": nodes, "cwd": "/srv/app"})
    assert root == "/srv/app" and by_folder["."] == ["setup.py"]
    view = [
        user(TASK),
        assistant(None, shell("c1", "cd /srv/app && cat pkg/core.py")),
        result("c1", "x = 1"),
        assistant(None, shell("c2", "python setup.py test")),
        result("c2", "ok"),
    ]
    named = seen._named_paths(view)
    assert seen._folder_seen(by_folder["pkg"], named, root)
    assert seen._folder_seen(by_folder["."], named, root)
    assert not seen._folder_seen(by_folder["docs"], named, root)  # docs/a.md: no call names it
