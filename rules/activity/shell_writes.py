"""Files a shell command writes by itself: its output redirections, ``tee``'s operands, an
in-place edit (``sed -i``, ``perl -pi -e``, ``ruby -pi -e``); and the program a simple command
runs (``verb``). Read by ``observations.shell_action``."""

from __future__ import annotations

import re

from rules.activity.shell_lex import SimpleCommand, file_like

_WRITE_OPS = {">", ">>", ">|", "&>", "&>>"}


def _sed_in_place(argv: tuple[str, ...]) -> bool:
    return any(
        a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a)
        for a in argv[1:]
    )


_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
_WRAPPERS = frozenset(("sudo", "command", "exec", "env"))


def verb(argv: tuple[str, ...]) -> str:
    """The program a simple command runs: ``VAR=value`` words and ``sudo`` skipped."""
    at = _verb_at(argv)
    return argv[at].rsplit("/", 1)[-1] if at < len(argv) else ""


def _verb_at(argv: tuple[str, ...]) -> int:
    """Where ``verb``'s program is in ``argv``: the first word neither an assignment nor a
    wrapper (``len(argv)`` when none is)."""
    return next(
        (i for i, w in enumerate(argv) if w not in _WRAPPERS and not _ASSIGNMENT.match(w)),
        len(argv),
    )


def written(cmd: SimpleCommand) -> list[str]:
    """Files a simple command writes: output redirections, ``tee`` operands, ``sed -i``,
    ``perl -pi -e``."""
    out = [t for op, t in cmd.redirects if op in _WRITE_OPS and file_like(t) and t[:5] != "/dev/"]
    program = verb(cmd.argv)
    operands = [w for w in cmd.argv[1:] if not w.startswith("-")]
    if program == "tee":
        out += [w for w in operands if not w.startswith("/dev/")]
    elif program == "sed" and _sed_in_place(cmd.argv) and operands:
        out.append(operands[-1])
    elif program in IN_PLACE:
        out += _in_place_files(cmd.argv[_verb_at(cmd.argv) :])
    return out


IN_PLACE = frozenset({"perl", "ruby"})  # ``-i`` edits the files named in place, as sed's
# a cluster's switches whose value is the rest of the word (``-MFile::Find``, ``-I lib``)
_REST_VALUE = frozenset("MmIFxr")


def _in_place_files(argv: tuple[str, ...]) -> list[str]:
    """The files ``perl -pi -e '…' a.py`` (``ruby -pi -e``) edits in place: its operands past
    the code (or past the script without ``-e``); none without ``-i``. A cluster is read as perl
    reads it: ``-i`` takes the rest as a backup's ending (``-i.bak``), ``-e`` the next word."""
    in_place, code, skip, operands = False, False, False, []
    for word in argv[1:]:
        if skip:
            skip = False
        elif word[:1] == "-" and len(word) > 1 and word[:2] != "--":
            for j, c in enumerate(word[1:], 1):
                if c == "i":
                    in_place = True
                    break
                if c in "eE":
                    code, skip = True, j == len(word) - 1
                    break
                if c in _REST_VALUE:
                    skip = j == len(word) - 1 and c in "Ir"  # ``-I lib``, ``-r json``
                    break
        elif word[:2] != "--":
            operands.append(word)
    return operands[0 if code else 1 :] if in_place else []
