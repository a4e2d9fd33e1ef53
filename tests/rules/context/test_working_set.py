"""working_set: diagnostics per toolchain, the ledger (goal, changed files, writes, diagnostics
superseded and closed, plan, next target), the rendered section, and the rule's contract."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from rules.activity import diagnostics
from rules.base import SessionState
from rules.context import plan_ledger, working_set
from tests.support.factories import assistant, call, ctx, result, shell, system, user

CFG = working_set.Config()

PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_calc.py .F.                                                    [100%]

=================================== FAILURES ===================================
___________________________________ test_div ___________________________________
    def test_div():
>       assert div(4, 2) == 3
E       assert 2.0 == 3

tests/test_calc.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_div - assert 2.0 == 3
========================= 1 failed, 2 passed in 0.05s ==========================
"""
PYTEST_PASS = "collected 3 items\n\ntests/test_calc.py ...\n\n===== 3 passed in 0.02s =====\n"
UNITTEST_FAIL = """F.
======================================================================
FAIL: test_div (tests.test_calc.CalcTest.test_div)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/repo/tests/test_calc.py", line 9, in test_div
    self.assertEqual(div(4, 2), 3)
AssertionError: 2.0 != 3

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
"""
TRACEBACK = """Traceback (most recent call last):
  File "reproduce.py", line 3, in <module>
    main()
  File "/repo/pkg/core.py", line 41, in main
    raise ValueError("bad width")
ValueError: bad width
"""
TRACEBACK_IN_LIBRARY = """Traceback (most recent call last):
  File "/repo/app/main.py", line 7, in <module>
    import numpy
  File "/usr/lib/python3.11/site-packages/numpy/__init__.py", line 12, in <module>
    raise ImportError("broken build")
ImportError: broken build
"""
GO_TEST = """--- FAIL: TestParse (0.00s)
    parse_test.go:27: got 3, want 4
FAIL
FAIL\texample.com/p\t0.004s
"""
GO_BUILD = "# example.com/p\n./main.go:14:2: undefined: foo\n"
CARGO = """error[E0425]: cannot find value `x` in this scope
 --> src/main.rs:3:13
  |
3 |     let y = x + 1;
  |             ^ not found in this scope

error: could not compile `demo` due to previous error
"""
CARGO_TEST = (
    "---- tests::adds stdout ----\nthread panicked\n\ntest result: FAILED. 1 passed; 1 failed\n"
)
TSC = "src/app.ts(7,5): error TS2322: Type 'string' is not assignable to type 'number'.\n"
TSC_PRETTY = "src/app.ts:7:5 - error TS2322: Type 'string' is not assignable to type 'number'.\n"
ESLINT = """/repo/src/index.js
  3:7  error  'unused' is assigned a value but never used  no-unused-vars

✖ 1 problem (1 error, 0 warnings)
"""
JEST = """FAIL src/sum.test.js
  ● sum › adds numbers

    expect(received).toBe(expected)

      at Object.<anonymous> (src/sum.test.js:5:21)

Tests:       1 failed, 1 total
"""
GCC = (
    "main.c: In function 'main':\nmain.c:5:3: error: 'y' undeclared (first use in this function)\n"
)
CLANG = "lib/util.cpp:12:10: fatal error: 'missing.h' file not found\n"
DOTNET = (
    "Program.cs(12,17): error CS0017: Program has more than one entry point defined. "
    "[/src/App.csproj]\n\nBuild FAILED.\n"
)
MSBUILD = "MainWindow.xaml(8,5): error MC3089: The object 'Grid' already has a child. [/a.csproj]\n"


