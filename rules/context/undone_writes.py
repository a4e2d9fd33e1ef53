"""Files a run took back: deleted (``rm``, ``git rm``, ``rmdir``, Python's ``os.remove``; a move's
source) or reverted (``git checkout -- f``, ``git checkout f`` of a changed file, ``git restore
f``). The working set lists the files the agent changed; one it removed or reverted since is
changed no longer (a scratch ``reproduce.py`` deleted at the end stayed listed beside the real
fix). A folder takes back the files under it where the line says which folder it is: an absolute
path (``rm -rf /testbed/build``, ``cd /testbed && git checkout .``) or a path git reads from the
line's folder, as it stands (``git checkout -- src/``); ``git reset --hard`` takes back them all.
A ``.`` in a folder the line does not name (a shell that kept an earlier call's ``cd``) takes back
nothing: a list kept too long is better than the agent's work forgotten. A merge's side chosen
(``git checkout --theirs f``) is still a change. A move's destination is changed when its source
was (``moved_to``), or when git moved it (a rename is a change); a copy's destination is
changed (``copied_to``)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from rules.activity.shell_lex import split_commands
from rules.activity.shell_parse import analyse, load_verbs

MAX_COMMAND_CHARS = 20_000  # a command line read for what it took back
MAX_UNDONE = 256  # paths one command line is taken to take back
_GLOB = re.compile(r"[*?\[]")  # a source the shell expands
EVERYTHING = "."  # a revert of the whole work tree
_BRANCHING = frozenset({"-b", "-B", "--orphan", "-c", "-C"})  # checkout/switch making a branch
# a merge's side or a part of a file chosen: the file is still changed
_CHOOSING = frozenset({"--theirs", "--ours", "-m", "--merge", "-p", "--patch", "--conflict"})
_RESTORE_VALUES = frozenset({"-s", "--source"})
_HEAD = frozenset({"HEAD", "@"})
# a line without one of these takes nothing back
_TOUCHES = ("rm", "mv", "git", "python", "find")


@dataclass(frozen=True)
class Undone:
    """What a line took back: ``files`` name a changed path as written or as its end (a relative
    ``reproduce.py`` names ``/testbed/reproduce.py``); ``folders`` take back the paths under
    them too."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.files or self.folders)


def undone_paths(command: str, changed: Iterable[str] = ()) -> Undone:
    """What ``command`` deleted or reverted (as written, normalised; ``cd`` followed).
    ``changed``: the changed files; those of them a ``find … -delete`` matches are deleted."""
    command = command[:MAX_COMMAND_CHARS]
    if not any(w in command for w in _TOUCHES):
        return Undone()
    files: list[str] = []
    folders: list[str] = []
    # a find removes what it finds of the paths known to exist: the absolute changed ones
    known = {p: "file" for p in changed if p[:1] == "/"} if "find" in command else None
    for e in analyse(command, None, load_verbs(), known).effects:
        if e.action in ("delete", "move"):
            path = (e.source if e.action == "move" else e.path) or ""
            files.append(path)
            if path.startswith("/"):  # a folder named whole: what is under it goes with it
                folders.append(path)
    cwd: str | None = None
    for cmd in split_commands(command):
        argv = list(cmd.argv)
        if argv[:1] == ["cd"]:
            cwd = _joined(cwd, argv[1]) if len(argv) > 1 else None
            continue
        for path in _reverted(argv):
            if path == EVERYTHING and argv[1] != "reset":
                if cwd is None:
                    continue  # `.` of a folder only an earlier call named: unknown
                path = cwd
            else:
                path = _joined(cwd, path)
            files.append(path)
            folders.append(path)
    return Undone(_bounded(files), _bounded(folders))


def _bounded(paths: list[str]) -> tuple[str, ...]:
    return tuple(p for p in dict.fromkeys(paths) if p)[:MAX_UNDONE]


def moved_to(command: str, changed: list[str]) -> tuple[str, ...]:
    """Where ``command`` moved a changed file to (``mv``, ``git mv``), or any file git moved."""
    command = command[:MAX_COMMAND_CHARS]
    if "mv" not in command:
        return ()
    by_git = "git mv" in command
    effects = analyse(command, None, load_verbs()).effects
    # a glob's moves (``git mv *.jpg ui/``): which files, only the shell knows
    out = [
        e.path
        for e in effects
        if e.action == "move"
        and e.path
        and not _GLOB.search(e.source or "")
        and not _GLOB.search(e.path)
        and (by_git or _any_named(changed, e.source or ""))
    ]
    return tuple(dict.fromkeys(out))[:MAX_UNDONE]


