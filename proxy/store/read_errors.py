"""Whether a failed read of the store is the database's doing (away, too slow, damaged, a table
gone), which a page answers with a 503 that says so, rather than a bug of the page's."""

from __future__ import annotations

import sqlite3


def unreadable(exc: BaseException) -> bool:
    """SQLite's errors, a wait or a connection given up, and PostgreSQL's (asyncpg's, read by
    their module: not imported for a SQLite store)."""
    if isinstance(exc, sqlite3.DatabaseError | TimeoutError | ConnectionError | OSError):
        return True
    return type(exc).__module__.startswith("asyncpg")


def described(exc: BaseException) -> str:
    """The failure as a log line names it: its type, and its text when it has one (a timeout's
    is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
