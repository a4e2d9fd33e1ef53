"""One ``ctxproxy serve`` per SQLite file. Each server keeps its sessions' state in memory and
writes it back over whatever is stored: two on one file would overwrite each other's sessions
unnoticed. ``serve`` therefore holds an exclusive advisory lock on ``<db>.lock`` (``flock``) for
its lifetime; a second is refused. The lock goes with the process, however it ends. The commands
that read (``logs``, ``show``) never take it; ``vacuum --full`` asks whether it is held
(``serving``). Several servers share a PostgreSQL store instead, which needs no such lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from proxy.store.factory import is_postgres
from proxy.store.private_file import private_folders


class ServeLockError(Exception):
    """Another process serves this SQLite file, or its lock file cannot be made."""


def lock_path(db: str) -> str | None:
    """Where the lock of the store ``db`` is; None for a store that takes none."""
    if is_postgres(db) or db == ":memory:":
        return None
    return os.path.abspath(db) + ".lock"


def hold(db: str) -> IO[str] | None:
    """The lock of ``db``, taken for as long as the returned file stays open."""
    path = lock_path(db)
    if path is None:
        return None
    try:
        # the log's folder as the store would make it (0700): the lock comes first
        private_folders(Path(path))
        handle = open(path, "a+")  # noqa: SIM115 - held open for the process's lifetime
    except OSError as exc:
        raise ServeLockError(f"cannot make the lock file {path}: {exc.strerror}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid = handle.read().strip()
        handle.close()
        who = f" (pid {pid})" if pid.isdigit() else ""
        raise ServeLockError(
            f"another ctxproxy serve{who} is using {os.path.abspath(db)} (it holds {path}); "
            "a SQLite log serves one process: stop that one, give this one another --db, or "
            "share a PostgreSQL store between them"
        ) from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")  # who holds it, for the refusal above
    handle.flush()
    return handle


def serving(db: str) -> bool:
    """Whether a ``ctxproxy serve`` holds the lock of ``db`` now."""
    path = lock_path(db)
    if path is None or not os.path.exists(path):
        return False
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_UN)
    return False
