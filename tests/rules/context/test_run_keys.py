"""An open diagnostic closes when what failed runs again and passes, whatever the command line
around it: other flags, another ``| tail -N``, ``python -m pytest`` for ``pytest``, the script
rewritten by a heredoc before it runs. A pass of a wider run (the whole suite, the folder) closes
the narrower one's failures. In the corpus 19 diagnostics stayed open after a clean rerun under
another command line, and the block kept pointing the agent at a fixed failure."""

from __future__ import annotations

import pytest

from rules.activity.run_key import covers, run_key
from rules.context import working_set
from tests.rules.context.test_working_set import TASK, TRACEBACK, ledger_of
from tests.support.factories import assistant, result, shell

FAILED = "FAILED test/core/file_helpers_test.py::test_x - AssertionError: boom\n1 failed in 0.2s"
PASSED = "6 passed in 0.31s"


@pytest.mark.parametrize(
    ("first", "again"),
    [
        (
            "pytest test/core/file_helpers_test.py -xvs 2>&1 | tail -30",
            "pytest test/core/file_helpers_test.py -x 2>&1 | tail -20",
        ),
        (
            "pytest test/core/file_helpers_test.py",
            "python -m pytest test/core/file_helpers_test.py",
        ),
        ("cd /repo && pytest test/core", "cd /repo && timeout 60 pytest test/core -q"),
        ("pytest test/core/file_helpers_test.py::test_x", "pytest test/core"),  # wider
        ("pytest test/core/file_helpers_test.py", "pytest"),  # the whole suite
        # the agent's shell stayed where the cd took it
        ("cd /repo && pytest test/core/file_helpers_test.py", "pytest test/core"),
        (
            "cd /repo && pytest test/core/file_helpers_test.py -x",
            "pytest test/core/file_helpers_test.py",
        ),
        # an option's value is no path to run: `-k test_x`, `-p no:cacheprovider`, `-run TestX`
        ("pytest test/core/file_helpers_test.py -k test_x", "pytest test/core"),
        ("pytest -p no:cacheprovider test/core/file_helpers_test.py", "pytest test/core -q"),
        ("go test -run TestX ./pkg/parse/", "go test ./..."),
        # a runner of the project's environment runs the program it names
        ("uv run pytest test/core/file_helpers_test.py", "uv run pytest"),
        ("poetry run pytest test/core/file_helpers_test.py", "pytest test/core"),
        ("npx jest src/a.test.js", "npx jest"),
        # Bundler runs the program it names; a package manager's `run` is its script's run
        ("bundle exec rspec spec/a_spec.rb", "rspec spec/a_spec.rb"),
        ("npm run test", "npm test"),
        ("npm run-script test -- --ci", "npm test"),
        ("yarn run test", "yarn test"),
        ("pnpm run test", "pnpm test"),
        # a dotted test label under a wider one (Django's, unittest's)
        ("cd /testbed && python tests/runtests.py model_fields.test_durationfield.TestX",
         "python tests/runtests.py model_fields"),
        ("python -m unittest tests.test_calc.CalcTest.test_div", "python -m unittest tests"),
        ("python manage.py test shop.tests.CartTest", "python manage.py test shop"),
    ],
)
def test_a_clean_rerun_closes_the_failure(first: str, again: str) -> None:
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", first)), result("a", FAILED + "\nExit code: 1")],
        *[assistant(None, shell("b", again)), result("b", PASSED + "\nExit code: 0")],
    )
    assert working_set.open_diagnostics(ledger) == []


@pytest.mark.parametrize(
    "again",
    [
        "pytest test/core/file_helpers_test",  # a file's name is no test label
        "pytest test/core/file_helpers_test.py.bak",
        "pytest test/other_test.py",  # other tests
        "cd /elsewhere && pytest test/core/file_helpers_test.py",  # another checkout
        "python other.py",
    ],
)
def test_another_run_passing_leaves_it_open(again: str) -> None:
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", "pytest test/core/file_helpers_test.py")),
          result("a", FAILED + "\nExit code: 1")],
        *[assistant(None, shell("b", again)), result("b", PASSED + "\nExit code: 0")],
    )  # fmt: skip
    assert len(working_set.open_diagnostics(ledger)) == 1


def test_a_failing_rerun_without_the_cd_replaces_the_failure() -> None:
    first, again = (
        "cd /repo && pytest test/core/file_helpers_test.py",
        "pytest test/core/file_helpers_test.py",
    )
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", first)), result("a", FAILED + "\nExit code: 1")],
        *[assistant(None, shell("b", again)), result("b", FAILED + "\nExit code: 1")],
    )
    assert list(ledger["runs"]) == [again]


