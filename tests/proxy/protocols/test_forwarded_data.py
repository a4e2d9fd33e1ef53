"""An adapter that has every forwarded message's bytes already (a client message's own, a changed
one's kept JSON) hands the forwarded body's bytes with it, and they are its JSON exactly: what the
server sends instead of writing the body again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.anthropic import AnthropicAdapter
from proxy.protocols.base import Adapter
from proxy.protocols.responses import ResponsesAdapter
from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store
from tests.proxy.server.test_body_reuse import anthropic_turns, responses_turns

ADAPTERS: dict[str, tuple[Callable[[], Adapter], Callable[[int], dict[str, Any]]]] = {
    "messages": (AnthropicAdapter, anthropic_turns),
    "responses": (ResponsesAdapter, responses_turns),
}


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
async def test_the_forwarded_bodys_bytes_come_with_it(tmp_path: Path, protocol: str) -> None:
    new_adapter, turns = ADAPTERS[protocol]
    adapter = new_adapter()
    store = Store(str(tmp_path / "db"))
    await store.open()
    # not strict: the engine's own check of the bytes is what this test stands in for
    engine = Engine(settings_from_mapping({}), store)
    known = 0
    try:
        for k in range(1, 9):
            body = orjson.loads(orjson.dumps(turns(k)))
            done = await engine.rewrite(
                body, {"x-session-id": "s"}, now=1000.0 + k, adapter=adapter
            )
            assert done.body is not body  # the last message points at the folder
            if done.data is not None:
                assert done.data == orjson.dumps(done.body)
                known += 1
    finally:
        engine.close()
        await store.close()
    assert known >= 6  # every request after the first two or so
