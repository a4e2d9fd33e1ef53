"""The serving process's collector (proxy.server.collector): each collection's survivors are
frozen, a request's leftovers are collected at a lull, and cycles among frozen objects are
reclaimed once the heap has doubled, between requests."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from proxy.server import collector as collector_module
from proxy.server.collector import Collector


class Node:
    other: object = None


@pytest.fixture
def collector() -> Iterator[Collector]:
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()  # what the test process holds is not walked by each collection here
    made = Collector()
    made.install()
    yield made
    made.uninstall()
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.collect()


def tracked(obj: object, generation: int | None = None) -> bool:
    """Whether ``obj`` is in a generation a collection walks (not frozen)."""
    return any(o is obj for o in gc.get_objects(generation))


def test_what_survives_a_collection_is_frozen() -> None:
    survivor: list[object] = [object()]
    gc.collect(0)
    assert tracked(survivor)  # without the collector: promoted, walked by the next collections
    made = Collector()
    made.install()
    try:
        other: list[object] = [object()]
        gc.collect(0)
        assert not tracked(other)
    finally:
        made.uninstall()
        gc.unfreeze()


def test_a_frozen_object_is_still_freed_once_let_go(collector: Collector) -> None:
    kept = Node()
    ref = weakref.ref(kept)
    gc.collect(0)
    assert not tracked(kept)  # frozen
    del kept
    assert ref() is None  # reference counting, no collection


def requests(collector: Collector, n: int) -> None:
    for _ in range(n):
        collector.started()
        collector.finished({})


def test_a_lull_collects_what_the_requests_left(collector: Collector) -> None:
    gc.collect(0)  # counted from here
    left = [[i] for i in range(50)]
    requests(collector, collector_module.YOUNG_EVERY - 1)
    assert tracked(left, 0)  # not every request: each collection has a fixed cost
    requests(collector, 1)
    assert not tracked(left)  # walked once, frozen
    assert gc.get_count()[0] < 50


def test_in_flight_requests_put_it_off_up_to_a_bound(collector: Collector) -> None:
    gc.collect(0)
    collector.started()  # another request, in flight throughout
    left = [[i] for i in range(50)]
    requests(collector, collector_module.YOUNG_EVERY)
    assert tracked(left, 0)  # the other request's objects are not walked under it
    requests(collector, collector_module.YOUNG_AT_MOST - collector_module.YOUNG_EVERY)
    assert not tracked(left)  # never idle: collected all the same
    collector.finished({})


def frozen_cycle() -> weakref.ref[Node]:
    """A reference cycle frozen while alive, then let go: garbage no collection walks."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    holder = [a]
    gc.collect(0)  # survives, frozen by the collector's callback
    ref = weakref.ref(a)
    del a, b, holder
    return ref


def test_a_cycle_among_frozen_objects_waits_for_a_reclaim(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = frozen_cycle()
    gc.collect()
    assert ref() is not None  # frozen: a full collection does not see it
    # the heap doubled past the floor: due at the next check, run at the next lull
    monkeypatch.setattr(collector, "reclaim_at", 0)
    monkeypatch.setattr(collector, "checked", -1e9)
    collector.started()
    collector.finished({})
    assert collector.reclaims == 1
    assert ref() is None


def test_a_reclaim_waits_for_a_lull_then_runs_regardless(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = frozen_cycle()
    monkeypatch.setattr(collector, "reclaim_at", 0)
    monkeypatch.setattr(collector, "checked", -1e9)
    clock = [1000.0]
    monkeypatch.setattr(collector_module.time, "monotonic", lambda: clock[0])
    collector.started()
    collector.started()
    collector.finished({})  # due now, another request in flight: it waits
    assert collector.due_since == 1000.0 and collector.reclaims == 0
    assert ref() is not None
    collector.started()
    clock[0] += collector_module.MAX_WAIT_S + 1
    collector.finished({})  # never idle: past the wait it runs at a request's end
    assert collector.reclaims == 1 and collector.due_since is None
    assert ref() is None


def test_the_heap_is_counted_only_every_check(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[int] = []
    monkeypatch.setattr(collector_module.sys, "getallocatedblocks", lambda: counted.append(1) or 0)
    collector.checked = -1e9
    requests(collector, 20)
    assert len(counted) == 1


def test_metrics_show_the_collections_while_the_collector_runs(collector: Collector) -> None:
    from prometheus_client import generate_latest

    from proxy.telemetry.metrics import Metrics

    metrics = Metrics()
    assert "ctxproxy_gc" not in generate_latest(metrics.registry).decode()  # none handed over
    metrics.count_collections(collector)
    gc.collect(0)
    gc.collect(0)
    text = generate_latest(metrics.registry).decode()
    counted = {
        line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line[:1] != "#"
    }
    assert counted["ctxproxy_gc_collections_total"] == collector.collections >= 2
    assert counted["ctxproxy_gc_pause_seconds_total"] > 0
    assert (
        0
        < counted["ctxproxy_gc_longest_pause_seconds"]
        <= counted["ctxproxy_gc_pause_seconds_total"]
    )
    assert counted["ctxproxy_gc_reclaims_total"] == 0


def test_the_setup_hook_observes_the_requests_and_serves_its_counts() -> None:
    from types import SimpleNamespace

    from prometheus_client import generate_latest

    from proxy.server.collector import install_collector
    from proxy.telemetry.metrics import Metrics
    from proxy.telemetry.observe import Observers

    app = SimpleNamespace(state=SimpleNamespace(metrics=Metrics()))
    services = SimpleNamespace(observers=Observers())
    made = install_collector(app, services)
    try:
        assert app.state.collector is made
        assert made in services.observers.observers
        assert (
            "ctxproxy_gc_collections_total" in generate_latest(app.state.metrics.registry).decode()
        )
    finally:
        made.uninstall()
        gc.unfreeze()