@pytest.mark.parametrize(
    ("text", "exit_code", "verdict", "expected"),
    [
        (PYTEST_FAIL, 1, "fail", {"tool": "pytest", "file": "tests/test_calc.py", "line": 12}),
        (PYTEST_PASS, 0, "pass", None),
        (UNITTEST_FAIL, 1, "fail", {"tool": "unittest", "code": "FAIL"}),
        (
            TRACEBACK,
            1,
            "fail",
            {
                "tool": "python",
                "file": "/repo/pkg/core.py",
                "line": 41,
                "code": "ValueError",
                "message": "bad width",
            },
        ),
        (TRACEBACK_IN_LIBRARY, 1, "fail", {"file": "/repo/app/main.py", "line": 7}),
        (GO_TEST, 1, "fail", {"tool": "go", "message": "TestParse (0.00s)"}),
        (GO_BUILD, 1, "fail", {"tool": "go build", "file": "main.go", "line": 14}),
        (CARGO, 101, "fail", {"tool": "cargo", "file": "src/main.rs", "line": 3, "code": "E0425"}),
        (CARGO_TEST, 101, "fail", {"tool": "cargo test", "message": "tests::adds"}),
        (TSC, 2, "fail", {"tool": "tsc", "file": "src/app.ts", "line": 7, "code": "TS2322"}),
        (TSC_PRETTY, 2, "fail", {"tool": "tsc", "file": "src/app.ts", "code": "TS2322"}),
        (
            ESLINT,
            1,
            "fail",
            {"tool": "eslint", "file": "/repo/src/index.js", "line": 3, "code": "no-unused-vars"},
        ),
        (JEST, 1, "fail", {"tool": "jest", "file": "src/sum.test.js"}),
        (GCC, 1, "fail", {"tool": "gcc", "file": "main.c", "line": 5}),
        (CLANG, 1, "fail", {"tool": "gcc", "file": "lib/util.cpp", "line": 12}),
        (DOTNET, 1, "fail", {"tool": "dotnet", "file": "Program.cs", "line": 12, "code": "CS0017"}),
        (MSBUILD, 1, "fail", {"tool": "dotnet", "file": "MainWindow.xaml", "code": "MC3089"}),
        ("ok  \texample.com/p\t0.003s\n", 0, "pass", None),
        ("hello world\n", 0, "pass", None),
    ],
)
def test_diagnostics_per_toolchain(
    text: str, exit_code: int, verdict: str, expected: dict[str, Any] | None
) -> None:
    outcome = diagnostics.parse(text, exit_code)
    assert outcome.verdict == verdict
    if expected is None:
        assert outcome.diagnostics == ()
    else:
        first = outcome.diagnostics[0]
        assert {k: first[k] for k in expected} == expected
        assert set(first) == {"tool", "file", "line", "code", "message"}


@pytest.mark.parametrize(
    ("text", "test_failure", "build_error"),
    [
        (PYTEST_FAIL, True, False),
        (CARGO, False, True),
        (TSC, False, True),
        (TRACEBACK, False, False),
        (PYTEST_PASS, False, False),
    ],
)
def test_outcome_kinds(text: str, test_failure: bool, build_error: bool) -> None:
    outcome = diagnostics.parse(text, 1 if test_failure or build_error else 0)
    assert (outcome.is_test_failure, outcome.is_build_error) == (test_failure, build_error)


def run(*messages: dict[str, Any], state: SessionState | None = None) -> Any:
    return working_set.apply(ctx(*messages, state=state), CFG)


def ledger_of(*messages: dict[str, Any]) -> dict[str, Any]:
    return run(*messages).state.get(working_set.NAMESPACE)


