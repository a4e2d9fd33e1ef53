"""run_class: what a shell run does, by the first program its command runs past the setup."""

from __future__ import annotations

import shlex
import time

import pytest

from rules.activity.run_class import MAX_COMMAND_CHARS, MAX_NESTING, run_class


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat a.py b.py", "view"),
        ("sed -n 1,80p src/x.py | nl", "view"),
        ("cd /repo && grep -rn parse_expr src", "search"),
        ("find . -name '*.py' | head", "search"),
        ("export PYTHONPATH=. ; python -m pytest -q", "build"),
        ("FOO=1 sudo make test", "build"),  # assignments and wrappers skipped
        ("source .venv/bin/activate && pytest tests/test_x.py", "build"),
        ("git log --oneline | grep fix", "other"),  # a pipeline: its first program
        ("git status --short", "other"),
        ("", "other"),
        ('echo "unterminated', "other"),
    ],
)
def test_the_first_program_past_the_setup_names_the_class(command: str, expected: str) -> None:
    assert run_class(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("bash -lc 'grep -rn foo src'", "search"),
        ('sh -c "cd x && cat a.py"', "view"),
        ("bash -c \"sh -c 'rg foo'\"", "search"),  # one shell's string inside another's
        ("bash run_tests.sh", "build"),  # a script, not a -c string
        ("powershell -NoProfile -Command Get-Content a.py", "view"),
        ("cmd.exe /c findstr foo *.py", "search"),
        ("timeout 60 pytest -q", "build"),
        ("timeout -s KILL 5m make test", "build"),
        ("time python t.py", "build"),
        ("sudo -u www cat /etc/app.conf", "view"),
        ("env -u HOME A=1 B=2 grep x y", "search"),
        ("nice -n 5 cargo test", "build"),
        ("find . -name '*.py' | xargs -I {} grep -l foo {}", "search"),
        ("xargs -n 1 cat < files.txt", "view"),
        ("set -e; echo start && cd repo && git grep -n foo", "search"),
        ("git -C repo --no-pager ls-files src", "search"),
        ("git diff HEAD~1", "other"),
        ("git grep -n parse_expr", "search"),
        ("if grep -q x f; then echo y; fi", "search"),
        ("for f in *.py; do head -5 $f; done", "view"),
        ("conda activate env && npm test", "build"),
        ("npx jest src", "build"),
        ("./gradlew test", "build"),
        ("python3.11 -m pytest", "build"),
        ("go test ./...", "build"),
        ("cp a b && rm c", "other"),
        ("bash -c", "other"),  # no string to read
        # a shell's options with a value before its string: the value is not the string
        ("bash -o pipefail -c 'grep -rn foo src | head'", "search"),
        ("bash -euo pipefail -c 'cat a.py'", "view"),
        ("bash -O extglob -c 'ls src'", "search"),
        ("bash +o posix -c 'rg foo'", "search"),
        ("bash --rcfile env.sh -c 'cat a.py'", "view"),
        ("bash -x -c 'grep foo a.py'", "search"),  # -c takes the first word past the options
        ("bash -o pipefail run_tests.sh", "build"),  # options, then a script
    ],
)
def test_setup_wrappers_and_shell_strings_are_read_past(command: str, expected: str) -> None:
    assert run_class(command) == expected


def test_nested_shell_strings_are_read_to_a_bound() -> None:
    wrapped = ["grep x y"]
    for _ in range(MAX_NESTING + 1):
        wrapped.append("bash -c " + shlex.quote(wrapped[-1]))
    assert run_class(wrapped[MAX_NESTING]) == "search"  # within the bound: read
    assert run_class(wrapped[MAX_NESTING + 1]) == "other"  # past it: not read


def test_only_the_start_of_a_long_command_is_read() -> None:
    # a first program past the bound is not seen
    assert run_class("export A=" + "x" * MAX_COMMAND_CHARS + "; grep foo .") == "other"
    script = "cat big.txt " + "word " * 400_000  # 2 MB
    started = time.thread_time()
    assert run_class(script) == "view"
    assert time.thread_time() - started < 0.5  # the lexer never sees the whole script


def test_a_script_written_by_a_heredoc_then_run_is_a_view() -> None:
    # The class is the first program's, not the one whose output the result shows: ``cat > f
    # <<EOF`` is ``cat``, so a script written then run is a view. It stays one on purpose: the
    # pack's view odds are learned with these runs among them, and classing a view whose output
    # goes to a file as setup ranked held-out copies worse (docs/rules/prune.md)
    assert run_class("cat > check.py <<'EOF'\nprint(1)\nEOF\npython check.py") == "view"
    assert run_class("python check.py") == "build"  # the same run without the heredoc
