"""The git branch checked out, as a shell call's words and what git printed show it, so that
``git branch -m new`` (one word: the current branch renamed) ends the branch it renames. When
a command may have moved HEAD and its output does not say where, the branch is unknown: a
rename then names no old branch, since a wrong one would be worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rules.activity.command_words import flag_value, positionals
from rules.activity.shell_parse import resolve_path

MAX_BRANCH_CHARS = 200
# what checkout and switch print (to stderr, which agents' shells capture with stdout)
_SWITCHED = re.compile(
    r"^(?:Switched to (?:a new )?branch|Reset branch|Already on) '([^'\n]{1,200})'[ \t]*$", re.M
)
_ON_BRANCH = re.compile(r"^On branch (\S{1,200})[ \t]*$", re.M)  # git status
_PATHS = re.compile(r"^Updated \d{1,9} paths? from ", re.M)  # `git checkout f`: files restored
_CREATES = ("-b", "-B", "--orphan", "-c", "-C", "--create", "--force-create")
_DETACHES = ("--detach", "-d")
_RENAMES = ("-m", "-M", "--move")


# the branch checked out, and the working folder it was checked out from (the repository: a
# checkout in another folder is another repository's)
Head = tuple[str, str | None]


class GitHead:
    """The branch checked out, stepped through a command line's git commands in order.
    ``output`` is the whole call's: a checkout or switch takes the next branch it says it
    checked out under that command's name, a ``git status`` the next "On branch" line."""

    def __init__(self, head: Head | None, output: str) -> None:
        self.head: str | None = head[0] if head is not None else None
        self.where: str | None = head[1] if head is not None else None
        self._printed = [m.group(1) for m in _SWITCHED.finditer(output)]
        self._on = [m.group(1) for m in _ON_BRANCH.finditer(output)]
        self._paths = _PATHS.search(output) is not None

    def step(self, argv: Sequence[str], here: str | None) -> None:
        """HEAD after ``argv`` (the command's words, prefixes removed) ran in ``here``."""
        if len(argv) < 2 or argv[0] != "git":
            return
        sub, args = argv[1], argv[2:]
        before = self.head
        if sub in ("checkout", "switch"):
            self._moved(sub, args)
        elif sub == "status" and self._on:
            self.head = self._on.pop(0)
        elif sub == "branch" and any(a in _RENAMES for a in args):
            words = positionals(args, frozenset())
            if len(words) == 1 or (len(words) == 2 and words[0] == self.current(here)):
                self.head = words[-1]
        if self.head != before or sub == "status":
            self.where = here

    def current(self, here: str | None) -> str | None:
        """The branch checked out in ``here``, when known (one checked out elsewhere is not)."""
        return self.head if self.where == here else None

    def renamed(self, args: Sequence[str], here: str | None) -> str | None:
        """The branch ``git branch -m new`` renames (the current one), when known."""
        return self.current(here) if len(positionals(args, frozenset())) == 1 else None

    def finished(self) -> Head | None:
        """HEAD after the command line: unknown when its output says a branch was checked out
        that no git command of it did (``gh pr checkout 42``)."""
        if self._printed or self.head is None:
            return None
        return self.head, self.where

    def _moved(self, sub: str, args: Sequence[str]) -> None:
        made = flag_value(args, _CREATES)
        if made:
            self._take(made)
            self.head = made
        elif any(a in _DETACHES for a in args):
            self.head = None
        elif not (sub == "checkout" and "--" in args):  # `checkout -- f`: files restored
            words = positionals(args, frozenset())
            if not words:
                return  # `git checkout` alone moves nothing
            printed = self._take(None if words[0] == "-" else words[0])
            if printed is not None or sub == "switch" or not self._paths:
                self.head = printed  # None: it may have moved, and nothing says where

    def _take(self, name: str | None) -> str | None:
        """The next branch the output says was checked out (``name``, when given), consumed."""
        for i, printed in enumerate(self._printed):
            if name is None or printed == name:
                del self._printed[: i + 1]
                return printed
        return None


def switched_elsewhere(output: str) -> bool:
    """Whether ``output`` says a branch was checked out (by a command that is no git's)."""
    return _SWITCHED.search(output) is not None


def stored_head(head: object) -> Head | None:
    """HEAD as state keeps it (a branch of a branch's length, and its folder), else none."""
    if not (isinstance(head, list) and len(head) == 2):
        return None
    branch, where = head
    if not (isinstance(branch, str) and 0 < len(branch) <= MAX_BRANCH_CHARS):
        return None
    return branch, where if isinstance(where, str) else None


# git's options before its command: those taking the next word as their value (the long ones
# also as `--git-dir=x`), and those alone
_GLOBAL_VALUED = frozenset(("--git-dir", "--work-tree", "--namespace", "--config-env"))
_GLOBAL_ALONE = frozenset(
    (
        "--no-pager",
        "-P",
        "-p",
        "--paginate",
        "--bare",
        "--no-replace-objects",
        "--literal-pathspecs",
    )
)


def without_globals(argv: Sequence[str], cwd: str | None) -> tuple[list[str], str | None]:
    """(``git`` and its command's words, less git's options before the command; the folder it
    runs in): ``git -C app checkout -b x`` runs ``checkout -b x`` in ``app``. A ``-C`` whose
    folder only the shell knows leaves the folder unknown (None)."""
    where, i = cwd, 1
    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        if word in ("-C", "-c"):
            if i + 1 >= len(argv):
                break
            value = argv[i + 1]
            if word == "-C":
                where = None if "$" in value or "`" in value else resolve_path(value, where)
            i += 2
        elif word.split("=", 1)[0] in _GLOBAL_VALUED:
            i += 1 if "=" in word else 2
        elif word in _GLOBAL_ALONE:
            i += 1
        else:
            break
    return [argv[0], *argv[i:]], where
