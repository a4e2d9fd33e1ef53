"""Files and folders a command named only in what it printed: ``mktemp`` prints the file (``-d``:
the folder) it made, ``git clean -f`` the paths it removed ("Removing build/"), and the programs
of the ``shell_verbs`` pack's ``printed_files`` the files they generated (``ssh-keygen``'s keys,
alembic's and Django's migrations, Rails' generators). The command line alone says none of it,
so ``shell_parse`` cannot. Read only where the command is one of its line's simple commands, not
inside ``$(…)`` (its path was then printed by another command, if at all), and only from what a
successful call printed."""

from __future__ import annotations

import re
from collections.abc import Iterator

from rules.activity.script_writes import PYTHON
from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import Effect, guess_type, resolve_path
from rules.activity.shell_verbs_pack import PrintedFiles
from rules.activity.shell_words import has_short

_ABSOLUTE = re.compile(r"^(/[^\s\x00]{1,4095})[ \t]*$", re.M)
_REMOVING = re.compile(r"^Removing[ \t]++([^\n\x00]{1,4096})$", re.M)
MAX_REMOVED = 256  # paths a `git clean` is read for: a larger one is bounded by it
MAX_PRINTED = 64  # files a generator's output is read for
MAX_SCAN = 200_000  # characters of an output read for them


def printed_effects(
    command: str, output: str, cwd: str | None, printed: tuple[PrintedFiles, ...] = ()
) -> tuple[Effect, ...]:
    """What ``command`` made or removed that only ``output`` names."""
    named = [rule for rule in printed if rule.argv[-1] in command]
    if "mktemp" not in command and "clean" not in command and not named:
        return ()
    return tuple(_effects(command, output, cwd, named))


def _words(argv: list[str]) -> list[str]:
    """A command's words, its program by its name, an interpreter left out (`python3
    manage.py makemigrations`: manage.py makemigrations; `python -m alembic`: alembic)."""
    words = [argv[0].rsplit("/", 1)[-1], *argv[1:]]
    if len(words) > 1 and (PYTHON.match(words[0]) or words[0] == "php"):
        words = words[2:] if words[1] == "-m" else [words[1].rsplit("/", 1)[-1], *words[2:]]
    return words


def _generated(
    rules: list[PrintedFiles], argv: list[str], output: str, cwd: str | None
) -> Iterator[Effect]:
    words = _words(argv)
    for rule in rules:
        if tuple(words[: len(rule.argv)]) != rule.argv:
            continue
        for found in list(rule.regex.finditer(output[:MAX_SCAN]))[:MAX_PRINTED]:
            path = found.group("path")
            typ = guess_type(path, True) if rule.type == "guess" else rule.type
            yield Effect("create", typ, resolve_path(path.rstrip("/"), cwd))
        return


def _effects(
    command: str, output: str, cwd: str | None, printed: list[PrintedFiles]
) -> Iterator[Effect]:
    for cmd in split_commands(command):
        argv = list(cmd.argv)
        if not argv or cmd.connector == "||":
            continue
        if printed:
            yield from _generated(printed, argv, output, cwd)
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
