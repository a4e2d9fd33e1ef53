"""Paths whose kind is known without looking: the folders every system has (``mv out /tmp``
moves ``out`` into /tmp, it does not rename it /tmp), the files an append goes to that were
there before it (``>> ~/.bashrc``), and what a listing showed with its kind unknown."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

# folders every Unix system has: `mv out /tmp` moves out into /tmp, it does not rename it /tmp
_SYSTEM_FOLDERS = frozenset(
    [
        "/",
        "/tmp",
        "/var/tmp",
        "/dev/shm",
        "/opt",
        "/srv",
        "/mnt",
        "/media",
        "/etc",
        "/root",
        "/home",
        "/Users",
        "/usr",
        "/usr/local",
        "/usr/local/bin",
        "/usr/local/lib",
        "/usr/local/share",
        "/usr/local/src",
        "/usr/bin",
        "/usr/lib",
        "/usr/share",
        "/usr/src",
        "/bin",
        "/sbin",
        "/var",
        "/var/log",
        "/var/lib",
        "/var/www",
        "/var/cache",
        "/var/backups",
    ]
)


def system_folder(path: str) -> bool:
    """Whether ``path`` is a folder every system has, or a user's home (``/home/u``)."""
    path = path.rstrip("/") or "/"
    if path in _SYSTEM_FOLDERS:
        return True
    parent, _, name = path.rpartition("/")
    return parent in ("/home", "/Users") and bool(name)


def appended_file_was_there(path: str, cwd: str | None) -> bool:
    """Whether an append to ``path`` is to a file that was there: a dotfile (`.gitignore`,
    `~/.bashrc`) or one outside the project in a home or /etc. "The file you created" pointing
    at one would be wrong; an append to a new log in the project still makes it."""
    home = _home_of(cwd)
    if home is not None and path.startswith("~/"):
        path = home + path[1:]  # ``~/proj/run.log`` from within /home/u/proj
    if cwd is not None and path.startswith(cwd.rstrip("/") + "/"):
        return posixpath.basename(path).startswith(".")  # in the tree, a dotfile was there
    base = posixpath.basename(path)
    if base.startswith(".") and base not in (".", ".."):
        return True
    return path.startswith(("~/", "/root/", "/home/", "/Users/", "/etc/"))


def listed_exists(known: Mapping[str, str], path: str) -> bool:
    """Whether ``known`` holds ``path``, or says it exists with its kind unknown (its
    ``exists``: a name a plain ``ls`` listed)."""
    probe = getattr(known, "exists", None)
    return bool(probe(path)) if probe is not None else path in known


def _home_of(cwd: str | None) -> str | None:
    """The home a working folder lies in (``/home/u``, ``/Users/u``, ``/root``), if one."""
    if cwd is None:
        return None
    parts = cwd.split("/")
    if len(parts) >= 3 and parts[1] in ("home", "Users") and parts[2]:
        return "/".join(parts[:3])
    return "/root" if cwd == "/root" or cwd.startswith("/root/") else None
