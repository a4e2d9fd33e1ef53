"""A shell command's words as ``shell_parse`` reads them: its flags, operands and option values
(an operand only the shell could expand is noted, never taken), and the script a shell runs
from ``-c``."""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Sequence

EXPANDED = "$expanded"  # key in the option values: some operand held $VAR / $(…) / `…`


def operands(
    args: tuple[str, ...], value_options: frozenset[str]
) -> tuple[list[str], list[str], dict[str, str]]:
    """(flags, operands, option values). Empty strings are dropped (``sed -i '' …`` on macOS)."""
    flags: list[str] = []
    operands: list[str] = []
    values: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            operands.extend(x for x in args[i + 1 :] if x)
            break
        if a.startswith("-") and len(a) > 1:
            name, eq, inline = a.partition("=")
            if name in value_options:
                if eq:
                    values[name] = inline
                elif i + 1 < len(args):
                    values[name] = args[i + 1]
                    i += 1
            else:
                flags.append(a)
        elif (a and "$" not in a and "`" not in a) or a.startswith(("$HOME/", "${HOME}/")):
            operands.append(a)
        elif a:
            values[EXPANDED] = a  # an operand only the shell could expand: left out, noted
        i += 1
    return flags, operands, values


def has_short(flags: list[str], letters: str) -> bool:
    return any(
        f.startswith("-") and not f.startswith("--") and set(letters) & set(f[1:]) for f in flags
    )


def shell_script(argv: list[str]) -> str | None:
    """The script of ``bash -c SCRIPT`` (also ``-lc``, ``-ic``: short options together), or
    None."""
    for i, arg in enumerate(argv[1:-1], 1):
        if arg.startswith("-") and arg.endswith("c") and arg[1:].isalpha():
            return argv[i + 1]  # -c, -lc, -ic; not --rcfile (a second "-" is not a letter)
    return None


# a prefix's options that take a value, skipped with it (`sudo -u postgres createdb x`)
_PREFIX_VALUES: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U", "-r", "-t"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir"}),
    "nice": frozenset({"-n"}),
    "time": frozenset({"-f", "-o"}),
    "exec": frozenset({"-a"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
}


def without_prefixes(
    argv: Sequence[str], prefixes: Collection[str], keywords: Collection[str]
) -> list[str]:
    """``argv`` from the program it runs: its prefixes (``sudo``, ``env``, ``nohup`` …) with
    their options (``sudo -u postgres``, ``nice -n 5``), compound keywords (``then``, ``do``)
    and assignments (``FOO=bar``) skipped."""
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word in keywords or ("=" in word and not word.startswith(("=", "-"))):
            i += 1
            continue
        if word not in prefixes:
            break
        takes = _PREFIX_VALUES.get(word, frozenset())
        i += 1
        while i < len(words) and words[i].startswith("-") and words[i] != "-":
            if words[i] == "--":
                i += 1
                break
            i += 2 if words[i] in takes else 1
    return words[i:]


def resolve_path(path: str, cwd: str | None) -> str:
    """``path`` made absolute against ``cwd`` when it can be; ``~`` stays as written."""
    for home in ("$HOME", "${HOME}"):
        if path == home or path.startswith(home + "/"):
            path = "~" + path[len(home) :]
    joined = path if path.startswith(("/", "~")) or not cwd else posixpath.join(cwd, path)
    return posixpath.normpath(joined) if joined else joined
