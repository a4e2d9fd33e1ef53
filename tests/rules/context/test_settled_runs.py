"""A failing run's diagnostics settled by what the agent did next. A project's test run that
could not start (its settings not configured, its settings module or a test label not
importable) says nothing of the code: the agent's later run of code that passes closes it, unless
the failure's place is a file the agent changed. A failure whose place the agent edited after it
closes when a later run of code passes. Before, such failures stayed open to the end, and their
place (``django/conf/__init__.py``) was the next repair target, in 60 of the corpus's 109
mini-swe-agent runs."""

from __future__ import annotations

from typing import Any

import pytest

from rules.context import working_set
from tests.rules.context.test_working_set import TASK, TRACEBACK, ledger_of
from tests.support.factories import assistant, call, result, shell

IMPROPERLY_CONFIGURED = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/testbed/django/__main__.py", line 9, in <module>
    management.execute_from_command_line()
  File "/testbed/django/conf/__init__.py", line 159, in __init__
    raise ImproperlyConfigured("The SECRET_KEY setting must not be empty.")
django.core.exceptions.ImproperlyConfigured: The SECRET_KEY setting must not be empty.
</output>"""
NO_SETTINGS_MODULE = """<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "/testbed/django/conf/__init__.py", line 142, in __init__
    mod = importlib.import_module(self.SETTINGS_MODULE)
  File "<frozen importlib._bootstrap>", line 1140, in _find_and_load_unlocked
ModuleNotFoundError: No module named 'test_sqlite'
</output>"""
NO_LABEL = """<returncode>1</returncode>
<output>
E
======================================================================
ERROR: annotations (unittest.loader._FailedTest.annotations)
----------------------------------------------------------------------
ImportError: Failed to import test module: annotations
Traceback (most recent call last):
  File "/opt/miniconda3/lib/python3.11/unittest/loader.py", line 154, in loadTestsFromName
    module = __import__(module_name)
ModuleNotFoundError: No module named 'annotations'

