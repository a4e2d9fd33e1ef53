"""``bench.entities_seen`` runs: the session's keys grow from those it starts with."""

from __future__ import annotations

import pytest

from bench.entities_seen import run


@pytest.mark.needs_shared
def test_the_bench_times_a_growing_session_holding_many_keys() -> None:
    median, requests, held = run(keys=300, size=40)
    assert requests > 0 and median > 0
    assert 300 < held <= 5000  # the calls read were added to those held before
