"""run_class: what a shell run does, by the first program its command runs past the setup."""

from __future__ import annotations

import time

import pytest

from rules.activity.run_class import MAX_COMMAND_CHARS, run_class


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
        ("git log --oneline | head", "other"),
        ("timeout 60 pytest", "other"),  # the first program is timeout
        ("", "other"),
        ('echo "unterminated', "other"),
    ],
)
def test_the_first_program_past_the_setup_names_the_class(command: str, expected: str) -> None:
    assert run_class(command) == expected


def test_only_the_start_of_a_long_command_is_read() -> None:
    # a first program past the bound is not seen
    assert run_class("export A=" + "x" * MAX_COMMAND_CHARS + "; grep foo .") == "other"
    script = "cat big.txt " + "word " * 400_000  # 2 MB
    started = time.thread_time()
    assert run_class(script) == "view"
    assert time.thread_time() - started < 0.5  # the lexer never sees the whole script
