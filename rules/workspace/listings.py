"""Entries a tool result shows: the output of ``ls`` (plain, ``-l``, ``-F``, ``-R``), ``find``,
``tree``, ``git ls-files``, a file tool's directory view (Claude Code's ``LS``, Gemini CLI's
``list_directory``, OpenHands' ``view`` of a folder, a glob's paths), ``grep -rn``-style
``path:line:`` hits, and ``git status`` / ``git branch``.

Each parser reads at most ``MAX_LINES`` lines of at most ``MAX_LINE`` characters, and its patterns
are linear (single character classes, no nested quantifiers): tool output is client text."""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

MAX_LINES = 2_000
MAX_LINE = 400


class Entry(NamedTuple):
    path: str  # as printed (relative to the listed folder, or absolute)
    kind: str  # f (file) | d (folder) | ? (not said)


class GitFacts(NamedTuple):
    branch: str | None
    dirty: tuple[tuple[str, str], ...]  # (status letter(s), path), as printed


# a word that can be a path: no spaces, quotes, globs or shell syntax
_PATHLIKE = re.compile(r"[\w.@+,=~%/-]+")
_LS_LONG = re.compile(
    r"([dlcbps-])[rwxsStT-]{9}[.@+]?\s+\d+\s+\S+\s+\S+\s+[\d,]+\s+\S+\s+\S+\s+\S+\s(.+)"
)
_TREE_MARKS = ("├── ", "└── ", "|-- ", "`-- ")
_CLAUDE_LS = re.compile(r"( *)- (.+)")
_GREP_HIT = re.compile(r"([\w.@+,=~%/-]+):\d+:")
_NOISE = ("[Command finished", "(Current directory", "(Open file", "[Python Interpreter")
_STATUS_LONG = re.compile(r"\t(modified|new file|deleted|renamed|typechange|both modified):\s+(.+)")
_LONG_CODES = {"modified": "M", "new file": "A", "deleted": "D", "renamed": "R",
               "typechange": "T", "both modified": "U"}  # fmt: skip


def lines_of(text: str) -> list[str]:
    """The first ``MAX_LINES`` lines, each cut to ``MAX_LINE`` characters, noise left out."""
    out = []
    for line in text.split("\n", MAX_LINES)[:MAX_LINES]:
        line = line.rstrip("\r")[:MAX_LINE]
        if line and not line.startswith(_NOISE):
            out.append(line)
    return out


def _pathlike(word: str) -> bool:
    return bool(word) and len(word) <= 300 and _PATHLIKE.fullmatch(word) is not None


def ls_entries(text: str, base: str, cwd: str = "") -> list[Entry]:
    """``ls`` output; ``base`` is the folder listed. ``-R`` and several folders print ``dir:``
    headers (as given, so relative to ``cwd``): entries after one are under it."""
    out: list[Entry] = []
    under = base
    for line in lines_of(text):
        if line.startswith(("ls: ", "total ")):
            continue
        if line.endswith(":") and " " not in line:
            under = posixpath.normpath(posixpath.join(cwd, line[:-1]))
            continue
        long = _LS_LONG.fullmatch(line)
        if long:
            kind = {"d": "d", "-": "f"}.get(long.group(1), "?")
            name = long.group(2).split(" -> ", 1)[0]
            words = [name]
        else:
            kind, words = "?", line.split()
        for word in words:
            if word.endswith("/"):
                word, kind_here = word.rstrip("/"), "d"
            elif word[-1:] in ("*", "@", "|", "="):
                word, kind_here = word[:-1], "f" if word[-1] == "*" else "?"
            else:
                kind_here = kind
            if word in (".", "..") or not _pathlike(word):
                continue
            out.append(Entry(posixpath.join(under, word), kind_here))
    return out


def path_lines(text: str, kind: str = "?") -> list[Entry]:
    """One path a line (``find``, ``git ls-files``, ``grep -l``, a glob tool, OpenHands' view
    of a folder after its header). A line ending in ``/`` is a folder."""
    out = []
    for line in lines_of(text):
        line = line.strip()
        here = "d" if line.endswith("/") and len(line) > 1 else kind
        line = line.rstrip("/") if len(line) > 1 else line
        if _pathlike(line) and line not in (".", ".."):
            out.append(Entry(line, here))
    return out


