"""What ``find … -delete`` (or ``-exec rm -rf {} +``) removed: of the paths known to exist,
those under its starting folders whose name matches its ``-name``/``-iname`` patterns and whose
kind its ``-type`` allows. Only the plain form is read: an expression with any other
predicate or option (``-o``, ``!``, parentheses, ``-path``, ``-empty``, ``-maxdepth``, ``-mtime``,
``-size`` …), or a start only the shell names, removes nothing the reader can tell (it is left
out: a wrong end is worse than none).

Bounded: patterns of at most ``MAX_PATTERN`` characters, at most ``MAX_REMOVED`` paths a
command, and ``MAX_VISITS`` known paths looked at by all the finds of a line.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Sequence

MAX_PATTERN = 100
MAX_REMOVED = 64
MAX_VISITS = 20_000  # known paths looked at by the finds of one command line, all of them
_REMOVERS = frozenset(("rm", "unlink", "rmdir"))
# the predicates and options read; any other (`-o`, `!`, `-path`, `-empty`, `-maxdepth`,
# `-mtime`, `-size` …) narrows or widens what is found in a way not followed: nothing is ended
_READ = frozenset(
    ("-name", "-iname", "-type", "-delete", "-exec", "-execdir", "-print", "-depth", "-xdev",
     "-mount", "-P", "-L", "-H", "-ignore_readdir_race")
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


def _unread(words: Sequence[str]) -> bool:
    """Whether the expression holds a predicate or option not read (``_READ``); the words of an
    ``-exec`` up to its ``;`` or ``+`` are its command's, and values follow their option."""
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-exec", "-execdir"):
            while i < len(words) and words[i] not in (";", "+", "\\;"):
                i += 1
        elif word in ("-name", "-iname", "-type"):
            i += 1
        elif (word.startswith("-") or word in ("!", "(", ")")) and word not in _READ:
            return True
        i += 1
    return False


def find_deletes(
    argv: Sequence[str],
    cwd: str | None,
    known: Iterable[tuple[str, str | None]],
    left: list[int] | None = None,
) -> list[tuple[str, str | None]]:
    """(path, kind) of each known path ``find`` with ``argv`` (its words, ``find`` first)
    deleted; ``known``: (path, kind or None) of what is known to exist, resolved. ``left``: the
    known paths the line's finds may still look at (``MAX_VISITS``), shared by them; past it,
    nothing more is ended."""
    words = list(argv[1:])
    if not _removes(words):
        return []
    first = next((k for k, w in enumerate(words) if w[:1] in ("-", "!", "(")), len(words))
    starts, words = words[:first], words[first:]
    if _unread(words):
        return []
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
    left = [MAX_VISITS] if left is None else left
    for path, typ in known:
        if left[0] <= 0:
            break
        left[0] -= 1
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
