"""What ``rsync`` copies where, by its rules for a source's trailing slash: ``rsync -a src/
backup/src/`` puts src's contents in backup/src (the folder made), ``rsync -a src backup/``
puts src in backup/src, and a file goes to the destination or into it when that is a folder.
A remote operand (``host:path``, ``rsync://…``) is none of this machine's."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from rules.activity.shell_words import has_short


def _remote(word: str) -> bool:
    head = word.split("/", 1)[0]
    return ":" in head or word.startswith("rsync://")


def rsync_copies(
    flags: list[str],
    ops: list[str],
    resolved: Callable[[str], str],
    known: Callable[[str], str | None],
) -> list[tuple[str, str, str]]:
    """(type, path, source) of each copy ``rsync FLAGS OPS`` makes (none for a dry run, ``-n``);
    ``resolved``: an operand's path (the working directory's), ``known``: a path's type."""
    if len(ops) < 2 or _remote(ops[-1]) or has_short(flags, "n") or "--dry-run" in flags:
        return []
    target = ops[-1]
    dest = resolved(target)
    out = []
    for op in ops[:-1]:
        if _remote(op):
            continue
        source = resolved(op)
        named_folder = op.endswith("/") or "." not in posixpath.basename(op.rstrip("/")).lstrip(".")
        typ = known(source) or ("folder" if named_folder else "file")
        if typ == "folder":
            path = dest if op.endswith("/") else posixpath.join(dest, posixpath.basename(source))
        elif target.endswith("/") or known(dest) == "folder" or len(ops) > 2:
            path = posixpath.join(dest, posixpath.basename(source))
        else:
            path = dest
        out.append((typ, path, source))
    return out
