"""Files a run took back: deleted (``rm``, ``git rm``, ``rmdir``, a folder's files with it; a
move's source) or reverted (``git checkout -- f``, ``git checkout f`` of a changed file, ``git
restore f``, a folder or ``.`` for the files under it, ``git reset --hard``). The working set
lists the files the agent changed; one it removed or reverted since is changed no longer (a
scratch ``reproduce.py`` deleted at the end stayed listed beside the real fix). A move's
destination is changed (``moved_to``): the change went there."""

from __future__ import annotations

import posixpath

from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import analyse, load_verbs

MAX_COMMAND_CHARS = 20_000  # a command line read for what it took back
EVERYTHING = "."  # a revert of the whole work tree, where the shell left no folder to name
_BRANCHING = frozenset({"-b", "-B", "--orphan", "-c", "-C"})  # checkout/switch making a branch
_RESTORE_VALUES = frozenset({"-s", "--source"})


def undone_paths(command: str) -> tuple[str, ...]:
    """The paths (as written, normalised; ``cd`` followed) ``command`` deleted or reverted; a
    folder stands for the files under it."""
    command = command[:MAX_COMMAND_CHARS]
    if not any(w in command for w in ("rm", "mv", "git")):
        return ()
    out = [
        (e.source if e.action == "move" else e.path) or ""
        for e in analyse(command, None, load_verbs()).effects
        if e.action == "delete" or e.action == "move"
    ]
    cwd: str | None = None
    for cmd in split_commands(command):
        argv = list(cmd.argv)
        if argv[:1] == ["cd"]:
            cwd = _joined(cwd, argv[1]) if len(argv) > 1 else None
            continue
        out += [_joined(cwd, p) for p in _reverted(argv)]
    return tuple(p for p in dict.fromkeys(out) if p)


def moved_to(command: str) -> tuple[str, ...]:
    """Where ``command`` moved files to (``mv``, ``git mv``): each a changed file now."""
    command = command[:MAX_COMMAND_CHARS]
    if "mv" not in command:
        return ()
    effects = analyse(command, None, load_verbs()).effects
    return tuple(dict.fromkeys(e.path for e in effects if e.action == "move" and e.path))


def _joined(cwd: str | None, path: str) -> str:
    if cwd is None or path.startswith(("/", "~")):
        return path
    return posixpath.normpath(posixpath.join(cwd, path))


def _reverted(argv: list[str]) -> list[str]:
    if argv[:1] != ["git"] or len(argv) < 3:
        return []
    sub, rest = argv[1], argv[2:]
    if sub == "reset" and "--hard" in rest:  # the tracked files as committed, all of them
        return [EVERYTHING]
    if sub == "checkout" and "--" in rest:  # git checkout [REV] -- f: the file as committed
        return [a for a in rest[rest.index("--") + 1 :] if a]
    if sub == "checkout" and not _BRANCHING.intersection(rest):
        # git checkout [REV] f: an operand is a revision or a path; one shaped as a path is
        # taken for one, and takes back only a changed file (or folder) it names
        return [a for a in rest if not a.startswith("-") and ("/" in a or "." in a)]
    if sub == "restore" and ("--staged" not in rest or "--worktree" in rest or "-W" in rest):
        out, skip = [], False
        for a in rest:
            if skip:
                skip = False
            elif a in _RESTORE_VALUES:
                skip = True
            elif a and not a.startswith("-"):
                out.append(a)
        return out
    return []


def without(paths: list[str], undone: tuple[str, ...]) -> list[str]:
    """``paths`` less those ``undone`` names (a relative one names the path it ends), and
    those under a folder it names."""
    gone = {g.rstrip("/") or "/" for g in undone}
    if EVERYTHING in gone:
        return []
    return [p for p in paths if not _named(p, gone)]


def _named(path: str, gone: set[str]) -> bool:
    if path in gone:
        return True
    parts = path.split("/")
    if any("/".join(parts[i:]) in gone for i in range(1, len(parts))):
        return True  # /testbed/reproduce.py, deleted as reproduce.py
    if any(g.endswith("/" + path) for g in gone):  # reproduce.py, deleted as /testbed/…
        return True
    # under a folder taken back: /testbed/pkg/a.py under /testbed/pkg, or under pkg
    folders = ("/".join(parts[:i]) for i in range(1, len(parts)))
    return any(f in gone or any(f.endswith("/" + g) for g in gone) for f in folders if f)
