"""The choice of the store at start-up: SQLite (``proxy.store.sqlite``) or PostgreSQL
(``proxy.store.postgres``), selected by ``store.url`` (or ``CTXPROXY_STORE_URL``, which wins)
being a ``postgresql://`` address. Apart from ``proxy.store.base`` (the interface both
implement) so that the interface imports neither implementation."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from proxy.store import retention

if TYPE_CHECKING:
    from proxy.settings import StoreSettings
    from proxy.store.base import Store

URL_ENV = "CTXPROXY_STORE_URL"


def store_url(settings: StoreSettings, db: str | None = None) -> str:
    """The store to open: ``db`` (a command's ``--db``: a path or a URL), else
    ``CTXPROXY_STORE_URL``, else ``store.url``, else the SQLite file ``store.path``. A URL that
    is not PostgreSQL's (``postgresql+asyncpg://``, ``mysql://``), and ``CTXPROXY_STORE_URL``
    holding anything else, is refused: it was opened as a SQLite file of that name, and the
    error that followed printed its password."""
    from proxy.settings import SettingsError
    from proxy.store.base import masked

    env = os.environ.get(URL_ENV, "").strip()
    url = db or env or settings.url or settings.path
    if not is_postgres(url) and (("://" in url) or (url == env and not db)):
        source = "--db" if db else URL_ENV if url == env else "store.url"
        raise SettingsError(
            f"{source}: {masked(url)[:200]!r} is not a postgresql:// URL"
            + ("" if source == "--db" else " (a SQLite file is store.path or --db)")
        )
    return url


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def create_store(settings: StoreSettings, db: str | None = None, **options: Any) -> Store:
    """The store ``store_url`` names, not opened yet."""
    url = store_url(settings, db)
    if is_postgres(url):
        from proxy.store.postgres import PostgresStore

        return PostgresStore(
            url,
            pool_size=settings.pool_size,
            buffer_rows=settings.buffer_rows,
            buffer_bytes=settings.buffer_bytes,
            lock_timeout_s=settings.lock_timeout_s,
            heartbeat_s=settings.heartbeat_s,
            **options,
        )
    from proxy.store.sqlite import SQLiteStore

    return SQLiteStore(
        url, buffer_rows=settings.buffer_rows, buffer_bytes=settings.buffer_bytes, **options
    )


async def vacuum(
    settings: StoreSettings,
    url: str,
    retention_days: float,
    session_ttl_days: float,
    full: bool,
    live: bool = False,
) -> dict[str, Any]:
    """``ctxproxy vacuum``: the retention applied now, then (SQLite) the file compacted, never
    rewritten while a server uses it (``live``); PostgreSQL's autovacuum reclaims the space on
    its own."""
    from proxy.store.sqlite import SQLiteStore

    store = create_store(settings, db=url)
    await store.open()
    try:
        out: dict[str, Any] = {"retention_days": retention_days}
        out["session_ttl_days"] = session_ttl_days
        out["deleted"] = await retention.prune_now(store, retention_days, session_ttl_days)
        if isinstance(store, SQLiteStore):
            out.update(await retention.compact_sqlite(store, full=full, live=live))
        else:
            out["compaction"] = "autovacuum"
        return out
    finally:
        await store.close()
