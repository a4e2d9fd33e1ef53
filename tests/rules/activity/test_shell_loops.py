"""A `for` loop over written-out words is unrolled (``shell_loops``), and what a line makes that
only the shell names is counted as made, unnamed (``ShellOutcome.unknown``)."""

from __future__ import annotations

import pytest

from rules.activity.shell_lex import split_commands
from rules.activity.shell_loops import loop_runs
from rules.activity.shell_parse import analyse, load_verbs

CWD = "/w"


def _made(command: str) -> list[tuple[str, str]]:
    return [(e.action, e.path) for e in analyse(command, CWD, load_verbs()).effects]


@pytest.mark.parametrize(
    ("command", "made"),
    [
        (
            "for d in api web; do mkdir -p svc/$d; done",
            [("create", "/w/svc/api"), ("create", "/w/svc/web")],
        ),
        ('for d in a b; do mkdir "x_${d}"; done', [("create", "/w/x_a"), ("create", "/w/x_b")]),
        (
            "for i in a b\ndo\n  touch $i.txt\ndone",
            [("create", "/w/a.txt"), ("create", "/w/b.txt")],
        ),
        # nested, and a redirection of the loop itself once
        (
            "for a in x y; do for b in 1 2; do touch $a$b; done; done > log",
            [("create", f"/w/{n}") for n in ("x1", "x2", "y1", "y2", "log")],
        ),
        # `$dir` is another variable than `$d`
        ("for d in a; do mkdir $dir; done", []),
        # an inner loop over the same name: its own words inside it (the outer ones before)
        (
            "for d in a b; do mkdir $d; for d in x; do touch $d.txt; done; done",
            [("create", f"/w/{n}") for n in ("a", "x.txt", "b")],
        ),
        # if the loop is the body of a condition
        ("if true; then for d in a; do mkdir $d; done; fi", [("create", "/w/a")]),
    ],
)
def test_a_loop_over_written_words_runs_its_body_per_word(
    command: str, made: list[tuple[str, str]]
) -> None:
    assert _made(command) == made


@pytest.mark.parametrize(
    "command",
    [
        "for f in *.txt; do mkdir $f.d; done",
        "for f in $(ls); do mkdir $f.d; done",
        'for f in "$@"; do mkdir $f.d; done',
        "while read f; do mkdir $f; done < names",
        "for d in a b; do mkdir $d",  # never closed
    ],
)
def test_a_loop_over_words_the_shell_makes_is_made_unnamed(command: str) -> None:
    outcome = analyse(command, CWD, load_verbs())
    assert outcome.effects == ()
    assert outcome.unknown == (("create", "folder"),)


@pytest.mark.parametrize(
    ("command", "unknown"),
    [
        ("mkdir backup-$(date +%F)", (("create", "folder"),)),
        ("mkdir -p build/`date +%s`", (("create", "folder"),)),
        ("touch $F", (("create", "file"),)),
        ("echo hi > out-$(date +%s).log", (("create", "file"),)),
        ("tee $OUT < x", (("create", "file"),)),
        ("cp a.txt b.txt $DEST", (("copy", None),)),
        ("mv a $DEST", (("move", None),)),
        # nothing made: an append, `tee -a`, a path the rules resolve, a deletion
        ("echo hi >> $LOG", ()),
        ("tee -a $LOG < x", ()),
        ('mkdir "$HOME/x"', ()),
        ("rm -rf $TMP", ()),
    ],
)
def test_what_only_the_shell_names(command: str, unknown: tuple[object, ...]) -> None:
    assert analyse(command, CWD, load_verbs()).unknown == unknown


def test_unrolling_stays_within_its_budget() -> None:
    words = " ".join(f"w{i}" for i in range(50))
    line = f"for a in {words}; do for b in {words}; do touch $a$b; done; done"
    cmds = list(loop_runs(split_commands(line), [1_024]))
    assert sum(len(c.argv) for c in cmds) <= len(split_commands(line)) * 60 + 1_024
    # past the budget, the inner loops stay as written: their words are unknown
    assert any("$b" in " ".join(c.argv) for c in cmds)


@pytest.mark.parametrize(
    "line",
    [
        # a body of many words over many items: the budget counts words, not commands
        "for x in " + " ".join(f"i{i}" for i in range(1_000)) + "; do mkdir "
        + " ".join(f"$x/{n}" for n in range(2_000)) + "; done",
        # a shell string inside the body does not get a budget of its own
        "for a in " + " ".join(f"a{i}" for i in range(300)) + "; do bash -c 'for b in "
        + " ".join(f"b{i}" for i in range(300)) + "; do mkdir $b; done'; done",
    ],
    ids=["wide-body", "nested-shell"],
)  # fmt: skip
def test_a_line_costs_its_length_and_the_budget_at_most(line: str) -> None:
    effects = analyse(line, CWD, load_verbs()).effects
    assert len(effects) <= 4_096
