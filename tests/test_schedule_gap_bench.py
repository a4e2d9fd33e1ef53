"""bench/schedule_gap.py: how a conversation's online and optimal compactions are classed, and
the summary's shares of the gap and first-compaction timing."""

from __future__ import annotations

import pytest

from bench.schedule_gap import CLASSES, Gap, summary


def gap(online: list[int], optimal: list[int], value: float, requests: int = 40) -> Gap:
    return Gap("c", requests, 0.0, 0.1, value, online, ["paid"] * len(online), optimal)


def test_a_conversation_is_classed_by_its_first_compactions() -> None:
    assert gap([], [], 0.0).kind == "optimal never compacts"
    assert gap([12], [], 0.0).kind == "optimal never compacts"
    assert gap([], [5], 10.0).kind == "online never compacts"
    assert gap([20, 30], [8, 25], 10.0).kind == "online later"
    assert gap([8], [8, 30], 10.0).kind == "online not later"
    assert gap([4], [9], 10.0).kind == "online not later"


def test_the_summary_shares_the_gap_and_times_first_compactions() -> None:
    gaps = [gap([], [5], 30.0), gap([24, 36], [12], 60.0), gap([10], [14], 10.0)]
    figures = summary(gaps)
    shares = {name: c["gap_share"] for name, c in figures["classes"].items()}
    assert list(shares) == list(CLASSES)
    assert shares["online never compacts"] == pytest.approx(0.3)
    assert shares["online later"] == pytest.approx(0.6)
    assert shares["online not later"] == pytest.approx(0.1)
    assert figures["first_online_mean"] == pytest.approx(17.0)  # where both compact: 24, 10
    assert figures["first_optimal_mean"] == pytest.approx(13.0)
    assert figures["online_in_last_quarter"] == 1  # request 36 of 40
    assert figures["decisions"] == {"paid": 3}
