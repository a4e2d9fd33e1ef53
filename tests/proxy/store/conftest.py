"""Stores for the contract tests: SQLite on a temp file, and PostgreSQL on a real server
(``tests.support.postgres``, one per test session, a fresh database per test). Without a
PostgreSQL server the PostgreSQL cases skip with the reason."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.store.base import Store

StoreFactory = Callable[..., Store]


@pytest.fixture(params=["sqlite", "postgresql"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Builds (does not open) stores on one fresh database: ``make_store(**options)``."""
    if request.param == "sqlite":
        from proxy.store.sqlite import SQLiteStore

        path = str(tmp_path / "store.db")
        return lambda **options: SQLiteStore(path, **options)
    from proxy.store.postgres import PostgresStore

    url = request.getfixturevalue("pg_server").database()
    return lambda **options: PostgresStore(url, **options)


@pytest.fixture
async def store(make_store: StoreFactory) -> AsyncIterator[Any]:
    opened = make_store(batch_window_s=0.01)
    await opened.open()
    yield opened
    await opened.close()
