"""``ctxproxy serve`` settles the garbage collector once the app has started (proxy.server.heap)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.server.collector import install_collector
from proxy.server.heap import YOUNG_THRESHOLD, settle_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_heap_freezes_startup_and_raises_the_young_threshold(restored_gc: None) -> None:
    built_at_startup = [{"n": i} for i in range(100)]
    _, middle, old = gc.get_threshold()
    settle_heap()
    assert gc.get_freeze_count() >= len(built_at_startup)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)


def test_cycles_made_after_settling_are_still_collected_unasked(restored_gc: None) -> None:
    settle_heap()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    # no gc.collect(): allocating past the young threshold sets off a collection by itself
    allocated = [[] for _ in range(3 * YOUNG_THRESHOLD)]
    assert len(allocated) == 3 * YOUNG_THRESHOLD
    assert ref() is None


def test_serve_adds_the_hooks_last(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    from proxy import cli

    seen = {}

    def fake_run(self: uvicorn.Server, sockets: object = None) -> None:
        seen["hooks"] = list(self.config.app.state.setup_hooks)

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    config = tmp_path / "c.yaml"
    config.write_text(
        "upstreams:\n  - name: u\n    match: ['*']\n    base_url: http://127.0.0.1:9\n"
    )
    cli.main(["serve", "--config", str(config), "--db", str(tmp_path / "x.db")])
    assert seen["hooks"][-2:] == [settle_heap, install_collector]
