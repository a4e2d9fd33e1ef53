"""Two engines for checking an adapter's reuse across requests: each request goes through one
engine that keeps its adapter and one given a new adapter (nothing kept) every time, and both must
forward the same bytes with the same report, leaving the client's body untouched."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson

from proxy.protocols.base import Adapter
from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store


@asynccontextmanager
async def twin_engines(
    tmp_path: Path, settings: dict[str, Any], strict: bool = True
) -> AsyncIterator[tuple[Engine, Engine]]:
    """(fast, slow): two engines on their own stores (``strict``: as every test's; not: what
    production runs, its checks of the adapters' bytes off)."""
    out = []
    for name in ("fast", "slow"):
        store = Store(str(tmp_path / name))
        await store.open()
        out.append((Engine(settings_from_mapping(settings), store, strict=strict), store))
    out[1][0].pipeline.memos = None  # the slow one memoises nothing across requests
    try:
        yield out[0][0], out[1][0]
    finally:
        for engine, store in out:
            engine.close()
            await store.close()


def fresh(b: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(b))


def strip_timings(report: dict[str, Any]) -> dict[str, Any]:
    out = dict(report)
    out.pop("timings_ms", None)
    return out


def reading_all(adapter: Adapter) -> Adapter:
    """``adapter`` reading the hidden text of every message, knowing nothing of any (what its
    lowering knows of the messages is not used)."""
    read = adapter.hidden_text

    def hidden_text(body: dict[str, Any], lowered: Any = None) -> dict[str, str]:
        return read(body)

    adapter.hidden_text = hidden_text  # type: ignore[method-assign]
    return adapter


async def through_both(
    fast: Engine,
    slow: Engine,
    adapter: Adapter,
    new_adapter: Callable[[], Adapter],
    b: dict[str, Any],
    now: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The request through both engines (``adapter`` kept by the caller, ``new_adapter()`` for
    the other): the same forwarded bytes and report; the client's body untouched."""
    sent = copy.deepcopy(b)
    mine = fresh(b)
    got = await fast.rewrite(mine, headers or {}, now=now, adapter=adapter)
    want = await slow.rewrite(fresh(b), headers or {}, now=now, adapter=reading_all(new_adapter()))
    assert mine == b == sent, "the client's body was mutated"
    assert orjson.dumps(got.body) == orjson.dumps(want.body)
    assert strip_timings(dict(got.report)) == strip_timings(dict(want.report))
    return got.body
