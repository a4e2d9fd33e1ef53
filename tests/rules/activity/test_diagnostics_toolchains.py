"""The diagnostics of linters, type checkers and test runners beyond the first toolchains, each
from the output the tool prints: a failure opens a diagnostic at its place, a clean run is a
pass, and a line that only looks alike (an id in a log, a numbered list) opens nothing."""

from __future__ import annotations

from typing import Any

import pytest

from rules.activity import diagnostics

MYPY = """src/app/core.py:12: error: Incompatible types in assignment  [assignment]
src/app/core.py:30:5: error: Name "foo" is not defined  [name-defined]
src/app/core.py:31: note: See https://mypy.rtfd.io
Found 2 errors in 1 file (checked 5 source files)
"""
MYPY_PASS = "Success: no issues found in 5 source files\n"
RUFF_CONCISE = """app/views.py:1:8: F401 [*] `os` imported but unused
app/views.py:22:101: E501 Line too long (120 > 100)
Found 2 errors.
[*] 1 fixable with the `--fix` option.
"""
RUFF_FULL = """F401 [*] `os` imported but unused
 --> app/views.py:1:8
  |
1 | import os
  |        ^^
  |
help: Remove unused import: `os`

E501 Line too long (120 > 100)
  --> app/views.py:22:101
   |

Found 2 errors.
"""
RUFF_PASS = "All checks passed!\n"
FLAKE8 = "./pkg/util.py:7:1: E302 expected 2 blank lines, found 1\n"
VITEST = """ ❯ src/sum.test.ts (2 tests | 1 failed) 5ms
   × adds 1 + 2 to equal 4 3ms

 FAIL  src/sum.test.ts > math > adds 1 + 2 to equal 4
AssertionError: expected 3 to be 4 // Object.is equality
 ❯ src/sum.test.ts:5:15
      3|

 Test Files  1 failed (1)
      Tests  1 failed | 1 passed (2)
"""
VITEST_PASS = """ ✓ src/sum.test.ts (2 tests) 3ms

 Test Files  1 passed (1)
      Tests  2 passed (2)
"""
RSPEC = """Failures:

  1) Calculator adds numbers
     Failure/Error: expect(calc.add(1, 2)).to eq(4)

Finished in 0.01 seconds (files took 0.1 seconds to load)
2 examples, 1 failure

Failed examples:

rspec ./spec/calculator_spec.rb:4 # Calculator adds numbers
"""
RSPEC_PASS = "Finished in 0.01 seconds\n2 examples, 0 failures\n"
PHPUNIT = """PHPUnit 10.5.0 by Sebastian Bergmann and contributors.

There was 1 failure:

1) Tests\\CalculatorTest::testAdd
Failed asserting that 3 matches expected 4.

/app/tests/CalculatorTest.php:12

FAILURES!
Tests: 2, Assertions: 2, Failures: 1.
"""
PHPUNIT_PASS = "OK (2 tests, 2 assertions)\n"
PHPUNIT_RISKY = """PHPUnit 9.6.0 by Sebastian Bergmann and contributors.

There was 1 risky test:

1) Tests\\CalculatorTest::testNothing
This test did not perform any assertions

/app/tests/CalculatorTest.php:21

OK, but incomplete, skipped, or risky tests!
Tests: 3, Assertions: 2, Risky: 1.
"""
RUFF_FIXED = "Found 3 errors (3 fixed, 0 remaining).\n"
JAVAC = """src/main/java/App.java:5: error: cannot find symbol
        foo();
        ^
1 error
"""
MAVEN = """[ERROR] /repo/src/main/java/App.java:[5,9] cannot find symbol
[INFO] BUILD FAILURE
"""
MAVEN_PASS = "[INFO] BUILD SUCCESS\n"
# Kotlin through Gradle: 2.x's form, then 1.x's
KOTLIN = """e: file:///repo/app/src/main/kotlin/Main.kt:3:5 Unresolved reference 'foo'.

FAILURE: Build failed with an exception.

BUILD FAILED in 3s
"""
KOTLIN_OLD = "e: /repo/app/src/main/kotlin/Main.kt: (7, 9): Unresolved reference: bar\n"
CARGO_TEST = """running 1 test
test tests::adds ... FAILED

failures:

---- tests::adds stdout ----
thread 'tests::adds' panicked at src/lib.rs:10:5:
assertion `left == right` failed
  left: 4
 right: 5

failures:
    tests::adds

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
"""
CARGO_TEST_OLD = """---- tests::adds stdout ----
thread 'tests::adds' panicked at 'assertion failed: `(left == right)`', src/lib.rs:12:5

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
"""


