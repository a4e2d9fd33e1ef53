"""Files a run took back: deleted (``rm``, ``git rm``, ``rmdir``; a move's source) or reverted
(``git checkout -- f``, ``git checkout HEAD f`` with ``--``, ``git restore f``). The working set
lists the files the agent changed; one it removed or reverted since is changed no longer (a
scratch ``reproduce.py`` deleted at the end stayed listed beside the real fix)."""

from __future__ import annotations

from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import analyse, load_verbs

MAX_COMMAND_CHARS = 20_000  # a command line read for what it took back


def undone_paths(command: str) -> tuple[str, ...]:
    """The paths (as written, normalised; ``cd`` followed) ``command`` deleted or reverted."""
    command = command[:MAX_COMMAND_CHARS]
    if not any(w in command for w in ("rm", "mv", "git")):
        return ()
    out = [
        (e.source if e.action == "move" else e.path) or ""
        for e in analyse(command, None, load_verbs()).effects
        if e.action == "delete" or e.action == "move"
    ]
    for cmd in split_commands(command):
        out += _reverted(list(cmd.argv))
    return tuple(p for p in dict.fromkeys(out) if p)


def _reverted(argv: list[str]) -> list[str]:
    if argv[:1] != ["git"] or len(argv) < 3:
        return []
    sub, rest = argv[1], argv[2:]
    if sub == "checkout" and "--" in rest:  # git checkout [REV] -- f: the file as committed
        return [a for a in rest[rest.index("--") + 1 :] if a]
    if sub == "restore" and ("--staged" not in rest or "--worktree" in rest or "-W" in rest):
        values = {"-s", "--source"}
        out, skip = [], False
        for a in rest:
            if skip:
                skip = False
            elif a in values:
                skip = True
            elif a and not a.startswith("-"):
                out.append(a)
        return out
    return []


def without(paths: list[str], undone: tuple[str, ...]) -> list[str]:
    """``paths`` less those ``undone`` names (a relative one names the path it ends)."""
    gone = set(undone)
    return [p for p in paths if not _named(p, gone)]


def _named(path: str, gone: set[str]) -> bool:
    if path in gone:
        return True
    parts = path.split("/")
    if any("/".join(parts[i:]) in gone for i in range(1, len(parts))):
        return True  # /testbed/reproduce.py, deleted as reproduce.py
    return any(g.endswith("/" + path) for g in gone)  # reproduce.py, deleted as /testbed/…
