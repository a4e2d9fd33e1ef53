"""The per-session cache report: kept in a bounded map, written by the store's writer task to
``session_cache``, read back after a restart or an eviction; an older request's report never
replaces a newer one's, in memory or on disk."""

from __future__ import annotations

from pathlib import Path

from proxy.store.cache_feedback import CacheFeedback, FeedbackStore
from proxy.store.sqlite import Store

NEWER = CacheFeedback(at=200.0, prompt_tokens=3000, cached_tokens=2048, cache_write_tokens=None)
OLDER = CacheFeedback(at=100.0, prompt_tokens=2500, cached_tokens=0, cache_write_tokens=2400)


async def test_an_older_report_never_replaces_a_newer_one(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    store = Store(db)
    await store.open()
    try:
        store.cache_feedback.put("s", NEWER)
        store.cache_feedback.put("s", OLDER)  # a slower, earlier request finishing last
        assert await store.cache_feedback.get("s") == NEWER
        assert await store.cache_feedback.get("never-seen") is None
    finally:
        await store.close()
    reopened = Store(db)
    await reopened.open()
    try:
        assert await reopened.cache_feedback.get("s") == NEWER
        # a map that no longer knows "s" lets an older report through: the table keeps the newer
        reopened.cache_feedback = FeedbackStore(reopened, max_entries=1)
        reopened.cache_feedback.put("s", OLDER)
        reopened.cache_feedback.put("other", OLDER)  # evicts "s"
        await reopened.flush()
        assert await reopened.cache_feedback.get("s") == NEWER
    finally:
        await reopened.close()


async def test_an_evicted_session_is_read_back_from_the_table(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    try:
        store.cache_feedback = FeedbackStore(store, max_entries=2)
        for i in range(5):
            store.cache_feedback.put(f"s{i}", CacheFeedback(float(i), 100 + i, i, None))
        await store.flush()
        assert len(store.cache_feedback._known) == 2  # bounded
        assert await store.cache_feedback.get("s0") == CacheFeedback(0.0, 100, 0, None)
    finally:
        await store.close()
