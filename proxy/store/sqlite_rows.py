"""The SQLite writer's slow paths, when a batch's one transaction fails: row by row (a row SQLite
refuses is lost, the others are written), or statement by statement (a table gone or a damaged
file: what can still be written is, a session's state apart from the log's rows)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import Any

import aiosqlite

Groups = list[tuple[str, list[tuple[Any, ...]]]]  # each statement and its rows
log = logging.getLogger("ctxproxy.store")

# What one row can raise (a taken primary key, a value SQLite cannot hold): that row is lost, the
# others are written. OperationalError (a locked database) is not among them: it is retried.
ROW_ERRORS = (
    sqlite3.IntegrityError,
    sqlite3.InterfaceError,
    sqlite3.ProgrammingError,
    sqlite3.DataError,
    OverflowError,
    TypeError,
    ValueError,
)


async def write_rows(conn: aiosqlite.Connection, groups: Groups) -> int:
    """Each row on its own, in the caller's transaction; how many could not be written."""
    failed = 0
    for sql, rows in groups:
        for params in rows:
            try:
                await conn.execute(sql, params)
            except ROW_ERRORS:
                failed += 1
    return failed


async def write_apart(conn: aiosqlite.Connection, groups: Groups) -> int:
    """Each statement's rows in a transaction of their own; how many were lost (logged, with
    what SQLite said: "no such table: requests", "database disk image is malformed")."""
    lost = 0
    for sql, rows in groups:
        try:
            await conn.executemany(sql, rows)
            await conn.commit()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                await conn.rollback()
            lost += len(rows)
            log.error("store: %d writes lost (%s: %s)", len(rows), type(exc).__name__, exc)
    return lost
