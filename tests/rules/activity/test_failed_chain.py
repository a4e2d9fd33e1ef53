"""What a failed command line's leading ``&&`` commands still did."""

from __future__ import annotations

import pytest

from rules.activity.failed_chain import ran_before_failure

BUILD_ERROR = "src/App.tsx(12,7): error TS2322: Type 'string' is not assignable to type 'number'."


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        ("mkdir dist && npm run build", BUILD_ERROR, "mkdir dist"),
        ("cd web && mkdir -p out/{a,b} && make", "make: *** [all] Error 2",
         "cd web && mkdir -p out/{a,b}"),
        ("mkdir 'my dir' && touch 'my dir/x' && make", "make: *** No targets.  Stop.",
         "mkdir 'my dir' && touch 'my dir/x'"),
        # nothing shown (stderr sent elsewhere): a failing mkdir would not show either
        ("mkdir dist && npm run build", "", None),
        ("mkdir -p 'src/{a,b}' && pytest", "1 failed", "mkdir -p 'src/{a,b}'"),  # quoted braces
        # stops at a command whose success the output does not show, and what follows it
        ("npm run build && mkdir -p release", BUILD_ERROR, None),
        ("mkdir a && npm ci && mkdir b && false", "npm ERR! code E404", "mkdir a"),
        # a quiet command the output names failed: nothing ran after it
        ("mkdir dist && npm run build", "mkdir: cannot create directory 'dist': File exists", None),
        ("cd app && mkdir x && make", "bash: line 1: cd: app: No such file or directory", None),
        # the last command, another operator, a subshell, a redirection: not read
        ("mkdir dist", "", None),
        ("mkdir a; npm test", "1 failed", None),
        ("mkdir a || npm test", "1 failed", None),
        ("(mkdir a) && npm test", "1 failed", None),
        ("touch a > log && npm test", "1 failed", None),
    ],
)  # fmt: skip
def test_the_leading_quiet_commands_ran(command: str, output: str, expected: str | None) -> None:
    assert ran_before_failure(command, output) == expected


@pytest.mark.parametrize(
    "output",
    [
        "bash: -c: line 1: unexpected EOF while looking for matching `\"'",
        "bash: -c: line 1: syntax error near unexpected token `)'",
        "Error response from daemon: container 4f2a is not running",
        "OCI runtime exec failed: exec failed: unable to start container process",
        "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
    ],
)
def test_nothing_is_read_when_no_command_of_the_line_ran(output: str) -> None:
    assert ran_before_failure("mkdir -p data && python fetch.py", output) is None
