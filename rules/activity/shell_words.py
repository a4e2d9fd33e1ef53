"""A shell command's words as ``shell_parse`` reads them: its flags, operands and option values
(an operand only the shell could expand is noted, never taken), and the script a shell runs
from ``-c``."""

from __future__ import annotations

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
