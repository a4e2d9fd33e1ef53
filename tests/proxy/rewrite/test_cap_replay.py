"""A result capped when it first appeared is replayed as it was forwarded, whatever
``max_result_tokens`` says later: the cap was stored without its size and rendered anew with
the current option on every request, so a restart with another value rewrote results already
forwarded (8,000 → 2,000 tokens: 34,167 → 8,533 characters), re-billing the prompt from there
with no compaction on record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import SQLiteStore
from tests.support.factories import assistant, result, shell, system, user

BIG = "\n".join(f"line {i}: " + "value " * 12 for i in range(1200))  # ~20,000 tokens


def _settings(cap: int) -> Any:
    return settings_from_mapping({"rules": [{"name": "prune", "max_result_tokens": cap},
                                            {"name": "measure"}]})  # fmt: skip


async def _forwarded(tmp_path: Path, cap: int, messages: list[Any], now: float) -> list[Any]:
    store = SQLiteStore(str(tmp_path / "db"))
    await store.open()
    engine = Engine(_settings(cap), store, strict=True)
    try:
        out = await engine.rewrite({"model": "gpt-4o", "messages": messages}, {}, now,
                                   session_id="s")  # fmt: skip
        return list(out.body["messages"])
    finally:
        engine.close()
        await store.close()


async def test_a_capped_result_is_replayed_under_a_new_cap_as_forwarded(tmp_path: Path) -> None:
    history = [system(), user("look"), assistant(None, shell("c1", "python dump_log.py")),
               result("c1", BIG)]  # fmt: skip
    first = await _forwarded(tmp_path, 8000, history, 1000.0)
    assert len(orjson.dumps(first[3])) < len(BIG)  # capped
    later = [*history, assistant("Read it."), user("go on")]
    for cap in (2000, 16000):  # a restart with another value, either way
        again = await _forwarded(tmp_path, cap, later, 1010.0)
        assert again[: len(first)] == first
