"""bench.optimal_gap: the classes a conversation's gap to the optimal falls in, and the sums."""

from __future__ import annotations

from typing import Any

from bench.optimal_gap import gap_class, summary


def row(online: float, optimal: float, online_at: list[int], at: list[int]) -> dict[str, Any]:
    return {
        "conv_id": f"c{online}-{optimal}", "price": "r=0.1", "requests": 40, "direct": 100.0,
        "online": online, "optimal": optimal, "online_at": online_at, "schedule": at,
    }  # fmt: skip


def test_each_conversation_falls_in_one_class() -> None:
    assert gap_class(row(100, 90, [], [12])) == "never"
    assert gap_class(row(104, 90, [38], [12])) == "lost"  # a late cut that did not repay
    assert gap_class(row(95, 90, [20], [12])) == "later"
    assert gap_class(row(95, 90, [12], [12, 20])) == "other"


def test_the_gap_is_summed_and_shared_by_class_and_late_cuts_counted() -> None:
    rows = [row(100, 90, [], [12]), row(104, 90, [38], [12]), row(80, 85, [5], [7])]
    s = summary(rows, top=1, late=30)
    assert s["gap"] == 10 + 14 - 5  # the online beating the optimal counts against the gap
    assert s["classes"]["lost"] == 14 / 24 and s["classes"]["never"] == 10 / 24
    assert s["holding"] == 2 and s["top_share"] == 14 / 19
    assert (s["late_online"], s["online_cuts"], s["late_optimal"]) == (1, 2, 0)
