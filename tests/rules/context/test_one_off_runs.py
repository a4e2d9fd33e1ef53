"""A one-off run's failure (inline code, a request, a scratch script the session made) is what the
agent's latest probe showed: the next run of code closes it. A project's own run stays open until
it passes. Before, every one-off failure stayed open for the rest of the session: 429 at the end of
the corpus's mini-swe-agent runs, nearly all from such runs."""

from __future__ import annotations

import pytest

from rules.context import working_set
from tests.rules.context.test_working_set import TASK, TRACEBACK, ledger_of
from tests.support.factories import assistant, call, result, shell

FAILED = TRACEBACK + "Exit code: 1"
PASSED = "ok\nExit code: 0"
PYTEST_FAILED = (
    "FAILED tests/test_a.py::test_x - AssertionError: boom\n1 failed in 0.2s\nExit code: 1"
)


def _commands(*steps: tuple[str, str]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i, (command, output) in enumerate(steps):
        out += [assistant(None, shell(f"c{i}", command)), result(f"c{i}", output)]
    return out


@pytest.mark.parametrize(
    "probe",
    [
        "python -c \"from pkg import core; core.main()\"",
        "cd /repo && python3 - <<'EOF'\nfrom pkg import core\ncore.main()\nEOF",
        "python <<'EOF'\nfrom pkg import core\nEOF",
        "node -e \"require('./pkg')\"",
        "curl -s http://localhost:8000/api/items",
        "cat > /repo/check_fix.py <<'EOF'\nfrom pkg import core\nEOF\n"
        "cd /repo && python check_fix.py",
    ],
)
def test_a_one_off_failure_closes_when_code_runs_again(probe: str) -> None:
    ledger = ledger_of(
        TASK,
        *_commands((probe, FAILED), ("python -c 'import pkg; print(pkg.__file__)'", PASSED)),
    )
    assert working_set.open_diagnostics(ledger) == []


def test_the_latest_probe_stands_and_a_later_failure_shows() -> None:
    """Two failing probes: the newer one's failure is open, the older one's not; a failing test
    run after them is open on its own."""
    ledger = ledger_of(
        TASK,
        *_commands(
            ("python -c 'import pkg.core'", FAILED),
            ("python -c 'import pkg.other'", TRACEBACK.replace("41", "52") + "Exit code: 1"),
        ),
    )
    assert [d["line"] for d in working_set.open_diagnostics(ledger)] == [52]
    ledger = ledger_of(
        TASK,
        *_commands(("python -c 'import pkg.core'", FAILED), ("pytest tests", PYTEST_FAILED)),
    )
    assert [d["command"] for d in working_set.open_diagnostics(ledger)] == ["pytest tests"]


def test_a_script_made_by_a_file_tool_is_a_one_off() -> None:
    create = call("w", "str_replace_editor", command="create", path="/repo/reproduce.py",
                  file_text="from pkg import core\ncore.main()\n")  # fmt: skip
    ledger = ledger_of(
        TASK,
        assistant(None, create),
        result("w", "File created successfully at: /repo/reproduce.py"),
        *_commands(("cd /repo && python reproduce.py", FAILED), ("python -m pytest tests", PASSED)),
    )
    assert working_set.open_diagnostics(ledger) == []


@pytest.mark.parametrize(
    "project_run",
    [
        "cd /repo && python manage.py test app",  # the project's own script
        "python -m django test app",
        "pytest tests/test_a.py",
        "node --test",  # the project's test files, no inline code nor standard input
        "go install ./...",  # the project's own build installed, no package fetched
        "cargo install --path .",
    ],
)
def test_a_project_run_stays_open_until_it_passes(project_run: str) -> None:
    edit = call("e", "str_replace_editor", command="str_replace", path="/repo/manage.py",
                old_str="a", new_str="b")  # fmt: skip
    ledger = ledger_of(
        TASK,
        assistant(None, edit),
        result("e", "The file /repo/manage.py has been edited."),
        *_commands((project_run, FAILED), ("python -c 'print(1)'", PASSED)),
    )
    assert len(working_set.open_diagnostics(ledger)) == 1


def test_a_command_that_runs_no_code_leaves_a_probe_open() -> None:
    ledger = ledger_of(
        TASK,
        *_commands(("python -c 'import pkg.core'", FAILED), ("git status", PASSED)),
    )
    assert len(working_set.open_diagnostics(ledger)) == 1


PIP_TIMEOUT = (
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.11/ssl.py", line 1167, in read\n'
    "    return self._sslobj.read(len, buffer)\n"
    "TimeoutError: The read operation timed out\nExit code: 2"
)


@pytest.mark.parametrize(
    "install",
    ["cd /testbed && pip install pytest", "python -m pip install -e .", "npm install", "uv add x"],
)
def test_a_failed_install_is_a_one_off(install: str) -> None:
    """An install that timed out is what its attempt showed, no failure of the project: it
    stayed open ("Open: python …/ssl.py:1167 TimeoutError") after the agent ran its tests."""
    ledger = ledger_of(TASK, *_commands((install, PIP_TIMEOUT), ("pytest tests", PYTEST_FAILED)))
    assert [d["command"] for d in working_set.open_diagnostics(ledger)] == ["pytest tests"]
