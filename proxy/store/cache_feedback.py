"""What the upstream said about its prompt cache on a session's latest request (tokens read from
the cache, tokens written to it, the prompt's size) and when that request was sent: the cost
model's feedback for the session's next request.

Kept in a bounded in-memory map, so the next request of a live session reads it without a
database round trip; written through the store's writer task (off the request's path) to the
``session_cache`` table, so it survives a restart. A newer request's feedback is never replaced
by an older one's (requests of a session may finish out of order)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.store.sqlite import Store

_UPSERT = (
    "INSERT INTO session_cache (session_id, at, prompt_tokens, cached_tokens, cache_write_tokens) "
    "VALUES (?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET at=excluded.at, "
    "prompt_tokens=excluded.prompt_tokens, cached_tokens=excluded.cached_tokens, "
    "cache_write_tokens=excluded.cache_write_tokens WHERE excluded.at >= session_cache.at"
)
_SELECT = (
    "SELECT at, prompt_tokens, cached_tokens, cache_write_tokens FROM session_cache "
    "WHERE session_id = ?"
)


@dataclass(frozen=True)
class CacheFeedback:
    at: float  # the request's created_at
    prompt_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None


class FeedbackStore:
    """Per session, its latest feedback (None cached too: a session with none costs one read)."""

    def __init__(self, store: Store, max_entries: int = 10_000) -> None:
        self._store = store
        self._known: OrderedDict[str, CacheFeedback | None] = OrderedDict()
        self._max = max_entries

    async def get(self, session_id: str) -> CacheFeedback | None:
        if session_id in self._known:
            self._known.move_to_end(session_id)
            return self._known[session_id]
        async with self._store.reader.execute(_SELECT, (session_id,)) as cur:
            row = await cur.fetchone()
        found = CacheFeedback(float(row[0]), row[1], row[2], row[3]) if row else None
        # a put may have landed while we read: it is newer than the row
        if session_id not in self._known:
            self._remember(session_id, found)
        return self._known.get(session_id, found)

    def put(self, session_id: str, feedback: CacheFeedback) -> None:
        known = self._known.get(session_id)
        if known is not None and known.at > feedback.at:
            return  # an older request finished after a newer one
        self._remember(session_id, feedback)
        self._store.write_later(
            _UPSERT,
            (
                session_id,
                feedback.at,
                feedback.prompt_tokens,
                feedback.cached_tokens,
                feedback.cache_write_tokens,
            ),
        )

    def _remember(self, session_id: str, value: CacheFeedback | None) -> None:
        self._known[session_id] = value
        self._known.move_to_end(session_id)
        while len(self._known) > self._max:
            self._known.popitem(last=False)