----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
</output>"""
PASSED = "<returncode>0</returncode>\n<output>\nAll checks passed\n</output>"
FAILED = TRACEBACK + "Exit code: 1"


def _commands(*steps: tuple[str, str], ids: str = "c") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (command, output) in enumerate(steps):
        out += [assistant(None, shell(f"{ids}{i}", command)), result(f"{ids}{i}", output)]
    return out


def _edit(path: str) -> list[dict[str, Any]]:
    edit = call("e", "str_replace_editor", command="str_replace", path=path, old_str="a",
                new_str="b")  # fmt: skip
    return [assistant(None, edit), result("e", f"The file {path} has been edited.")]


VERIFY = "cat > verify.py <<'EOF'\nfrom django.conf import settings\nEOF\npython verify.py"


@pytest.mark.parametrize(
    ("test_run", "output"),
    [
        ("cd /testbed && python -m django test file_storage.tests --settings=x",
         IMPROPERLY_CONFIGURED),
        ("cd /testbed && python -m django test responses.tests --settings=test_sqlite",
         NO_SETTINGS_MODULE),
        ("cd /testbed && python -m django test annotations.tests.AnnotationTest", NO_LABEL),
    ],
)  # fmt: skip
@pytest.mark.parametrize(
    "later",
    [
        VERIFY,  # the agent's own check
        "cd /testbed/tests && python runtests.py responses --settings=test_sqlite",  # the runner
        "cd /testbed && python -m pytest tests/expressions/ -q",  # another runner
    ],
)
def test_a_test_run_that_could_not_start_closes_when_later_code_passes(
    test_run: str, output: str, later: str
) -> None:
    ledger = ledger_of(TASK, *_commands((test_run, output), (later, PASSED)))
    assert working_set.open_diagnostics(ledger) == []
    assert working_set.next_target(ledger) is None


@pytest.mark.parametrize(
    "later",
    [("git diff", PASSED), (VERIFY, FAILED), ("pip install asgiref", PASSED),
     ("python3 --version", PASSED)],
)  # fmt: skip
def test_a_run_that_could_not_start_stays_open_until_code_passes(later: tuple[str, str]) -> None:
    """Nothing that ran code passed since (a look, a failing script, an install, a version
    asked): it stands."""
    test_run = "cd /testbed && python -m django test responses --settings=test_sqlite"
    ledger = ledger_of(TASK, *_commands((test_run, NO_SETTINGS_MODULE), later))
    assert "/testbed/django/conf/__init__.py:142" in {
        f"{d['file']}:{d['line']}" for d in working_set.open_diagnostics(ledger)
    }


def test_a_start_failure_in_a_file_the_agent_changed_stays_open() -> None:
    """The agent edited the settings code, then the runner failed there: its edit is the
    suspect, and a passing script elsewhere does not clear it."""
    test_run = "cd /testbed && python -m django test responses --settings=test_sqlite"
    ledger = ledger_of(
        TASK,
        *_edit("/testbed/django/conf/__init__.py"),
        *_commands((test_run, NO_SETTINGS_MODULE), (VERIFY, PASSED)),
    )
    assert working_set.next_target(ledger) == "/testbed/django/conf/__init__.py:142"


def test_an_edit_of_the_failing_place_then_a_passing_run_closes_it() -> None:
    """A project run crashed in pkg/core.py; the agent edited pkg/core.py, then its check
    passed: the failure was what the old code did."""
    edited = ledger_of(
        TASK,
        *_commands(("cd /repo && python manage.py check", FAILED)),
        *_edit("/repo/pkg/core.py"),
        *_commands(("cd /repo && python -c 'from pkg import core; core.main()'", PASSED), ids="p"),
    )
    assert working_set.open_diagnostics(edited) == []


@pytest.mark.parametrize(
    "tail",
    [
        ("edit", "cd /repo && python -c 'from pkg import core; core.main()'", FAILED),
        ("edit", "git diff", PASSED),  # nothing ran since the edit
        ("no edit", "cd /repo && python -c 'import pkg'", PASSED),
    ],
)
def test_an_edit_without_a_passing_run_or_a_pass_without_an_edit_leaves_it_open(
    tail: tuple[str, str, str],
) -> None:
    edited, command, output = tail
    ledger = ledger_of(
        TASK,
        *_commands(("cd /repo && python manage.py check", FAILED)),
        *(_edit("/repo/pkg/core.py") if edited == "edit" else []),
        assistant(None, shell("p", command)),
        result("p", output),
    )
    assert working_set.next_target(ledger) == "/repo/pkg/core.py:41"


def test_an_edit_before_the_failure_does_not_close_it() -> None:
    ledger = ledger_of(
        TASK,
        *_edit("/repo/pkg/core.py"),
        *_commands(("cd /repo && python manage.py check", FAILED)),
        assistant(None, shell("p", "cd /repo && python -c 'import pkg'")),
        result("p", PASSED),
    )
    assert working_set.next_target(ledger) == "/repo/pkg/core.py:41"


WIDE_FAILED = """FAILED tests/test_a.py::test_x - AssertionError: boom
FAILED tests/test_b.py::TestC::test_y - ValueError: bad
tests/test_a.py:10: AssertionError
2 failed, 3 passed in 0.2s
Exit code: 1"""
NARROW_PASSED = "1 passed in 0.05s\nExit code: 0"


@pytest.mark.parametrize(
    ("narrower", "still_open"),
    [
        ("cd /repo && pytest tests/test_a.py -q", ["tests/test_b.py"]),  # its file, whole
        ("cd /repo && python -m pytest tests/test_a.py::test_x",
         ["tests/test_a.py:10", "tests/test_b.py"]),
        ("cd /repo && pytest tests/test_b.py::TestC", ["tests/test_a.py", "tests/test_a.py:10"]),
        ("pytest /repo/tests/test_a.py", ["tests/test_b.py"]),  # the same file by its full path
        ("cd /repo && pytest tests/test_a.py -k test_x", None),  # a selection: says nothing
        ("cd /other && pytest tests/test_a.py", None),  # another checkout's tests
    ],
)  # fmt: skip
def test_a_narrower_passing_run_closes_the_failures_it_ran(
    narrower: str, still_open: list[str] | None
) -> None:
    """The whole suite failed two tests; the agent fixed one and ran it alone: that one's
    failure is closed in the wider run, the other's stays."""
    ledger = ledger_of(
        TASK, *_commands(("cd /repo && pytest tests", WIDE_FAILED), (narrower, NARROW_PASSED))
    )
    got = sorted(
        f"{d['file']}:{d['line']}" if d["line"] else d["file"]
        for d in working_set.open_diagnostics(ledger)
    )
    assert got == (still_open or ["tests/test_a.py", "tests/test_a.py:10", "tests/test_b.py"])