TASK = user("Fix the division bug in calc.py")


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        # Goal, and the latest instruction only when it differs.
        ([TASK], {"goal": "Fix the division bug in calc.py", "instruction": None}),
        (
            [TASK, assistant("ok"), user("Also add a test")],
            {"goal": "Fix the division bug in calc.py", "instruction": "Also add a test"},
        ),
        # A turn that only says yes answers the agent: the instruction it answered stands.
        *[
            (
                [
                    TASK,
                    assistant("ok"),
                    user("Migrate the config loader to TOML"),
                    assistant("Should I keep JSON support?"),
                    user(yes),
                ],
                {
                    "goal": "Fix the division bug in calc.py",
                    "instruction": "Migrate the config loader to TOML",
                },
            )
            for yes in ("yes", "ok, go ahead", "sí, adelante", "はい、続けて", "好的", "네 계속해")
        ],
        # Claude Code's interruption mark, then the user's correction: the correction counts
        (
            [
                TASK,
                assistant("Editing cli.py"),
                user("[Request interrupted by user for tool use]\nNo - put the flag in export.py"),
            ],
            {
                "goal": "Fix the division bug in calc.py",
                "instruction": "No - put the flag in export.py",
            },
        ),
        (
            [TASK, assistant("Editing cli.py"), user("[Request interrupted by user]")],
            {"goal": "Fix the division bug in calc.py", "instruction": None},
        ),
        # mini-swe-agent's answer to a call it could not parse is no instruction
        (
            [
                TASK,
                assistant("bad call"),
                user("Tool call error:\n\n<error>\nError parsing tool call arguments\n</error>"),
            ],
            {"goal": "Fix the division bug in calc.py", "instruction": None},
        ),
        (
            [TASK, assistant("Shall I?"), user("yes, but keep JSON support too")],
            {
                "goal": "Fix the division bug in calc.py",
                "instruction": "yes, but keep JSON support too",
            },
        ),
        # An agent harness's own text in the user's turn is not the goal: Claude Code's
        # <system-reminder> block before the prompt, Codex's <environment_context> turn.
        (
            [
                user("<system-reminder>\nAttribution for git commits…\n</system-reminder>"),
                user("<environment_context>\n<cwd>/w</cwd>\n</environment_context>"),
                user("<system-reminder>x</system-reminder>\nFix the division bug in calc.py"),
            ],
            {"goal": "Fix the division bug in calc.py", "instruction": None},
        ),
        # Changed files from file tools and shell writes; failed writes do not count.
        (
            [
                TASK,
                assistant(None, call("c1", "Edit", file_path="calc.py", old="a", new="b")),
                result("c1", "The file calc.py has been updated."),
                assistant(None, shell("c2", "cat > notes.md <<'EOF'\nhi\nEOF")),
                result("c2", "<returncode>0</returncode>\n<output>\n</output>"),
                assistant(None, shell("c3", "sed -i 's/a/b/' ./setup.cfg")),
                result("c3", "<returncode>2</returncode>\n<output>sed: can't read</output>"),
            ],
            {"changed": ["calc.py", "notes.md"]},
        ),
        # Plan items from a todo tool.
        (
            [
                TASK,
                assistant(
                    None,
                    call(
                        "p1",
                        "TodoWrite",
                        todos=[
                            {"content": "Phase 5： fix division", "status": "in_progress"},
                            {"content": "Add tests", "status": "pending"},
                        ],
                    ),
                ),
                result("p1", "Todos updated"),
            ],
            {
                "plan": [
                    {"text": "Phase 5： fix division", "status": "in_progress"},
                    {"text": "Add tests", "status": "pending"},
                ]
            },
        ),
    ],
)
def test_ledger(messages: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    ledger = ledger_of(*messages)
    assert {k: ledger.get(k) for k in expected} == expected


def test_a_plan_the_harness_refused_leaves_the_plan_as_it_was() -> None:
    """Claude Code answers a TodoWrite that fails its schema with ``is_error``: nothing was
    written, so the plan stays (it had become ``[Find bug: completed]``, "Fix bug" gone)."""
    todos = [
        {"content": "Find bug", "status": "in_progress", "activeForm": "Finding"},
        {"content": "Fix bug", "status": "pending", "activeForm": "Fixing"},
    ]
    refused = {
        **result("p2", "<tool_use_error>InputValidationError: `todos[0].activeForm` is missing"),
        "is_error": True,
    }
    ledger = ledger_of(
        TASK,
        assistant(None, call("p1", "TodoWrite", todos=todos)),
        result("p1", "Todos have been modified successfully."),
        assistant(
            None, call("p2", "TodoWrite", todos=[{"content": "Find bug", "status": "completed"}])
        ),
        refused,
    )
    assert ledger["plan"] == [
        {"text": "Find bug", "status": "in_progress"},
        {"text": "Fix bug", "status": "pending"},
    ]


def test_plan_step_cited_in_another_width_updates_the_item() -> None:
    plan = assistant(
        None,
        call(
            "p1",
            "TodoWrite",
            todos=[
                {"content": "Phase 5： fix division", "status": "in_progress"},
                {"content": "Add tests", "status": "pending"},
            ],
        ),
    )
    update = assistant(
        None, call("p2", "update_plan", step="phase 5: fix division", status="completed")
    )
    ledger = ledger_of(TASK, plan, result("p1", "ok"), update, result("p2", "ok"))
    assert ledger["plan"] == [
        {"text": "Phase 5： fix division", "status": "completed"},
        {"text": "Add tests", "status": "pending"},
    ]


def test_newer_run_supersedes_and_passing_run_closes() -> None:
    first = [TASK, assistant(None, shell("r1", "pytest -x")), result("r1", PYTEST_FAIL)]
    ledger = ledger_of(*first)
    assert working_set.open_diagnostics(ledger)[0]["file"] == "tests/test_calc.py"
    assert working_set.next_target(ledger) == "tests/test_calc.py:12"

    other = PYTEST_FAIL.replace("tests/test_calc.py:12", "tests/test_calc.py:30")
    second = [*first, assistant(None, shell("r2", "pytest -x")), result("r2", other)]
    ledger = ledger_of(*second)
    assert working_set.next_target(ledger) == "tests/test_calc.py:30"
    assert len(ledger["runs"]) == 1  # the older failure of the same command is gone

    crash = [*second, assistant(None, shell("r3", "python reproduce.py")), result("r3", TRACEBACK)]
    ledger = ledger_of(*crash)
    assert working_set.next_target(ledger) == "/repo/pkg/core.py:41"  # newest failure first

    closed = [*crash, assistant(None, shell("r4", "pytest -x")), result("r4", PYTEST_PASS)]
    ledger = ledger_of(*closed)
    assert [d["command"] for d in working_set.open_diagnostics(ledger)] == ["python reproduce.py"]


def test_render_section_is_deterministic_and_capped() -> None:
    messages = [
        TASK,
        assistant(None, shell("r1", "pytest -x")),
        result("r1", PYTEST_FAIL),
        assistant(None, call("c1", "Write", file_path="calc.py", content="x")),
    ]
    state = run(*messages, result("c1", "ok")).state
    text = working_set.render_section(state)
    assert text == working_set.render_section(state)
    assert text.startswith("Working set:\n- Goal: Fix the division bug in calc.py")
    assert "- Changed files: calc.py" in text
    assert "- Next repair target: tests/test_calc.py:12" in text
    assert len(working_set.render_section(state, max_tokens_hint=20)) <= 80
    assert working_set.render_section(SessionState()) is None


@pytest.mark.parametrize(
    "messages",
    [
        [system(), TASK],
        [TASK, assistant(None, shell("r1", "pytest -x")), result("r1", PYTEST_FAIL)],
        [TASK, assistant(None, call("c1", "Edit", path="a.py")), result("c1", "done")],
    ],
)
def test_messages_pass_unchanged_and_idempotent(messages: list[dict[str, Any]]) -> None:
    context = ctx(messages)
    once = working_set.apply(context, CFG)
    assert once.messages is messages  # the very same list: byte-identical output
    twice = working_set.apply(context.evolve(state=once.state), CFG)
    assert twice.messages is messages
    assert twice.state.get(working_set.NAMESPACE) == once.state.get(working_set.NAMESPACE)


def test_ledger_outlives_the_agents_own_truncation() -> None:
    full = [
        TASK,
        assistant(None, call("c1", "Edit", file_path="a.py")),
        result("c1", "ok"),
        assistant(None, call("c2", "Edit", file_path="b.py")),
        result("c2", "ok"),
    ]
    state = run(*full).state
    truncated = [TASK, *full[3:]]
    ledger = run(*truncated, state=state).state.get(working_set.NAMESPACE)
    assert ledger["changed"] == ["a.py", "b.py"]


def test_same_failure_from_two_commands_is_one_open_item() -> None:
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", "python reproduce.py")), result("a", TRACEBACK)],
        *[assistant(None, shell("b", "python -m pkg.core")), result("b", TRACEBACK)],
    )
    assert len(ledger["runs"]) == 2
    assert [d["command"] for d in working_set.open_diagnostics(ledger)] == ["python -m pkg.core"]


