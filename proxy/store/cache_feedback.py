"""What the upstream said about its prompt cache on a session's latest request (tokens read from
the cache, tokens written to it, the prompt's size) and when that request was sent: the cost
model's feedback for the session's next request.

Kept in a bounded in-memory map, so the next request of a live session reads it without a
database round trip (on PostgreSQL, the session's load brings the stored one along: another
replica may have served the latest request); the map is shared by every principal and evicts
fairly (``proxy.fair_lru``): one tenant's many sessions let their own reports go, never another
tenant's (whose next request would read it back, older if its write was still queued). Written
through the store's writer task (off the request's path) to the ``session_cache`` table, so it
survives a restart. A newer request's
feedback is never replaced by an older one's (requests of a session may finish out of order).

A report is dated by the request's clock, the host's; replicas sharing a database may not agree on
the time, so it is kept (in the map and the table) in the store's clock, the host's plus the
store's ``clock_offset`` (PostgreSQL: the database's clock, measured at each heartbeat; SQLite:
0), and read back in the host's: the newest request's report wins whichever replica served it, and
the cost model's idle time since it is the time really elapsed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from proxy.fair_lru import FairLRU
from proxy.principals import split_scoped
from proxy.store.dialect import Dialect

log = logging.getLogger("ctxproxy.store")


class _Database(Protocol):
    """What of the store (``proxy.store.base.Store``) this reads and writes through: named here
    so that the interface, which names ``FeedbackStore``, is not imported back."""

    @property
    def dialect(self) -> Dialect: ...

    async def fetchrow(self, sql: str, params: tuple[Any, ...]) -> Any: ...

    def write_later(
        self, sql: str, params: tuple[Any, ...], key: str | None = None, order: float = 0.0
    ) -> None: ...


@dataclass(frozen=True)
class CacheFeedback:
    at: float  # the request's created_at
    prompt_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None


class FeedbackStore:
    """Per session, its latest feedback (None cached too: a session with none costs one read)."""

    def __init__(
        self,
        store: _Database,
        max_entries: int = 10_000,
        unreachable: Callable[[BaseException], bool] = lambda exc: False,
        clock_offset: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._store = store
        self._offset = clock_offset  # the store's clock minus the host's
        # whether a read failed because the database is away (PostgreSQL's outage: the feedback
        # is done without, the outage logged where it is seen); an embedded file is never away
        self._unreachable = unreachable
        # session id (scoped to its principal) -> its latest report
        self._known: FairLRU[str, CacheFeedback | None] = FairLRU(max_entries)

    async def get(self, session_id: str) -> CacheFeedback | None:
        if session_id in self._known:
            return self._local(self._known.get(session_id))
        try:
            row = await self._store.fetchrow(self._store.dialect.feedback_select, (session_id,))
        except Exception as exc:
            if self._unreachable(exc):
                return None
            if not self._store.dialect.unreadable(exc):
                raise
            log.error("store: a session's cache feedback cannot be read (%s: %s); none is used",
                      type(exc).__name__, exc)  # fmt: skip
            return None
        found = CacheFeedback(float(row[0]), row[1], row[2], row[3]) if row else None
        # a put may have landed while we read: it is newer than the row
        if session_id not in self._known:
            self._remember(session_id, found)
        return self._local(self._known.peek(session_id) if session_id in self._known else found)

    def peek(self, session_id: str) -> tuple[bool, CacheFeedback | None]:
        """(known, feedback) without reading the database."""
        return session_id in self._known, self._local(self._known.peek(session_id))

    def put(self, session_id: str, feedback: CacheFeedback) -> None:
        """Keep a request's report, dated by the host's clock."""
        offset = self._offset()
        if offset:
            feedback = replace(feedback, at=feedback.at + offset)
        known = self._known.peek(session_id)
        if known is not None and known.at > feedback.at:
            return  # an older request finished after a newer one
        self._remember(session_id, feedback)
        self._store.write_later(
            self._store.dialect.feedback_upsert,
            (
                session_id,
                feedback.at,
                feedback.prompt_tokens,
                feedback.cached_tokens,
                feedback.cache_write_tokens,
            ),
            key=session_id,  # a batch writes only the newest of the session's
            order=feedback.at,
        )

    def offer(self, session_id: str, stored: CacheFeedback | None) -> None:
        """What the database holds for the session (in the store's clock), read by another query
        (PostgreSQL reads it with the session's state): kept unless this process knows a newer
        one."""
        known = self._known.peek(session_id)
        if known is None or (stored is not None and stored.at > known.at):
            self._remember(session_id, stored)
        else:
            self._known.get(session_id)  # its principal's most recently used

    def _local(self, feedback: CacheFeedback | None) -> CacheFeedback | None:
        """A report kept in the store's clock, dated in the host's."""
        offset = self._offset()
        if feedback is None or not offset:
            return feedback
        return replace(feedback, at=feedback.at - offset)

    def _remember(self, session_id: str, value: CacheFeedback | None) -> None:
        self._known.put(session_id, value, split_scoped(session_id)[0])

    def forget(self, session_id: str) -> None:
        """Let the session's report go (its session was deleted)."""
        self._known.pop(session_id)
