"""A heavy body's work holds off the collector's full collections (one over its objects stopped
the event loop for 220–320 ms), within a bound, and leaves the thresholds as it found them."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from proxy.rewrite import full_collections
from proxy.rewrite.offload import Offload


@pytest.fixture
def full_runs() -> Iterator[list[int]]:
    """The generations of the collections that start while the test runs."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    threshold = gc.get_threshold()
    gc.collect()  # what is pending before the test does not count
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever the session set
    gc.callbacks.append(note)
    yield seen
    gc.callbacks.remove(note)
    gc.set_threshold(*threshold)


def _allocate() -> int:
    """Make long-lived containers, as a big body's parse and views do: more than a quarter of
    what the oldest generation holds, which is what sets a full collection off."""
    n = max(200_000, len(gc.get_objects(generation=2)) // 2)
    kept = [[i] for i in range(n)]
    return len(kept)


def test_a_full_collection_would_start_without_the_hold(full_runs: list[int]) -> None:
    # the control: the allocation below does set one off
    _allocate()
    assert 2 in full_runs


def test_none_starts_while_held_and_the_threshold_comes_back(full_runs: list[int]) -> None:
    with full_collections.held():
        assert full_collections.holding()
        assert gc.get_threshold()[:2] == (700, 10)
        _allocate()
    assert 2 not in full_runs
    assert 0 in full_runs and 1 in full_runs  # young and middle ones still run
    assert gc.get_threshold() == (700, 10, 10)
    assert not full_collections.holding()


def test_holds_nest_and_an_error_releases(full_runs: list[int]) -> None:
    with pytest.raises(RuntimeError), full_collections.held():
        with full_collections.held():
            pass
        assert full_collections.holding()  # the outer one still holds
        raise RuntimeError
    assert gc.get_threshold() == (700, 10, 10)


def test_a_hold_past_its_bound_ends_until_every_holder_left(
    full_runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(full_collections, "MAX_HOLD_S", 0.0)
    with full_collections.held():
        with full_collections.held():
            pass
        assert not full_collections.holding()  # overlapping holds cannot keep it for ever
        with full_collections.held():  # nor does a new one while the stretch goes on
            assert not full_collections.holding()
        _allocate()
    assert 2 in full_runs
    assert gc.get_threshold() == (700, 10, 10)
    with full_collections.held():  # a new stretch holds again
        assert full_collections.holding()


async def test_a_job_in_the_worker_holds_them(full_runs: list[int]) -> None:
    offload = Offload()
    try:
        assert await offload.run(_allocate) >= 200_000
        assert await offload.run(full_collections.holding)
    finally:
        offload.close()
    assert 2 not in full_runs
    assert gc.get_threshold() == (700, 10, 10)