def tree_entries(text: str) -> list[Entry]:
    """``tree`` output: the first line is the root, ``├── name`` lines nest by 4 columns (found
    with ``str.find``: linear); an entry with deeper entries right after it is a folder."""
    lines = lines_of(text)
    out: list[Entry] = []
    stack: list[str] = []
    for line in lines[1:]:
        at = min((i for i in map(line.find, _TREE_MARKS) if i >= 0), default=-1)
        if at < 0:
            continue
        depth = at // 4
        name = line[at + 4 :].split(" -> ", 1)[0].strip().rstrip("/")
        if not _pathlike(name) or depth > len(stack):
            continue
        del stack[depth:]
        if depth > 0 and out and out[-1].path == posixpath.join(*stack):
            out[-1] = Entry(out[-1].path, "d")
        out.append(Entry(posixpath.join(*stack, name), "?"))
        stack.append(name)
    return out


def claude_ls_entries(text: str) -> list[Entry]:
    """Claude Code's ``LS`` tool: ``- /abs/root/`` then ``  - name/`` nested by two spaces."""
    out: list[Entry] = []
    stack: list[str] = []
    for line in lines_of(text):
        m = _CLAUDE_LS.fullmatch(line)
        if not m:
            continue
        depth, name = len(m.group(1)) // 2, m.group(2).strip()
        kind = "d" if name.endswith("/") else "f"
        name = name.rstrip("/") or "/"
        if not _pathlike(name):
            continue
        del stack[depth:]
        path = posixpath.join(*stack, name) if stack else name
        out.append(Entry(path, kind))
        stack.append(name)
    return out


def dir_listing_entries(text: str) -> tuple[str | None, list[Entry]]:
    """Gemini CLI's ``list_directory`` (``Directory listing for /x:`` then ``[DIR] a``, ``b``);
    the folder it names, and its entries."""
    lines = lines_of(text)
    if not lines or not lines[0].startswith("Directory listing for "):
        return None, []
    base = lines[0][len("Directory listing for ") :].rstrip(":").strip()
    out = []
    for line in lines[1:]:
        kind = "d" if line.startswith("[DIR] ") else "f"
        name = line[6:] if kind == "d" else line
        if _pathlike(name.strip()):
            out.append(Entry(name.strip(), kind))
    return base, out


def grep_hits(text: str) -> list[str]:
    """Files named by ``path:line:`` hits (``grep -rn``, ``rg``, ``git grep -n``), once each."""
    seen: dict[str, None] = {}
    for line in lines_of(text):
        m = _GREP_HIT.match(line)
        if m:
            seen.setdefault(m.group(1))
    return list(seen)


def git_status(text: str) -> GitFacts:
    """``git status`` in its long, ``--short`` or ``--porcelain`` form (``-b`` headers too)."""
    branch: str | None = None
    dirty: list[tuple[str, str]] = []
    untracked = False
    for line in lines_of(text):
        if line.startswith("On branch "):
            branch = line[len("On branch ") :].strip() or None
        elif line.startswith("## "):
            head = line[3:].split("...", 1)[0].strip()
            branch = None if head.startswith("HEAD ") else head.removeprefix("No commits yet on ")
        elif line.startswith("Untracked files:"):
            untracked = True
        elif line.startswith("\t"):
            long = _STATUS_LONG.fullmatch(line)
            if long:
                dirty.append((_LONG_CODES[long.group(1)], long.group(2).split(" -> ")[-1]))
            elif untracked and _pathlike(line.strip()):
                dirty.append(("??", line.strip()))
        elif (
            len(line) > 3
            and line[2] == " "
            and line[:2].strip()
            and set(line[:2]) <= set("MADRCU?! ")
        ):
            path = line[3:].split(" -> ")[-1].strip().strip('"')
            if _pathlike(path):
                dirty.append((line[:2].strip(), path))
        elif not line.startswith((" ", "(")):
            untracked = untracked and bool(line.strip())
    return GitFacts(branch, tuple(dirty))


def git_branch(text: str) -> str | None:
    """The current branch ``git branch`` marks with ``*`` (a detached head: None)."""
    for line in lines_of(text):
        if line.startswith("* "):
            name = line[2:].strip()
            return None if name.startswith("(") else name
    return None
