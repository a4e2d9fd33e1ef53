from __future__ import annotations

from pathlib import Path

import pytest

from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    """An engine with an Anthropic upstream on a fresh store, failing on any rule error."""
    store = Store(str(tmp_path / "db"))
    await store.open()
    settings = settings_from_mapping({"upstreams": [{"name": "a", "kind": "anthropic"}]})
    eng = Engine(settings, store, strict=True)
    yield eng
    eng.close()
    await store.close()
