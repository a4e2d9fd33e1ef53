"""An engine in strict mode (a rule that raises fails the request) over a SQLite store in a
test's folder, for tests that rewrite bodies through the engine as the server does."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store


@contextlib.asynccontextmanager
async def strict_engine(folder: Path) -> AsyncIterator[Engine]:
    store = Store(str(folder / "db"))
    await store.open()
    engine = Engine(settings_from_mapping({"upstreams": [{"name": "o"}]}), store, strict=True)
    try:
        yield engine
    finally:
        engine.close()
        await store.close()