@pytest.mark.parametrize(
    ("text", "exit_code", "first"),
    [
        (MYPY, 1, {"tool": "mypy", "file": "src/app/core.py", "line": 12, "code": "assignment"}),
        (RUFF_CONCISE, 1, {"tool": "ruff", "file": "app/views.py", "line": 1, "code": "F401"}),
        (RUFF_FULL, 1, {"tool": "ruff", "file": "app/views.py", "line": 1, "code": "F401"}),
        (FLAKE8, 1, {"tool": "ruff", "file": "./pkg/util.py", "line": 7, "code": "E302"}),
        (VITEST, 1, {"tool": "vitest", "file": "src/sum.test.ts", "line": 5}),
        (RSPEC, 1, {"tool": "rspec", "file": "spec/calculator_spec.rb", "line": 4}),
        (PHPUNIT, 1, {"tool": "phpunit", "file": "/app/tests/CalculatorTest.php", "line": 12}),
        (JAVAC, 1, {"tool": "javac", "file": "src/main/java/App.java", "line": 5}),
        (MAVEN, 1, {"tool": "javac", "file": "/repo/src/main/java/App.java", "line": 5}),
        (KOTLIN, 1, {"tool": "javac", "file": "/repo/app/src/main/kotlin/Main.kt", "line": 3}),
        (KOTLIN_OLD, 1, {"tool": "javac", "file": "/repo/app/src/main/kotlin/Main.kt", "line": 7}),
        # the panic's place: the test's own line
        (CARGO_TEST, 101, {"tool": "cargo test", "file": "src/lib.rs", "line": 10}),
        (CARGO_TEST_OLD, 101, {"tool": "cargo test", "file": "src/lib.rs", "line": 12}),
    ],
)
def test_a_failure_opens_a_diagnostic_at_its_place(
    text: str, exit_code: int, first: dict[str, Any]
) -> None:
    outcome = diagnostics.parse(text, exit_code)
    assert outcome.verdict == "fail"
    assert {k: outcome.diagnostics[0][k] for k in first} == first


def test_each_failure_is_one_diagnostic() -> None:
    assert len(diagnostics.parse(MYPY, 1).diagnostics) == 2  # the note is none
    assert [d["code"] for d in diagnostics.parse(RUFF_FULL, 1).diagnostics] == ["F401", "E501"]
    assert diagnostics.parse(MYPY, 1).diagnostics[1]["line"] == 30
    assert diagnostics.parse(VITEST, 1).diagnostics[0]["message"] == "math > adds 1 + 2 to equal 4"


@pytest.mark.parametrize(
    "text",
    [
        MYPY_PASS,
        RUFF_PASS,
        VITEST_PASS,
        RSPEC_PASS,
        PHPUNIT_PASS,
        MAVEN_PASS,
        PHPUNIT_RISKY,
        RUFF_FIXED,
    ],
)
def test_a_clean_run_passes_without_an_exit_code(text: str) -> None:
    outcome = diagnostics.parse(text, None)
    assert (outcome.verdict, outcome.diagnostics) == ("pass", ())


@pytest.mark.parametrize(
    "text",
    [
        "ABC123 received at 10:02\n --> see the docs\n",  # a place that is no Python file
        "Steps:\n1) open the app\n2) click save\n",  # a numbered list, not a test
        "report.py:3: note: checked\n",
        "E501 is the rule for long lines\n",  # a rule named in prose, with no place after
        "Steps:\n1) Foo::bar is called\n2) then baz\n",  # a numbered list outside PHPUnit's
    ],
)
def test_lines_that_only_look_alike_open_nothing(text: str) -> None:
    assert diagnostics.parse(text, 0).diagnostics == ()


