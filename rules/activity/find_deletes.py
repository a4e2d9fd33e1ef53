"""What ``find … -delete`` (or ``-exec rm -rf {} +``) removed: of the paths known to exist,
those under its starting folders whose name matches its ``-name``/``-iname`` patterns and whose
kind its ``-type`` allows. Only the plain form is read: an expression with ``-o``, ``!``,
``-not``, parentheses, ``-path`` or ``-regex``, or a start only the shell names, removes nothing
the reader can tell (it is left out: a wrong end is worse than none).

Bounded: patterns of at most ``MAX_PATTERN`` characters, at most ``MAX_REMOVED`` paths a
command, and each known path is looked at once.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Sequence

MAX_PATTERN = 100
MAX_REMOVED = 64
_REMOVERS = frozenset(("rm", "unlink", "rmdir"))
_UNREAD = frozenset(
    ("-o", "-or", "!", "-not", "(", ")", "-path", "-wholename", "-ipath", "-regex", "-iregex",
     "-prune", "-newer", "-links", "-samefile", "-inum")
)  # fmt: skip
_TYPES = {"f": "file", "d": "folder"}


def _removes(words: Sequence[str]) -> bool:
    """Whether the expression deletes what it finds: ``-delete``, or ``-exec rm … {}``."""
    if "-delete" in words:
        return True
    for i, word in enumerate(words[:-1]):
        if word in ("-exec", "-execdir") and posixpath.basename(words[i + 1]) in _REMOVERS:
            return "{}" in words[i + 2 :]
    return False


def find_deletes(
    argv: Sequence[str], cwd: str | None, known: Iterable[tuple[str, str | None]]
) -> list[tuple[str, str | None]]:
    """(path, kind) of each known path ``find`` with ``argv`` (its words, ``find`` first)
    deleted; ``known``: (path, kind or None) of what is known to exist, resolved."""
    words = list(argv[1:])
    if not _removes(words) or any(w in _UNREAD for w in words):
        return []
    starts: list[str] = []
    while words and not words[0].startswith("-"):
        starts.append(words.pop(0))
    names: list[tuple[str, bool]] = []  # (pattern, case-insensitive)
    kinds: set[str] = set()
    for i, word in enumerate(words[:-1]):
        value = words[i + 1]
        if word in ("-name", "-iname"):
            if len(value) > MAX_PATTERN or "$" in value or "`" in value:
                return []
            names.append((value.lower() if word == "-iname" else value, word == "-iname"))
        elif word == "-type":
            kinds.update(_TYPES.get(t, "other") for t in value.split(","))
    roots = []
    for start in starts or ["."]:
        if "$" in start or "`" in start or any(c in start for c in "*?["):
            return []
        if start.startswith(("/", "~")):
            roots.append(posixpath.normpath(start))
        elif cwd is not None:
            roots.append(posixpath.normpath(posixpath.join(cwd, start)))
        else:
            return []
    out: list[tuple[str, str | None]] = []
    for path, typ in known:
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            continue
        if kinds and typ not in kinds:
            continue
        base = posixpath.basename(path)
        if all(fnmatch.fnmatchcase(base.lower() if low else base, p) for p, low in names):
            out.append((path, typ))
            if len(out) >= MAX_REMOVED:
                break
    # a folder's deletion ends what is in it (track_entities): what is inside is not said twice
    folders = {p.rstrip("/") + "/" for p, t in out if t == "folder"}
    return [(p, t) for p, t in out if not any(p.startswith(f) for f in folders)]
