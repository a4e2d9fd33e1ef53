"""The SQLite store's file made readable by its owner alone.

It holds what ``/ui`` and ``ctxproxy logs``/``show`` keep behind the admin key: the server
secret behind every principal's name, the sessions' state, captured payloads. Created under the
default umask (022) it was 0644, its folder 0755: any user of the host read it all. A new file is
made 0600 before SQLite opens it (SQLite gives its ``-wal`` and ``-shm`` files the database
file's mode), a folder made for it 0700. An existing file others may read is left as it is
(its owner may share it on purpose) and said at start-up."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("ctxproxy.store")

OWNER_ONLY = 0o600


def private_folders(path: Path) -> None:
    """Make the folders ``path`` is in that are missing, each 0700 (``parents=True`` makes them
    0777 - umask)."""
    missing = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


def private_database(path: Path) -> None:
    """Make ``path``'s folder (0700, if made here) and the file (0600, if new); warn when an
    existing one is readable by others."""
    private_folders(path)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, OWNER_ONLY)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning(
                "the database %s is readable by other users of this host (mode %o): it holds "
                "the server secret and every session's state; chmod 600 it",
                path,
                mode,
            )
        return
    os.close(descriptor)