GO_VERBOSE_PASS = """=== RUN   TestParse
    parse_test.go:10: parsed 3 items
--- PASS: TestParse (0.00s)
PASS
ok  	example.com/parse	0.002s
"""
GO_VERBOSE_FAIL = """=== RUN   TestParse
    parse_test.go:27: got 3, want 4
--- FAIL: TestParse (0.00s)
FAIL
FAIL	example.com/parse	0.003s
"""
GO_TEST_BUILD_FAIL = """# example.com/parse [example.com/parse.test]
./parse_test.go:5:2: undefined: parseAll
FAIL	example.com/parse [build failed]
"""
JEST_CONSOLE_PASS = """PASS src/sum.test.js
  ● Console

    console.log
      adding 1 + 2

      at Object.<anonymous> (src/sum.test.js:3:13)

Test Suites: 1 passed, 1 total
Tests:       1 passed, 1 total
"""


@pytest.mark.parametrize("text", [GO_VERBOSE_PASS, JEST_CONSOLE_PASS])
def test_a_passing_runs_log_lines_are_no_failure(text: str) -> None:
    """``go test -v`` prints a passing test's ``t.Log`` as a failure's message is printed
    (``parse_test.go:10: …``), and jest a passing suite's ``console.log`` under ``● Console``:
    a pass, with nothing open (a passing run was a failure at the log line)."""
    outcome = diagnostics.parse(text, 0)
    assert (outcome.verdict, outcome.diagnostics) == ("pass", ())


@pytest.mark.parametrize(
    ("text", "place"),
    [(GO_VERBOSE_FAIL, ("parse_test.go", 27)), (GO_TEST_BUILD_FAIL, ("./parse_test.go", 5))],
)
def test_a_failing_go_tests_lines_are_its_diagnostics(text: str, place: tuple[str, int]) -> None:
    outcome = diagnostics.parse(text, 1)
    assert outcome.verdict == "fail"
    assert place in [(d["file"], d["line"]) for d in outcome.diagnostics]


ESLINT_WARNINGS = """/repo/src/index.js
  3:7  warning  'x' is assigned a value but never used  no-unused-vars

✖ 1 problem (0 errors, 1 warning)
"""


def test_eslint_with_warnings_only_passes() -> None:
    """"✖ 1 problem (0 errors, 1 warning)" is no failed lint: a pass, so the rerun closes the
    errors it fixed (it was a failure, as "✖ 2 problems (2 errors, 0 warnings)" is)."""
    assert diagnostics.parse(ESLINT_WARNINGS, 0).verdict == "pass"
    assert diagnostics.parse(ESLINT_WARNINGS, None).verdict == "pass"


SYNTAX_ERROR = """  File "/repo/pkg/core.py", line 14
    def area(self:
                 ^
SyntaxError: '(' was never closed
"""
INDENTATION_ERROR = """  File "/repo/fix.py", line 2
    y = 2
IndentationError: unexpected indent
"""


@pytest.mark.parametrize(
    ("text", "place", "code"),
    [
        (SYNTAX_ERROR, ("/repo/pkg/core.py", 14), "SyntaxError"),
        (INDENTATION_ERROR, ("/repo/fix.py", 2), "IndentationError"),
    ],
)
def test_a_scripts_own_syntax_error_is_a_diagnostic(
    text: str, place: tuple[str, int], code: str
) -> None:
    """Python reports a syntax error in the script it was asked to run with no "Traceback"
    line before it: the error at its place all the same (it was none, the run's failure
    unplaced)."""
    outcome = diagnostics.parse(text, 1)
    assert outcome.verdict == "fail"
    d = outcome.diagnostics[0]
    assert ((d["file"], d["line"]), d["code"]) == (place, code)


