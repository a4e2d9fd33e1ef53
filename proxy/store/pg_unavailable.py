"""A PostgreSQL store that cannot be opened (no server at the address, a login refused, no such
database) said in one line naming what failed, its URL's password never in it: ``ctxproxy``
prints it and exits 2, as it does for a SQLite file that is no database. ``serve`` asks
``check_reachable`` before it starts (the store is opened inside uvicorn's start-up, which would
say a failure as a traceback and exit 3); the other commands get ``StoreUnavailable`` from
``PostgresStore.open``. asyncpg is imported only when a PostgreSQL store is used."""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

from proxy.store.base import masked

# asyncpg's wait for a connection at start-up (``proxy.store.postgres`` connects with the same)
CONNECT_TIMEOUT_S = 5.0


class StoreUnavailable(Exception):
    """The store could not be opened; the message is one line, fit to print."""


def open_errors() -> tuple[type[BaseException], ...]:
    """What opening a store may fail with that is the database's or the URL's doing."""
    import asyncpg

    # (OverflowError: a port past 65535 in the URL, from the socket layer)
    return (
        OSError, TimeoutError, ValueError, OverflowError, asyncpg.PostgresError,
        asyncpg.InterfaceError,
    )  # fmt: skip


def unavailable(url: str, exc: BaseException) -> StoreUnavailable:
    reason = _reason(exc)
    try:
        password = urlsplit(url).password
    except ValueError:  # a malformed URL (its port): masked() has already hidden its password
        password = None
    if password:  # a driver's message might quote the URL it was given: its password there
        reason = reason.replace(f":{password}@", ":***@")  # (not the same letters elsewhere)
    return StoreUnavailable(f"the PostgreSQL store {masked(url)} cannot be opened: {reason}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT_S:g} s"
    if isinstance(exc, OSError):  # refused, host unknown, unreachable
        known = exc.errno is not None and exc.errno > 0 and not isinstance(exc, socket.gaierror)
        said = os.strerror(exc.errno) if known and exc.errno else exc.strerror
        if said:
            return said[:1].lower() + said[1:]
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


async def check_reachable(url: str) -> None:
    """Connect once and hang up; ``StoreUnavailable`` if that fails."""
    import asyncpg

    try:
        conn: Any = await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_S)
    except open_errors() as exc:
        raise unavailable(url, exc) from None
    await conn.close()