def copied_to(command: str) -> tuple[str, ...]:
    """The files ``command`` copied to (``cp a.py.orig a.py``): written, as a file tool's
    write is; a folder copied (``cp -r src dst``) is no changed file."""
    command = command[:MAX_COMMAND_CHARS]
    if "cp" not in command:
        return ()
    effects = analyse(command, None, load_verbs()).effects
    # a glob's copies go into a folder (``cp src/*.py dst``): which files, only the shell knows
    out = [
        posixpath.normpath(e.path)  # ``cp x.py .``: ``x.py``
        for e in effects
        if e.action == "copy" and e.type == "file" and e.path and not _GLOB.search(e.source or "")
        and not _backup_of(e.path, e.source or "")
    ]
    return tuple(dict.fromkeys(out))[:MAX_UNDONE]


# A copy kept aside (``cp a.py a.py.bak``, ``cp a.py /tmp/a.py.orig``): the source's name and a
# backup's ending; no file of the task changed by it
_BACKUP = re.compile(r"(?:\.(?:bak|orig|backup|old|save|saved|copy)\d{0,3}|~)")


def _backup_of(path: str, source: str) -> bool:
    name, kept = posixpath.basename(source), posixpath.basename(path)
    return bool(name) and kept.startswith(name) and _BACKUP.fullmatch(kept, len(name)) is not None


def _any_named(paths: list[str], source: str) -> bool:
    return bool(source) and any(_file_named(p, {source}) for p in paths)


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
    if sub in ("checkout", "restore") and _CHOOSING.intersection(rest):
        return []
    if sub == "checkout" and "--" in rest:  # git checkout [REV] -- f: the file as committed
        at = rest.index("--")
        if not _at_head(a for a in rest[:at] if not a.startswith("-")):
            return []  # another revision's file: changed from HEAD still
        return [a for a in rest[at + 1 :] if a]
    if sub == "checkout" and not _BRANCHING.intersection(rest):
        # git checkout [REV] f: an operand is a revision or a path; one shaped as a path is
        # taken for one, and takes back only a changed file (or folder) it names
        words = [a for a in rest if not a.startswith("-")]
        paths = [a for a in words if "/" in a or "." in a]
        return paths if _at_head(a for a in words if a not in paths) else []
    if sub == "restore" and ("--staged" not in rest or "--worktree" in rest or "-W" in rest):
        out, skip, source = [], False, []
        for a in rest:
            if skip:
                skip = False
                source.append(a)
            elif a in _RESTORE_VALUES:
                skip = True
            elif a.startswith("--source="):
                source.append(a.partition("=")[2])
            elif a and not a.startswith("-"):
                out.append(a)
        return out if _at_head(source) else []
    return []


def _at_head(revisions: Iterable[str]) -> bool:
    """Whether the revisions a checkout or restore names are none or HEAD's: a file taken from
    another (``HEAD~1``, ``a1b2c3d``, ``v1.2``) is changed from HEAD, not taken back."""
    return all(r in _HEAD for r in revisions)


def without(paths: list[str], undone: Undone) -> list[str]:
    """``paths`` less those ``undone`` names (a relative file names the path it ends) and those
    under a folder it names (a relative folder: under it wherever it stands in the path)."""
    folders = [f.rstrip("/") or "/" for f in undone.folders]
    if EVERYTHING in folders:
        return []
    files = set(undone.files)
    return [p for p in paths if not (_file_named(p, files) or _under(p, folders))]


def _file_named(path: str, files: set[str]) -> bool:
    if path in files:
        return True
    parts = path.split("/")[-64:]  # a path's last 64 names: no deeper one is kept
    if any("/".join(parts[i:]) in files for i in range(1, len(parts))):
        return True  # /testbed/reproduce.py, deleted as reproduce.py
    return any(f.endswith("/" + path) for f in files)  # reproduce.py, deleted as /testbed/…


def _under(path: str, folders: list[str]) -> bool:
    """Whether ``path`` is under one of ``folders`` (each a substring test: linear)."""
    slashed = "/" + path.lstrip("/")
    for folder in folders:
        if folder.startswith("/"):
            if path.startswith(folder + "/") or folder == "/":
                return True
        elif "/" + folder + "/" in slashed:
            return True
    return False
