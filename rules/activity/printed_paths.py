"""Files and folders a command named only in what it printed: ``mktemp`` prints the file (``-d``:
the folder) it made, ``git clean -f`` the paths it removed ("Removing build/"), and the programs
of the ``shell_verbs`` pack's ``printed_files`` the files they generated (``ssh-keygen``'s keys,
alembic's and Django's migrations, Rails' generators). The command line alone says none of it,
so ``shell_parse`` cannot. Read only where the command is one of its line's simple commands, not
inside ``$(…)`` (its path was then printed by another command, if at all), and only from what a
successful call printed. One exception: ``d=$(mktemp -d) && echo "$d"`` (the path kept in a
variable the line then echoes) made the folder ``echo`` printed, when its name fits mktemp's
template (``tmp.XXXXXXXXXX`` by default): another command's path printed before it is not it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from rules.activity.command_words import flag_value
from rules.activity.run_class import program as program_words
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
    found = tuple(_effects(command, output, cwd, named))
    if "$(mktemp" in command:  # d=$(mktemp -d) && echo "$d"
        found += tuple(_echoed_temps(command, output))
    return found


# a package runner before the program it runs (`npx prisma migrate dev`)
_RUNNERS = {"npx": 1, "bunx": 1, "pnpx": 1, "pnpm": 2, "yarn": 2}
_RUNNER_SUBS = frozenset(("exec", "dlx"))


def _words(argv: list[str]) -> list[str]:
    """A command's words, its program by its name, an interpreter left out (`python3
    manage.py makemigrations`: manage.py makemigrations; `python -m alembic`: alembic), and a
    package runner (`npx prisma …`, `pnpm exec prisma …`: prisma …)."""
    words = [argv[0].rsplit("/", 1)[-1], *argv[1:]]
    if len(words) > 1 and (PYTHON.match(words[0]) or words[0] == "php"):
        words = words[2:] if words[1] == "-m" else [words[1].rsplit("/", 1)[-1], *words[2:]]
    skip = _RUNNERS.get(words[0], 0)
    if skip == 2 and len(words) > 1 and words[1] not in _RUNNER_SUBS:
        skip = 1 if words[0] == "yarn" else 0  # `yarn prisma …` runs it; `pnpm prisma` no
    return words[skip:] if len(words) > skip else words


def _base(rule: PrintedFiles, argv: list[str], cwd: str | None) -> str | None:
    """The folder the rule's printed names are relative to (the working one by default)."""
    if not rule.under:
        return cwd
    named = flag_value(argv, [rule.under_option]) if rule.under_option else None
    holder = posixpath.dirname(named or rule.under_default)
    return resolve_path(posixpath.join(holder, rule.under), cwd)


def _generated(
    rules: list[PrintedFiles], argv: list[str], output: str, cwd: str | None
) -> Iterator[Effect]:
    words = _words(argv)
    for rule in rules:
        if tuple(words[: len(rule.argv)]) != rule.argv:
            continue
        base = _base(rule, argv, cwd)
        for found in list(rule.regex.finditer(output[:MAX_SCAN]))[:MAX_PRINTED]:
            path = found.group("path")
            typ = guess_type(path, True) if rule.type == "guess" else rule.type
            made = resolve_path(path.rstrip("/"), base)
            yield Effect("create", typ, made)
            for name in rule.each:  # prisma's `migration.sql` in each migration's folder
                yield Effect("create", "file", posixpath.join(made, name))
        return


_DECLARE = frozenset(("export", "local", "declare", "readonly", "typeset"))
# `NAME=$(mktemp …)`: the variable and mktemp's words
_ASSIGNED = re.compile(r"^([A-Za-z_]\w{0,63})=\$\(mktemp((?:[ \t]++[^\s()$`;&|]{1,200}){0,8})\)$")
_ECHOED = re.compile(r"^\$(?:\{([A-Za-z_]\w{0,63})\}|([A-Za-z_]\w{0,63}))$")
_VALUED = frozenset(("-p", "--tmpdir", "--suffix"))  # mktemp's options that take a value


def _assigned(argv: list[str]) -> tuple[str, list[str]] | None:
    """(variable, mktemp's words) of ``[export] NAME=$(mktemp …)``, or None."""
    words = argv[1:] if argv and argv[0] in _DECLARE else argv
    found = _ASSIGNED.match(words[0]) if len(words) == 1 else None
    return (found.group(1), found.group(2).split()) if found is not None else None


def _template(words: list[str]) -> re.Pattern[str]:
    """The names mktemp makes from its template (its last run of three or more X's random)."""
    template, i = "tmp.XXXXXXXXXX", 0
    while i < len(words):
        if words[i] in _VALUED:
            i += 1
        elif not words[i].startswith("-"):
            template = words[i].rsplit("/", 1)[-1]
        i += 1
    head = template.rstrip("X")
    xs = len(template) - len(head)
    if xs < 3:
        return re.compile(r"(?!)")
    return re.compile(rf"{re.escape(head)}[A-Za-z0-9]{{{xs}}}(?:[^/\s]{{0,64}})")


def _echoed_temps(command: str, output: str) -> Iterator[Effect]:
    """What ``d=$(mktemp -d) && echo "$d"`` made: each echoed variable holding a mktemp's path,
    the next absolute line printed whose name fits its template, in the order echoed."""
    held: dict[str, list[str]] = {}
    lines = [m.group(1) for m in list(_ABSOLUTE.finditer(output[:MAX_SCAN]))[:MAX_PRINTED]]
    taken = 0
    for cmd in split_commands(command):
        argv = list(cmd.argv)
        if not argv or cmd.connector == "||":
            continue
        assigned = _assigned(argv)
        if assigned is not None:
            held[assigned[0]] = assigned[1]
            continue
        if argv[0] not in ("echo", "printf") or len(argv) < 2:
            continue
        named = _ECHOED.match(argv[-1])
        words = held.get((named.group(1) or named.group(2)) if named is not None else "")
        if words is None or has_short(words, "u") or "--dry-run" in words:
            continue
        fits = _template(words)
        while taken < len(lines):
            path, taken = lines[taken], taken + 1
            if fits.fullmatch(path.rsplit("/", 1)[-1]):
                folder = has_short(words, "d") or "--directory" in words
                yield Effect("create", "folder" if folder else "file", path)
                break


def _effects(
    command: str, output: str, cwd: str | None, printed: list[PrintedFiles]
) -> Iterator[Effect]:
    for cmd in split_commands(command):
        argv = list(program_words(cmd.argv))  # `sudo certbot …`: certbot's words
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
