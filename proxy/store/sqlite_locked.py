"""A SQLite batch the file's lock refused (another process's transaction: a backup, a ``sqlite3``
shell left open), or its full disk, is waited for, not lost: tried again until the lock goes (or
room is freed), the writes behind it queued (bounded by ``store.buffer_rows``, as while the file
is away). Closing, or refused for another reason, it is given up after ``WRITE_ATTEMPTS``."""

from __future__ import annotations

import asyncio
import logging

from proxy.store.dialect import transient

log = logging.getLogger("ctxproxy.store")

WRITE_ATTEMPTS = 4


def full(exc: BaseException) -> bool:
    """SQLITE_FULL: the file's disk (or its ``max_page_count``) has no room; freeing some mends
    it, as a lock's end does."""
    return "disk is full" in str(exc).lower()


def waits(exc: BaseException) -> bool:
    """A refusal that the writes wait out (held, bounded) rather than lose."""
    return transient(exc) or full(exc)


async def tried_again(
    attempt: int, exc: BaseException, closing: bool, held: int, queued: int
) -> bool:
    """After the batch's ``attempt``-th refusal (``held`` writes, ``queued`` behind them):
    whether to try it again, once a pause has passed."""
    if attempt >= WRITE_ATTEMPTS and (closing or not waits(exc)):
        return False
    if attempt == WRITE_ATTEMPTS:
        why = "its disk is full" if full(exc) else "it is locked by another process"
        log.warning(
            "store: the database takes no writes, %s; %d writes held, retried until it does "
            "(queued behind: %d)", why, held, queued,
        )  # fmt: skip
    await asyncio.sleep(min(0.2 * attempt, 2.0))
    return True