# (command, kind, target, files written): a write followed by a run, or a run whose output is
# captured, is a run (its output keeps its diagnostics) and still names the files it wrote.
SHELL_CLASSES = [
    ("cat > notes.md <<'EOF'\nhi > there | tee x\nEOF", "write", "notes.md", ("notes.md",)),
    ("sed -i 's/a/b/' ./setup.cfg", "write", "setup.cfg", ("setup.cfg",)),
    ("mkdir -p d && cat > d/x.py <<EOF\nprint(1)\nEOF", "write", "d/x.py", ("d/x.py",)),
    ("echo hi | tee -a log.txt", "write", "log.txt", ("log.txt",)),
    ("cat foo.py 2>/dev/null", "read", "foo.py", ()),
    (
        "cat > t.py <<'EOF'\nimport pkg\nEOF\npython t.py",
        "run",
        "cat > t.py <<'EOF' import pkg EOF python t.py",
        ("t.py",),
    ),
    (
        "python -m pytest tests 2>&1 | tee /tmp/log.txt",
        "run",
        "python -m pytest tests 2>&1 | tee /tmp/log.txt",
        ("/tmp/log.txt",),
    ),
    ("python gen.py > out.txt", "run", "python gen.py > out.txt", ("out.txt",)),
    (
        "sed -i 's/a/b/' calc.py && python -m pytest -x",
        "run",
        "sed -i 's/a/b/' calc.py && python -m pytest -x",
        ("calc.py",),
    ),
    ("python - <<'EOF'\nopen('x', 'w')\nEOF", "run", "python - <<'EOF' open('x', 'w') EOF", ()),
    ("pytest -x 2>/dev/null", "run", "pytest -x 2>/dev/null", ()),
    # perl's and ruby's in-place edit, as sed's
    ("perl -pi -e 's/a/b/' src/a.py", "write", "src/a.py", ("src/a.py",)),
    ("perl -i.bak -pe 's/a/b/g' a.py b.py", "write", "a.py", ("a.py", "b.py")),
    ("perl -0777 -i -pe 's/a\\nb/c/' a.py", "write", "a.py", ("a.py",)),
    ("ruby -pi -e 'gsub(/a/, \"b\")' a.rb", "write", "a.rb", ("a.rb",)),
    ("perl -ne 'print if /x/' a.py", "run", "perl -ne 'print if /x/' a.py", ()),
    ("perl -MFile::Find -e 'find(sub {}, q(.))'", "run",
     "perl -MFile::Find -e 'find(sub {}, q(.))'", ()),
]