@pytest.mark.parametrize("again", ["python3 --version", "cd /repo && python -V", "node -v"])
def test_an_interpreter_run_on_nothing_closes_no_script_run(again: str) -> None:
    """``python3 --version`` passing runs no script: the failure of ``python repro.py`` (in
    the place a cd chose, where a run with no cd is taken to be) stays open."""
    first = "cd /repo && python repro.py" if "node" not in again else "node repro.js"
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", first)), result("a", TRACEBACK + "\nExit code: 1")],
        *[assistant(None, shell("b", again)), result("b", "Python 3.11.2\nExit code: 0")],
    )
    assert working_set.open_diagnostics(ledger) != []


def test_a_script_rewritten_then_run_is_the_same_run() -> None:
    write_and_run = "cat > reproduce.py <<'EOF'\nprint('fixed')\nEOF\npython reproduce.py"
    assert run_key(write_and_run) == run_key("python reproduce.py 2>&1 | head -50")
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", "python reproduce.py")), result("a", TRACEBACK)],
        *[assistant(None, shell("b", write_and_run)), result("b", "fixed\nExit code: 0")],
    )
    assert working_set.open_diagnostics(ledger) == []


def test_a_long_script_written_by_a_heredoc_is_keyed_by_its_run() -> None:
    body = "\n".join(f"print('step {i}', {'x' * 40!r})" for i in range(120))  # ~7,000 characters
    write_and_run = f"cd /testbed && cat > repro.py << 'EOF'\n{body}\nEOF\n\npython repro.py"
    assert run_key(write_and_run) == "cd /testbed && python repro.py"


def test_a_pass_on_some_paths_leaves_a_failure_on_everything_open() -> None:
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", "cd /repo && pytest")), result("a", TRACEBACK)],
        *[assistant(None, shell("b", "pytest tests/a.py")), result("b", "1 passed\nExit code: 0")],
        *[assistant(None, shell("c", "cat notes.txt")), result("c", "ok\nExit code: 0")],
    )
    assert [d["code"] for d in working_set.open_diagnostics(ledger)] != []
    assert not covers("pytest tests/a.py", "cd /repo && pytest")
    assert covers("pytest", "cd /repo && pytest tests/a.py")


def test_keys() -> None:
    assert run_key("bash -lc 'cd /t && python3 repro.py --fast'") == "cd /t && python repro.py"
    assert run_key("python -m pkg.core") == "python -m pkg.core"
    assert run_key("python t.py && cat out.log") == "python t.py"
    assert run_key("cd x") == "cd x"  # no program: the command itself
    assert covers("pytest tests", "pytest tests/a.py::test_b")
    assert not covers("pytest tests/b.py", "pytest tests/a.py")
    assert not covers("cd /a && pytest", "cd /b && pytest tests")


PIP_TIMEOUT = """Traceback (most recent call last):
  File "/opt/miniconda3/lib/python3.11/site-packages/pip/_internal/cli/main.py", line 80, in main
    return command.main(cmd_args)
  File "/opt/miniconda3/lib/python3.11/ssl.py", line 1167, in read
    return self._sslobj.read(len, buffer)
TimeoutError: The read operation timed out
"""


def test_no_repair_target_in_an_installed_package_or_the_interpreter() -> None:
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", "python reproduce.py")), result("a", TRACEBACK)],
        *[assistant(None, shell("b", "pip install requests")), result("b", PIP_TIMEOUT)],
    )
    assert len(working_set.open_diagnostics(ledger)) == 2  # both still open
    assert working_set.next_target(ledger) == "/repo/pkg/core.py:41"  # the project's, not ssl.py


