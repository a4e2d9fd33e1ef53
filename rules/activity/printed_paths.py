"""Files and folders a command named only in what it printed: ``mktemp`` prints the file (``-d``:
the folder) it made, ``git clean -f`` the paths it removed ("Removing build/"). The command line
alone says neither, so ``shell_parse`` cannot. Read only where the command is one of its line's
simple commands, not inside ``$(…)`` (its path was then printed by another command, if at all),
and only from what a successful call printed."""

from __future__ import annotations

import re
from collections.abc import Iterator

from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import Effect, resolve_path
from rules.activity.shell_words import has_short

_ABSOLUTE = re.compile(r"^(/[^\s\x00]{1,4095})[ \t]*$", re.M)
_REMOVING = re.compile(r"^Removing[ \t]++([^\n\x00]{1,4096})$", re.M)
MAX_REMOVED = 256  # paths a `git clean` is read for: a larger one is bounded by it


def printed_effects(command: str, output: str, cwd: str | None) -> tuple[Effect, ...]:
    """What ``command`` made or removed that only ``output`` names."""
    if "mktemp" not in command and "clean" not in command:
        return ()
    return tuple(_effects(command, output, cwd))


def _effects(command: str, output: str, cwd: str | None) -> Iterator[Effect]:
    for cmd in split_commands(command):
        argv = list(cmd.argv)
        if not argv or cmd.connector == "||":
            continue
        program = argv[0].rsplit("/", 1)[-1]
        flags = [a for a in argv[1:] if a.startswith("-")]
        if program == "mktemp" and not has_short(flags, "u") and "--dry-run" not in flags:
            made = _ABSOLUTE.search(output)
            if made is not None:
                folder = has_short(flags, "d") or "--directory" in flags
                yield Effect("create", "folder" if folder else "file", made.group(1))
        elif argv[:2] == ["git", "clean"] and has_short(flags, "f") and not _dry(flags):
            for found in list(_REMOVING.finditer(output))[:MAX_REMOVED]:
                path = found.group(1).rstrip()
                typ = "folder" if path.endswith("/") else "file"
                yield Effect("delete", typ, resolve_path(path.rstrip("/"), cwd))


def _dry(flags: list[str]) -> bool:
    return has_short(flags, "n") or "--dry-run" in flags