@pytest.mark.parametrize(("command", "kind", "target", "writes"), SHELL_CLASSES)
def test_shell_commands_are_classified(
    command: str, kind: str, target: str, writes: tuple[str, ...]
) -> None:
    from rules.activity.observations import classify

    action = classify("bash", orjson.dumps({"command": command}).decode())
    assert (action.kind, action.target, action.writes) == (kind, target, writes)


@pytest.mark.parametrize(
    "command",
    [
        "cat > repro.py <<'EOF'\nimport pkg\npkg.run()\nEOF\npython repro.py",
        "python -m pytest tests 2>&1 | tee /tmp/log.txt",
    ],
)
def test_failing_output_of_a_write_then_run_is_an_open_diagnostic(command: str) -> None:
    ledger = ledger_of(TASK, assistant(None, shell("r1", command)), result("r1", TRACEBACK))
    assert working_set.next_target(ledger) == "/repo/pkg/core.py:41"
    written = "repro.py" if "repro" in command else "/tmp/log.txt"
    assert ledger["changed"] == [written]  # the file it wrote is still a changed file


def test_results_read_long_ago_are_not_read_again() -> None:
    # More results than any window of remembered keys: the failure closed long ago stays closed.
    history = [TASK, assistant(None, shell("f0", "pytest")), result("f0", PYTEST_FAIL)]
    for i in range(2100):
        if i == 150:  # closed by a pass, itself read long ago
            history += [assistant(None, shell("p", "pytest")), result("p", PYTEST_PASS)]
        history += [assistant(None, shell(f"r{i}", f"cat src/f{i}.py")), result(f"r{i}", "x")]
    first = run(*history)
    assert working_set.open_diagnostics(first.state.get(working_set.NAMESPACE)) == []
    second = run(*history, user("next"), state=first.state)
    assert working_set.open_diagnostics(second.state.get(working_set.NAMESPACE)) == []
    # … and a client that drops its oldest turns does not bring them back either.
    third = run(TASK, *history[-40:], user("next"), state=second.state)
    assert third.state.get(working_set.NAMESPACE) == second.state.get(working_set.NAMESPACE)


