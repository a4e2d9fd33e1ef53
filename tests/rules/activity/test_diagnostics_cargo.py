"""cargo's diagnostics: an ``error[E…]`` or an ``error: …`` placed by its ``-->`` line opens one;
a bare ``error: …`` line is as often git's or pip's, and opens none without its place."""

from __future__ import annotations

import pytest

from rules.activity import diagnostics

CARGO = """   Compiling demo v0.1.0 (/work/demo)
error[E0425]: cannot find value `total` in this scope
 --> src/main.rs:4:20
  |
4 |     println!("{}", total);
  |                    ^^^^^ not found in this scope

error: expected one of `,`, `:`, or `}`, found `=`
  --> src/lib.rs:12:9
   |

warning: unused variable: `x`
 --> src/main.rs:2:9

error: could not compile `demo` (bin "demo") due to 2 previous errors
"""

NOT_CARGO = {
    "git": "error: pathspec 'feature/x' did not match any file(s) known to git\n",
    "git push": (
        "To github.com:me/demo.git\n ! [rejected]        main -> main (fetch first)\n"
        "error: failed to push some refs to 'github.com:me/demo.git'\n"
    ),
    "pip": (
        "error: externally-managed-environment\n\n× This environment is externally managed\n"
        "╰─> To install Python packages system-wide, try apt install\n"
    ),
    "pip build": (
        "  error: subprocess-exited-with-error\n\n"
        "  × Building wheel for numpy (pyproject.toml) did not run successfully.\n"
        "error: subprocess-exited-with-error\n"
    ),
    "setuptools": "error: command '/usr/bin/gcc' failed with exit code 1\n",
}


def test_cargo_errors_open_at_their_place() -> None:
    out = diagnostics.parse(CARGO, 101)
    assert out.verdict == "fail" and out.is_build_error
    got = [(d["tool"], d["file"], d["line"], d["code"]) for d in out.diagnostics]
    assert got == [
        ("cargo", "src/main.rs", 4, "E0425"),
        ("cargo", "src/lib.rs", 12, None),
    ]


def test_a_coded_cargo_error_counts_without_its_place() -> None:
    out = diagnostics.parse("error[E0601]: `main` function not found in crate `demo`\n", 101)
    assert [d["code"] for d in out.diagnostics] == ["E0601"] and out.is_build_error


@pytest.mark.parametrize("name", sorted(NOT_CARGO))
def test_another_tools_error_line_is_no_build_diagnostic(name: str) -> None:
    out = diagnostics.parse(NOT_CARGO[name], 1)
    assert out.diagnostics == ()
    assert not out.is_build_error
    assert out.verdict == "fail"  # the exit code still says the run failed


def test_an_unplaced_line_before_a_placed_one_is_dropped_alone() -> None:
    text = "error: failed to push some refs\n" + CARGO
    out = diagnostics.parse(text, 1)
    assert [d["file"] for d in out.diagnostics] == ["src/main.rs", "src/lib.rs"]
