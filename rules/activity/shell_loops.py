"""A ``for`` loop over words written out, unrolled: ``for d in api web; do mkdir -p svc/$d;
done`` made ``svc/api`` and ``svc/web``, and read as written its body names ``svc/$d``, which only
the shell knows. The body runs once per word with ``$d`` and ``${d}`` replaced. A loop over
anything else (``*.txt``, ``$(ls)``, ``"$@"``, a C-style ``for ((…))``) and ``while``/``until``
loops are left as written: their words stay unknown to the reader.

Bounded: the words unrolling adds to a line are at most the caller's budget, shared by its
nested loops and the shell strings it runs; a loop past it stays as written. Every pattern is
anchored: linear.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from rules.activity.shell_lex import SimpleCommand

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_OPENS = frozenset(("for", "while", "until", "select"))
_LEADING = frozenset(("then", "else", "do", "{", "!", "elif"))  # before the loop's own word
_UNKNOWABLE = frozenset("$`*?[")  # a word the shell expands: the loop's words are not known


def _words(argv: Sequence[str]) -> list[str]:
    """``argv`` less the block keywords before its command (``then for …``, ``do done``)."""
    i = 0
    while i < len(argv) - 1 and argv[i] in _LEADING:
        i += 1
    return list(argv[i:])


def _end(cmds: Sequence[SimpleCommand], start: int) -> int | None:
    """The index of the ``done`` closing the loop opened at ``start``; None if it is not there."""
    depth = 0
    for i in range(start, len(cmds)):
        words = _words(cmds[i].argv)
        if words and words[0] in _OPENS:
            depth += 1
        if words and words[0] == "done":
            depth -= 1
            if depth == 0:
                return i
    return None


def _loop(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """(variable, words) of ``for NAME in WORDS`` when every word is written out; else None."""
    words = _words(argv)
    if len(words) < 4 or words[0] != "for" or words[2] != "in" or not _NAME.fullmatch(words[1]):
        return None
    items = words[3:]
    if any(_UNKNOWABLE & set(w) for w in items):
        return None
    return words[1], items


def _substituted(cmd: SimpleCommand, pattern: re.Pattern[str], value: str) -> SimpleCommand:
    def sub(word: str) -> str:
        return pattern.sub(lambda _: value, word) if "$" in word else word

    return replace(
        cmd,
        argv=tuple(sub(w) for w in cmd.argv),
        redirects=tuple((op, sub(t)) for op, t in cmd.redirects),
    )


def _rebinds(body: Sequence[SimpleCommand], name: str) -> int:
    """Where the body's own loop over ``name`` starts its body (``for d in x y; do`` inside a
    loop over ``d``): past it ``$d`` is that loop's, then its last word's (the shell's), so the
    outer word is put in up to there only (the inner loop's words are the outer scope's)."""
    for i, cmd in enumerate(body):
        words = _words(cmd.argv)
        if len(words) > 1 and words[0] in ("for", "select") and words[1] == name:
            return i + 1
    return len(body)


def loop_runs(cmds: Sequence[SimpleCommand], left: list[int]) -> Iterator[SimpleCommand]:
    """``cmds`` with each loop over written-out words unrolled. ``left`` holds the words
    unrolling may still add to the line (every word of every command it makes counts), shared
    by nested loops and by the shell strings the line runs (``bash -c '…'``): a line costs at
    most its length plus that budget, however its loops nest."""
    i = 0
    while i < len(cmds):
        cmd = cmds[i]
        loop = _loop(cmd.argv) if "for" in cmd.argv else None
        if loop is None:
            yield cmd
            i += 1
            continue
        end = _end(cmds, i)
        if end is None:  # never closed: the rest as written (a scan per loop would be quadratic)
            yield from cmds[i:]
            return
        name, items = loop
        body = cmds[i + 1 : end]
        cost = len(items) * sum(len(c.argv) + len(c.redirects) for c in body)
        if cost > left[0]:
            yield from cmds[i : end + 1]
        else:
            left[0] -= cost
            pattern = re.compile(r"\$(?:\{" + name + r"\}|" + name + r"(?![A-Za-z0-9_]))")
            bound = _rebinds(body, name)
            for item in items:  # nested loops in the body unroll in turn, from what is left
                made = [_substituted(c, pattern, item) for c in body[:bound]]
                yield from loop_runs([*made, *body[bound:]], left)
            yield cmds[end]  # `done > log`: its redirections, once
        i = end + 1