@pytest.mark.parametrize(
    "command",
    [
        "python load.py --password hunter2pass",
        "python load.py --db-password hunter2pass --verbose",
        "python x.py --api-key 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    ],
)
def test_a_secret_given_to_a_failing_run_is_not_kept_in_its_key(command: str) -> None:
    """The key drops a flag's name (``--password``); keyed before redaction, the value left
    alone was no longer known for a secret and was stored, logged and shown."""
    ledger = ledger_of(
        TASK, assistant(None, shell("a", command)), result("a", TRACEBACK + "\nExit code: 1")
    )
    (found,) = working_set.open_diagnostics(ledger)
    stored = str(ledger)
    assert "hunter2pass" not in stored and "9f8e7d6c5b4a" not in stored
    assert found["command"].startswith("python load.py" if "load" in command else "python x.py")


def test_pytests_quiet_summary_is_a_pass_without_an_exit_code() -> None:
    """``pytest -q`` prints no ``=====`` banner, and Claude Code's Bash result no exit code: the
    bare summary line says the run passed."""
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", "pytest test/core/file_helpers_test.py")),
          result("a", FAILED)],
        *[assistant(None, shell("b", "pytest -q")), result("b", "...\n3 passed in 0.02s")],
    )  # fmt: skip
    assert working_set.open_diagnostics(ledger) == []
    still = ledger_of(
        TASK,
        *[assistant(None, shell("a", "pytest test/core/file_helpers_test.py")),
          result("a", FAILED)],
        *[assistant(None, shell("b", "pytest -q")), result("b", "F..\n1 failed, 2 passed in 0.1s")],
    )  # fmt: skip
    assert len(working_set.open_diagnostics(still)) == 1


@pytest.mark.parametrize(
    "command",
    ["awk 'NR<80' ci.log", "git show HEAD:ci/last_run.txt", "jq -r .log report.json",
     "strings app.log | tail -40", "cd /repo && grep -n FAILED ci.log"],
)  # fmt: skip
def test_a_failure_a_log_shows_is_no_run_of_ours(command: str) -> None:
    """A view of an old log or a file that quotes a failure: nothing ran, nothing opens."""
    ledger = ledger_of(
        TASK, assistant(None, shell("a", command)), result("a", FAILED + "\nExit code: 0")
    )
    assert working_set.open_diagnostics(ledger) == []


def test_a_long_heredoc_then_its_run_is_a_run() -> None:
    """``cat > fix.py <<'EOF'`` … thousands of characters … ``EOF`` then ``python fix.py``: the
    line runs code after the view of its first program."""
    body = "\n".join(f"line_{i} = {i}" for i in range(400))
    command = f"cat > fix.py << 'EOF'\n{body}\nEOF\n\npython fix.py"
    ledger = ledger_of(
        TASK, assistant(None, shell("a", command)), result("a", TRACEBACK + "\nExit code: 1")
    )
    assert len(working_set.open_diagnostics(ledger)) == 1


@pytest.mark.parametrize(
    ("failed", "passed", "closes"),
    [
        ("pytest -k test_login", "pytest -k test_signup", False),
        ("pytest -k test_login", "pytest", True),  # the whole suite ran it too
        ("pytest tests/a.py -k 'login or signup'", "pytest tests -k 'login or signup'", True),
        ("cargo test -p billing", "cargo test -p auth", False),
        ("cargo test --test api_integration", "cargo test --test unit_smoke", False),
        ("go test -run TestParse ./...", "go test -run TestFormat ./...", False),
        ("npx jest --testPathPattern checkout", "npx jest --testPathPattern cart", False),
        ("uv run --extra test pytest tests/a.py", "uv run pytest tests/a.py", True),
    ],
)
def test_a_selector_of_tests_keeps_runs_of_other_tests_apart(
    failed: str, passed: str, closes: bool
) -> None:
    a, b = run_key(failed), run_key(passed)
    assert (a == b or covers(b, a)) is closes, (a, b)


def test_runners_within_runners_are_read_to_a_bound() -> None:
    """``npx npx … jest``: each runner read through is a level, as a shell string is (a line of
    thousands of them recursed past the interpreter's limit)."""
    assert run_key("uv run npx jest src/a.test.js") == "jest src/a.test.js"
    assert run_key("npx " * 3_000 + "jest").startswith("npx npx")  # no key: the line itself


def test_a_commit_is_one_run_whatever_its_message() -> None:
    """A commit a pre-commit hook refused (ruff's findings) and the next commit, under another
    message or ``--amend``, are one run: the message is no selector of tests (``pytest -m`` is)."""
    hook = "ruff......Failed\nspecs/cli_spec.py:143:89: E501 Line too long (97 > 88)\n"
    ledger = ledger_of(
        TASK,
        *[assistant(None, shell("a", 'git commit -m "feat: error handling"')),
          result("a", hook + "Exit code: 1")],
        *[assistant(None, shell("b", 'git commit --amend -m "feat: clearer errors"')),
          result("b", "[main 1a2b3c4] feat: clearer errors\nExit code: 0")],
    )  # fmt: skip
    assert working_set.open_diagnostics(ledger) == []
    assert run_key('git commit -m "a b"') == run_key("git commit -m c") == "git commit"
    assert run_key("pytest -m slow") != run_key("pytest -m fast")
