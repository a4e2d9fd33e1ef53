"""break_loops: each kind of loop (repeated failure, no-progress repeat, oscillation) gets a note
inside the newest repeat; the note escalates (3, 5, 8 …) and elides a repeated body; a lookup miss
lists its receipts (the fullwidth-colon todo among them); a note replays byte for byte on later
requests; legitimate repetition is not a loop; the rule's contract (same list when nothing to do,
idempotent, the client's messages untouched)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rules.base import SessionState
from rules.loops import break_loops, note
from rules.messages import INJECT_CLOSE, INJECT_OPEN, PLACEHOLDER_PREFIX, text_of
from tests.support.factories import assistant, call, ctx, result, shell, user

CFG = break_loops.Config()
Turn = tuple[dict[str, Any], str]  # (call, its result's text)


def conversation(*turns: Turn | dict[str, Any]) -> list[dict[str, Any]]:
    """A user's task, then each turn's call and result (a message as it is: a user's turn)."""
    msgs: list[dict[str, Any]] = [user("fix the bug")]
    for n, turn in enumerate(turns):
        if isinstance(turn, dict):
            msgs.append(turn)
            continue
        c, text = turn
        c = {**c, "id": f"c{n}"}
        msgs += [assistant(None, c), result(f"c{n}", text)]
    return msgs


def run(msgs: list[dict[str, Any]], state: SessionState | None = None, cfg=CFG):  # type: ignore[no-untyped-def]
    return break_loops.apply(ctx(msgs, state=state), cfg)


def bash(command: str) -> dict[str, Any]:
    return shell("x", command)


def failing(command: str, error: str = "ModuleNotFoundError: No module named 'foo'") -> Turn:
    return bash(command), f"Traceback (most recent call last):\n  x\n{error}\n[exit code 1]"


PYTEST_FAIL = failing("pytest -q tests/test_a.py")
PYTEST_FAIL_SPACED = failing("pytest  -q   tests/test_a.py")
EDIT_OK = (
    call("x", "Edit", file_path="a.py", old_string="x = 1", new_string="x = 2"),
    "Updated a.py",
)
READ_A = (call("x", "Read", file_path="a.py"), "1\tx = 1\n2\ty = 2")
LS = (bash("ls src"), "a.py\nb.py")
STATUS = (bash("git status"), "On branch main\nnothing to commit\n[exit code 0]")
POLL = (bash("sleep 30; gh run view 7"), "Error: run 7 is still in progress\n[exit code 1]")
EDIT_MISS = (
    call("x", "Edit", file_path="a.py", old_string="x = 1", new_string="x = 3"),
    "Error: String to replace not found in file.",
)
EDIT_BACK = (
    call("x", "Edit", file_path="a.py", old_string="x = 3", new_string="x = 1"),
    "Error: String to replace not found in file.",
)
RUN_FAIL = failing("pytest -q", "AssertionError: 1 != 3")
MALFORMED = (
    call("x", "str_replace_editor", command="str_replace", path="a.py"),
    "ERROR:\nParameter `old_str` is required for command: str_replace.",
)
TODO = (call("x", "TodoWrite", todos=[]), "☐ fix CI failure")
SHOW_TODOS = (call("x", "show_todos"), "- [ ] Phase 5：Docs\n- [x] Phase 4")
READ_B = (call("x", "Read", file_path="src/b.py"), "b")

REJECTED = (
    call("x", "Edit", file_path="specs/lib_spec.py", old_string="a = 1", new_string="a = 2"),
    "User rejected update to specs/lib_spec.py\n 88 books = list_all_books(HOME)\n 89 + # cloud",
)
REMINDER = user("<system-reminder>The todo list is empty.</system-reminder>")
REPLACE_OK = (
    call("x", "str_replace_editor", command="str_replace", path="/w/p.pony", old_str="a",
         new_str="b"),
    "The file /w/p.pony has been edited.",
)  # fmt: skip
VIEW_P = (call("x", "str_replace_editor", command="view", path="/w/p.pony"), "1\ta\n2\tb")


def replace_miss(old: str, path: str = "/w/p.pony") -> Turn:
    """An editor's str_replace whose old text is not in the file (OpenHands' answer)."""
    return (
        call("x", "str_replace_editor", command="str_replace", path=path, old_str=old, new_str="x"),
        f"ERROR: No replacement was performed, old_str `{old}` did not appear verbatim in {path}.",
    )


def edit_miss(old: str) -> Turn:
    """Claude Code's Edit whose old text is not in the file."""
    return (
        call("x", "Edit", file_path="a.py", old_string=old, new_string="y"),
        f"<tool_use_error>String to replace not found in file.\nString: {old}</tool_use_error>",
    )


MULTIPLE = (
    call("x", "str_replace_editor", command="str_replace", path="/w/p.pony", old_str="return t;",
         new_str="x"),
    "ERROR: No replacement was performed. Multiple occurrences of old_str `return t;` in lines "
    "[317, 449]. Please ensure it is unique.",
)  # fmt: skip

LOOPS: list[tuple[str, list[Turn | dict[str, Any]], str, int]] = [
    ("the same failing command", [PYTEST_FAIL] * 3, "repeated_failure", 3),
    ("whitespace drift is the same call", [PYTEST_FAIL, PYTEST_FAIL_SPACED, PYTEST_FAIL],
     "repeated_failure", 3),
    ("reads between failures change nothing", [PYTEST_FAIL, READ_A, PYTEST_FAIL, LS, PYTEST_FAIL],
     "repeated_failure", 3),
    ("a malformed call", [MALFORMED] * 3, "repeated_failure", 3),
    ("the same read, nothing between", [READ_A] * 3, "no_progress", 3),
    ("the same listing, reads between", [LS, READ_A, LS, READ_A, LS], "no_progress", 3),
    ("alternating failing edits and runs", [EDIT_MISS, RUN_FAIL] * 3, "oscillation", 3),
    ("alternating edits back and forth", [EDIT_MISS, EDIT_BACK] * 3, "oscillation", 3),
    ("a harness's reminder between is not the user's turn",
     [PYTEST_FAIL, REMINDER, PYTEST_FAIL, PYTEST_FAIL], "repeated_failure", 3),
    ("edits of one file missing their old text, each different",
     [replace_miss("a.\\n  b"), VIEW_P, replace_miss("a.\\n b"), replace_miss("  316\ta")],
     "repeated_failure", 3),
    ("an edit's other failures between do not end the misses",
     [replace_miss("1\ta"), MULTIPLE, replace_miss("2\tb"), VIEW_P, replace_miss("a b")],
     "repeated_failure", 3),
    ("Claude Code's Edit missing its old text", [edit_miss(f"x = {n}") for n in range(4)],
     "repeated_failure", 4),
]  # fmt: skip


@pytest.mark.parametrize(("name", "turns", "kind", "count"), LOOPS, ids=[x[0] for x in LOOPS])
def test_each_kind_is_found_and_noted_inside_the_newest_repeat(
    name: str, turns: list[Turn | dict[str, Any]], kind: str, count: int
) -> None:
    msgs = conversation(*turns)
    out = run(msgs)
    [item] = out.report["loops"]
    assert (item["kind"], item["count"]) == (kind, count)
    assert out.messages[:-1] == msgs[:-1] and len(out.messages) == len(msgs)  # at the tail only
    last = out.messages[-1]
    assert last["role"] == "tool" and last["tool_call_id"] == msgs[-1]["tool_call_id"]
    body = text_of(last["content"])
    assert body.startswith(text_of(msgs[-1]["content"]))
    assert body.endswith(INJECT_CLOSE) and f"Loop detected ({kind}, {count}×)" in body
    assert item["note"] in body


NOT_LOOPS: list[tuple[str, list[Turn | dict[str, Any]]]] = [
    ("re-running a test after a change", [PYTEST_FAIL, EDIT_OK, PYTEST_FAIL, EDIT_OK, PYTEST_FAIL]),
    ("git status between edits", [STATUS, EDIT_OK, STATUS, EDIT_OK, STATUS]),
    ("git status repeated: a run, not a read", [STATUS] * 4),
    ("polling a build", [POLL] * 5),
    ("twice is not yet a loop", [PYTEST_FAIL] * 2),
    ("a different failure each time", [failing("pytest", f"AssertionError: {n}") for n in "123"]),
    ("a read after a write to it", [READ_A, READ_A, EDIT_OK, READ_A]),
    ("a read whose answer changed", [READ_A, READ_A, (READ_A[0], "1\tx = 2")]),
    ("a listing after a run", [LS, LS, STATUS, LS]),
    ("a plan updated again and again", [TODO] * 4),
    ("the repeat is not the newest result", [PYTEST_FAIL] * 3 + [STATUS]),
    ("two cycles only", [EDIT_MISS, RUN_FAIL] * 2),
    ("the user's turn between rejected edits",
     [REJECTED, user("Reflect the cloud/local distinction."), REJECTED,
      user("without the DB detail"), REJECTED]),
    ("a re-read the user asked for", [READ_A, EDIT_MISS, READ_A, user("still unchanged, try again"),
                                      READ_A]),
    ("edit misses in different files",
     [replace_miss("a", "/w/p.pony"), replace_miss("a", "/w/q.pony"),
      replace_miss("a", "/w/r.pony")]),
    ("edit misses with a successful edit of the file between",
     [replace_miss("a"), replace_miss("b"), REPLACE_OK, replace_miss("c")]),
    ("two edit misses only", [replace_miss("a"), VIEW_P, replace_miss("b")]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "turns"), NOT_LOOPS, ids=[x[0] for x in NOT_LOOPS])
def test_legitimate_repetition_is_not_a_loop(name: str, turns: list[Turn | dict[str, Any]]) -> None:
    msgs = conversation(*turns)
    out = run(msgs)
    assert out.messages is msgs and "loops" not in out.report
    assert out.state.get(break_loops.NAMESPACE) is None


HINTS: list[tuple[str, list[Turn], str]] = [
    ("line numbers of a numbered view copied",
     [replace_miss("case A:\n   316\t    case B:\n   317\t      return t;"), VIEW_P,
      replace_miss("315\t    case A:\n   316\t    case B:"),
      replace_miss("switch(p)\n   313\t  {\n   314\t    case A:")],
     "starts its lines with line numbers (`313` …)"),
    ("a backslash and an n for a line break",
     [replace_miss("return p.\\n  parse(t)"), VIEW_P, replace_miss("p.\\n  parse(t)"),
      replace_miss("return p.\\n        parse(t)")],
     "has `\\n` as two characters (a backslash and an n) and no line break"),
    ("Claude Code's Read arrows", [edit_miss("    12→x = 1\n    13→y = 2")] * 3,
     "starts its lines with line numbers (`12` …)"),
    ("no hint when the text looks right", [edit_miss("x = 1")] * 3, ""),
]  # fmt: skip


@pytest.mark.parametrize(("name", "turns", "hint"), HINTS, ids=[h[0] for h in HINTS])
def test_edits_missing_their_text_get_the_edit_advice_and_what_the_text_shows(
    name: str, turns: list[Turn], hint: str
) -> None:
    [item] = run(conversation(*turns)).report["loops"]
    assert item["kind"] == "repeated_failure" and item["candidates"] == []  # no path receipts
    assert "copy the exact text to replace" in item["note"]
    if "Edit" in item["call"]:  # the same call each time
        assert "this exact call has failed the same way 3 times" in item["note"]
    else:
        assert (
            "3 edits of this file in a row have failed to find the text they replace"
            in (item["note"])
        )
    if hint:
        assert hint in item["note"]
    else:
        assert "The text to replace" not in item["note"]


def test_the_note_escalates_at_3_5_8_and_elides_from_5() -> None:
    body = "\n".join(["Traceback (most recent call last):", *[f"  line {i}" for i in range(20)],
                      "ModuleNotFoundError: No module named 'foo'", "[exit code 1]"])  # fmt: skip
    turn = (bash("pytest -q"), body)
    notes = {}
    for n in (3, 4, 5, 8, 13):
        out = run(conversation(*[turn] * n))
        [item] = out.report["loops"]
        notes[n] = (item["note"], text_of(out.messages[-1]["content"]), item.get("elided", False))
    assert note.thresholds(3)[:5] == [3, 5, 8, 13, 21]
    assert "Next:" in notes[3][0] and "Do not repeat" not in notes[3][0]
    assert notes[4][0].replace("4", "3") == notes[3][0].replace("4", "3")  # same level
    assert "Do not repeat it unchanged" in notes[5][0] and "Stop" not in notes[5][0]
    assert "Stop repeating it" in notes[8][0] and "tell the user" in notes[8][0]
    assert "13 times" in notes[13][0]
    assert not notes[3][2] and not notes[4][2] and notes[5][2] and notes[8][2]
    elided = notes[5][1]
    assert elided.startswith("Traceback (most recent call last):\n" + PLACEHOLDER_PREFIX)
    assert "line 7" not in elided and "[exit code 1]\n\n" + INJECT_OPEN in elided
    assert "Error: `ModuleNotFoundError: No module named 'foo'`" in notes[5][0]  # quoted once
    assert notes[5][0].count("No module named") == 1
    assert "install the missing module" in notes[3][0]
    off = run(conversation(*[turn] * 8), cfg=break_loops.Config(elide_from=0))
    assert "line 7" in text_of(off.messages[-1]["content"])


def _todos(*items: str) -> dict[str, Any]:
    return call("x", "TodoWrite", todos=[{"content": t, "status": "pending"} for t in items])


RECEIPTS: list[tuple[str, list[Turn], dict[str, Any], str, list[str], str | None]] = [
    ("fullwidth colon in the todo", [(_todos("Phase 4：Tests", "Phase 5：Write docs"), "ok")],
     call("x", "complete_step", step="Phase 5: Write docs"), "Error: no matching todo",
     ["Phase 4：Tests", "Phase 5：Write docs"], "Phase 5：Write docs"),
    ("case and spacing drift", [(_todos("Run the Linter", "Ship it"), "ok")],
     call("x", "mark_done", item="run the  linter"), "no matching item: 'run the  linter'",
     ["Run the Linter", "Ship it"], "Run the Linter"),
    ("a plain miss lists the todos", [(_todos("Phase 1", "Phase 2"), "ok")],
     call("x", "complete_step", step="Phase 9"), "Error: no matching todo",
     ["Phase 1", "Phase 2"], None),
    ("a missing file lists the paths seen", [READ_A, READ_B],
     call("x", "open_file", file="src/B.py "), "Error: file not found",
     ["src/b.py", "a.py"], "src/b.py"),
    ("checklist lines of a result", [SHOW_TODOS],
     call("x", "complete_step", step="Phase 5: Docs"), "no matching todo",
     ["Phase 5：Docs", "Phase 4"], "Phase 5：Docs"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "before", "cited", "error", "candidates", "near"),
    RECEIPTS,
    ids=[r[0] for r in RECEIPTS],
)
def test_a_lookup_miss_lists_its_receipts(
    name: str,
    before: list[Turn],
    cited: dict[str, Any],
    error: str,
    candidates: list[str],
    near: str | None,
) -> None:
    out = run(conversation(*before, *[(cited, error)] * 3))
    [item] = out.report["loops"]
    assert item["candidates"] == candidates
    assert item.get("near_miss") == near
    for n, c in enumerate(candidates, 1):
        assert f"\n{n}. `{c}`" in item["note"]
    if near is not None:
        k = candidates.index(near) + 1
        assert f"Near miss: {k} is what you cite" in item["note"]
        assert f"Next: cite todo {k}" in item["note"] or f"Next: cite path {k}" in item["note"]


def test_the_fullwidth_colon_is_named() -> None:
    before = (_todos("Phase 5：Write docs"), "ok")
    cited = (call("x", "complete_step", step="Phase 5: Write docs"), "Error: no matching todo")
    [item] = run(conversation(before, *[cited] * 3)).report["loops"]
    assert "`:` (U+003A) where it has `：` (U+FF1A, fullwidth colon)" in item["note"]


def test_a_note_replays_byte_for_byte_on_later_requests() -> None:
    msgs = conversation(*[PYTEST_FAIL] * 3)
    first = run(msgs)
    forwarded = first.messages
    # the client sends its own transcript back (without the note), plus a new turn
    later = [*copy.deepcopy(msgs), assistant("Let me look."), user("go on")]
    again = run(later, first.state)
    assert again.messages[: len(forwarded)] == forwarded  # the same bytes, in the same place
    assert "loops" not in again.report and again.state == first.state
    # a fourth failure: a new note at the tail, the third's kept as it was
    fourth = [*copy.deepcopy(msgs), *conversation(PYTEST_FAIL)[1:]]
    fourth[-2]["tool_calls"][0]["id"] = fourth[-1]["tool_call_id"] = "c9"
    out = run(fourth, first.state)
    assert out.messages[: len(forwarded)] == forwarded
    assert out.report["loops"][0]["count"] == 4
    assert len(out.state.get(break_loops.NAMESPACE)["notes"]) == 2


def test_a_repeat_at_the_same_escalation_gets_a_short_note_pointing_at_the_full_one() -> None:
    """Each note is replayed in its result on every later request: a full note (the call, the
    error, the receipts) at every repeat of an 18-repeat loop forwarded 8% more than direct.
    The full note comes at each escalation (3, 5, 8 …), a short one between."""
    state, notes = None, {}
    for n in range(3, 10):
        out = run(conversation(*[PYTEST_FAIL] * n), state)
        [item] = out.report["loops"]
        notes[n], state = item["note"], out.state
    full = {n for n, text in notes.items() if "Error: `" in text}
    assert full == {3, 5, 8}
    # message numbers: the user's, then a call and its result per turn (the 3rd result: 7th)
    assert "the same again; the note at message 7 says what to do instead.\n" in notes[4]
    assert "at message 11 says what to do instead. Do not repeat it unchanged" in notes[6]
    assert "at message 11 says what to do instead. Do not repeat it unchanged" in notes[7]
    assert "at message 17 says what to do instead. Stop repeating it" in notes[9]
    assert all(len(notes[n]) < 0.6 * len(notes[3]) for n in (4, 6, 7, 9))
    # without the earlier notes in the state (another replica's first sight): full again
    alone = run(conversation(*[PYTEST_FAIL] * 7)).report["loops"][0]["note"]
    assert "Error: `" in alone


def test_a_note_whose_result_left_the_conversation_is_dropped() -> None:
    first = run(conversation(*[PYTEST_FAIL] * 3))
    out = run([user("a new task")], first.state)
    assert out.state.get(break_loops.NAMESPACE) == {"notes": []}


def test_contract_same_list_idempotent_untouched() -> None:
    plain = [user("hi"), assistant("hello"), user("thanks")]
    assert run(plain).messages is plain and run(plain).state == SessionState()
    msgs = conversation(*[PYTEST_FAIL] * 5)
    before = copy.deepcopy(msgs)
    once = run(msgs)
    assert msgs == before  # the client's messages are never mutated
    twice = run(once.messages, once.state)
    assert twice.messages is once.messages and twice.state == once.state
    assert run(once.messages).messages is once.messages  # without the state: seen by its mark
    assert run(copy.deepcopy(msgs)).messages == once.messages  # deterministic


def test_only_results_of_the_last_turn_get_a_note() -> None:
    msgs = [*conversation(*[PYTEST_FAIL] * 3), assistant("I will stop here.")]
    assert run(msgs).messages is msgs


def test_a_huge_adversarial_result_stays_fast() -> None:
    import time

    line = "Error: " + "no matching todo " * 40_000  # one 680 KB line
    body = "\n".join([line, "- [ ] x" * 1000, "ValueErrorValueError" * 20_000])
    turn = (call("x", "complete_step", step="Phase 5: " + "x" * 250), body)
    started = time.process_time()
    out = run(conversation((_todos("Phase 5：" + "x" * 250), "ok"), *[turn] * 3))
    assert time.process_time() - started < 1.0
    assert out.report["loops"][0]["kind"] == "repeated_failure"
