"""A SQLite batch the file's lock refused (another process's transaction: a backup, a ``sqlite3``
shell left open) is waited for, not lost: tried again until the lock goes, the writes behind it
queued (bounded by ``store.buffer_rows``, as while the file is away). Closing, or refused for
another reason, it is given up after ``WRITE_ATTEMPTS``."""

from __future__ import annotations

import asyncio
import logging

from proxy.store.dialect import transient

log = logging.getLogger("ctxproxy.store")

WRITE_ATTEMPTS = 4


async def tried_again(
    attempt: int, exc: BaseException, closing: bool, held: int, queued: int
) -> bool:
    """After the batch's ``attempt``-th refusal (``held`` writes, ``queued`` behind them):
    whether to try it again, once a pause has passed."""
    if attempt >= WRITE_ATTEMPTS and (closing or not transient(exc)):
        return False
    if attempt == WRITE_ATTEMPTS:
        log.warning(
            "store: the database is locked by another process; %d writes held, retried until "
            "it lets go (queued behind: %d)", held, queued,
        )  # fmt: skip
    await asyncio.sleep(min(0.2 * attempt, 2.0))
    return True