def test_a_syntax_error_inside_a_traceback_is_one_diagnostic() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/repo/run.py", line 1, in <module>\n'
        "    import pkg.core\n" + SYNTAX_ERROR
    )
    found = diagnostics.parse(text, 1).diagnostics
    assert [(d["file"], d["line"], d["code"]) for d in found] == [
        ("/repo/pkg/core.py", 14, "SyntaxError")
    ]


# OpenHands (CodeAct's bash, 0.x) glues its interpreter note to the output's last line
OPENHANDS_NOTE = "[Python Interpreter: /opt/miniconda3/envs/testbed/bin/python]"


def test_openhands_note_glued_to_the_last_line_is_not_output() -> None:
    """"Success: no issues found in 1 source file[Python Interpreter: …]" is mypy's pass (it was
    no pass: the marker ends its line), and an exception's message does not end with the note."""
    assert diagnostics.parse(MYPY_PASS.rstrip("\n") + OPENHANDS_NOTE).verdict == "pass"
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/testbed/monai/engines/workflow.py", line 297, in run\n'
        "    raise NotImplementedError(msg)\n"
        "NotImplementedError: Subclass Evaluator must implement this method." + OPENHANDS_NOTE
    )
    (found,) = diagnostics.parse(traceback, 1).diagnostics
    assert found["message"] == "Subclass Evaluator must implement this method."


PYTEST_COLLECTION_ERROR = """\
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_a.py _______________________
ImportError while importing test module '/repo/tests/test_a.py'.
E   ModuleNotFoundError: No module named 'requests'
=========================== short test summary info ============================
ERROR tests/test_a.py - ModuleNotFoundError: No module named 'requests'
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.12s ===============================
"""


def test_a_pytest_collection_error_is_a_diagnostic() -> None:
    """A test module that fails to import: "ERROR tests/test_a.py - ModuleNotFoundError: …" in
    the summary (a failed run with nothing open: its earlier failure was only superseded)."""
    (found,) = diagnostics.parse(PYTEST_COLLECTION_ERROR, 2).diagnostics
    assert (found["file"], found["code"], found["message"]) == (
        "tests/test_a.py",
        "ModuleNotFoundError",
        "No module named 'requests'",
    )


DOTNET_TEST = """  Failed MyApp.Tests.CalcTests.Divides [12 ms]
  Error Message:
   Assert.Equal() Failure
Expected: 2
Actual:   8
  Stack Trace:
     at MyApp.Tests.CalcTests.Divides() in /src/MyApp.Tests/CalcTests.cs:line 14

Failed!  - Failed:     1, Passed:     9, Skipped:     0, Total:    10, Duration: 41 ms
"""
DOTNET_TEST_PASS = "Passed!  - Failed:     0, Passed:    10, Skipped:     0, Total:    10\n"


def test_a_dotnet_test_failure_is_placed_and_its_pass_closes() -> None:
    (found,) = diagnostics.parse(DOTNET_TEST, 1).diagnostics
    assert (found["tool"], found["file"], found["line"]) == (
        "dotnet test",
        "/src/MyApp.Tests/CalcTests.cs",
        14,
    )
    assert diagnostics.parse(DOTNET_TEST_PASS, None).verdict == "pass"


JEST_SUITE_FAILED = """FAIL src/app.test.js
  ● Test suite failed to run

    SyntaxError: /repo/src/app.js: Unexpected token (3:4)

Test Suites: 1 failed, 1 total
Tests:       0 total
"""
JEST_CUT = """FAIL src/sum.test.js
  ● sum › adds 1 + 2 to equal 3

    expect(received).toBe(expected) // Object.is equality

      at Object.<anonymous> (src/sum.test.js:4:17)
"""


@pytest.mark.parametrize("text", [JEST_SUITE_FAILED, JEST_CUT])
def test_a_jest_failure_without_a_failed_test_count_is_a_diagnostic(text: str) -> None:
    """A suite that failed to run counts no test, and ``npx jest | head`` cuts the summary: its
    ``●`` heading (a note, counted in a failed run) opened nothing, for no fail marker was read."""
    outcome = diagnostics.parse(text, 1)
    assert outcome.verdict == "fail"
    assert [d["message"] for d in outcome.diagnostics if d.get("tool") == "jest"]