def test_a_result_arriving_before_a_newer_one_is_still_read() -> None:
    both = assistant(None, shell("a", "pytest -x"), shell("b", "ls"))
    placeholder = result("a", "[ctxproxy: no result for call a]")
    first = run(TASK, both, placeholder, result("b", "a.py"))
    assert working_set.open_diagnostics(first.state.get(working_set.NAMESPACE)) == []
    second = run(TASK, both, result("a", PYTEST_FAIL), result("b", "a.py"), state=first.state)
    assert working_set.next_target(second.state.get(working_set.NAMESPACE)) == (
        "tests/test_calc.py:12"
    )


def test_text_the_proxy_wrote_is_not_the_users_instruction() -> None:
    orphan = user("[ctxproxy: tool result for call c9 had no matching call] stale output")
    ledger = ledger_of(TASK, assistant("ok"), user("Also add a test"), assistant("ok"), orphan)
    assert ledger["instruction"] == "Also add a test"
    ledger = ledger_of(orphan, TASK, assistant("ok"), orphan)
    assert (ledger["goal"], ledger["instruction"]) == ("Fix the division bug in calc.py", None)


def test_section_tokens_caps_the_rendered_section() -> None:
    cfg = working_set.Config(section_tokens=50)
    messages = [
        user("x" * 1000),
        assistant(None, shell("r1", "pytest -x")),
        result("r1", PYTEST_FAIL),
    ]
    state = working_set.apply(ctx(messages), cfg).state
    assert len(working_set.render_section(state)) <= 50 * 4  # as inject calls it
    assert len(working_set.render_section(state, max_tokens_hint=100)) <= 100 * 4


def test_plan_updates_matching_no_item_are_bounded() -> None:
    messages = [TASK]
    for i in range(200):
        step = f"unrelated step {i:03d} done"
        messages += [assistant(None, call(f"p{i}", "update_plan", step=step, status="completed"))]
        messages += [result(f"p{i}", "ok")]
    plan = ledger_of(*messages)["plan"]
    assert len(plan) <= plan_ledger.MAX_PLAN_ITEMS
    assert plan[-1]["text"] == "unrelated step 199 done"


def raw_call(call_id: str, command: str) -> dict[str, Any]:
    arguments = json.dumps({"command": command})  # orjson refuses lone surrogates
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def test_lone_surrogates_are_tolerated() -> None:
    bad = "\udcff"
    ledger = ledger_of(
        user(f"fix {bad} please"),
        assistant(None, raw_call("c1", f"cat > a{bad}.py <<EOF\nx\nEOF\npython a{bad}.py")),
        result("c1", TRACEBACK.replace("bad width", f"bad {bad}")),
    )
    orjson.dumps(ledger)  # storable
    assert working_set.next_target(ledger) == "/repo/pkg/core.py:41"


def test_a_cancelled_plan_item_is_not_shown_pending() -> None:
    todos = [{"content": "Fix division", "status": "completed"},
             {"content": "Port to Rust", "status": "cancelled"},
             {"content": "Add tests", "status": "pending"}]  # fmt: skip
    state = run(TASK, assistant(None, call("p1", "TodoWrite", todos=todos)),
                result("p1", "Todos have been modified successfully.")).state  # fmt: skip
    text = working_set.render_section(state) or ""
    assert "[x] Fix division" in text and "[-] Port to Rust" in text and "[ ] Add tests" in text


def test_openhands_task_tracker_plan_is_the_plan() -> None:
    tasks = [{"id": "1", "title": "Reproduce the bug", "status": "done"},
             {"id": "2", "title": "Fix the parser", "status": "in_progress", "notes": "x"},
             {"id": "3", "title": "Run the tests", "status": "todo"}]  # fmt: skip
    state = run(
        TASK,
        assistant(None, call("p1", "task_tracker", command="plan", task_list=tasks)),
        result("p1", "Task list has been updated with 3 items."),
        assistant(None, call("p2", "task_tracker", command="view")),
        result("p2", "# Task List\n1. [x] Reproduce the bug"),
    ).state
    text = working_set.render_section(state) or ""
    assert "[x] Reproduce the bug" in text and "[~] Fix the parser" in text
    assert "[ ] Run the tests" in text
