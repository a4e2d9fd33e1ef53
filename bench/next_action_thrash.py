"""Why a compaction came fewer than 5 requests after the session's previous one (thrash), for
``bench.next_action``: each is put in the first class that fits, from the previous compaction's
figures (``report["prune"]["schedule"]``) and the requests since. Each is judged against the
previous compaction's room (the budget less inject's reserve), where the compaction that followed
it may have been forced only past the budget itself (``schedule.trigger``): the classes put a
little more in ``floor`` and the bursts than the budget alone would.

- ``not forced before``: the previous compaction was a warm or cold one (under the budget), which
  leaves no room for growth by design;
- ``floor``: the deepest cut the previous compaction could make (every step, the turns kept to
  fit only included: what is left is the system prompt, the task, the protected evidence and the
  current turn) left less than 5 requests of the growth the schedule expected under the budget:
  no cut could have held;
- ``protected``: the previous compaction stopped above its goal, and without the turns kept to
  fit only (a file's latest write, a user's own message, the last two results) no cut reached it;
- ``burst past the floor``: the session grew faster than expected (a big result arrived), so
  fast that even the deepest cut would not have held 5 requests;
- ``burst``: the same, where a deeper cut would have held;
- ``shallow goal``: the goal left less than 5 requests of the estimated growth (the depth is
  bounded by ``target_ratio``);
- ``other``: none of these (a cut that stopped short of its goal with steps left, an estimate
  off in the other direction)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

GAP = 5  # the limit: at most one compaction per this many requests
CLASSES = (
    "not forced before", "floor", "protected", "burst past the floor", "burst", "shallow goal",
    "other",
)  # fmt: skip


@dataclass(frozen=True)
class Cut:
    """A compaction's figures: the request it came at and what the schedule said."""

    request: int
    decision: str
    room: int  # the budget less inject's reserve: the classes are judged against it
    after: int  # tokens forwarded
    goal: int | None = None
    growth: float = 0.0  # the growth per request the goal was set for
    deepest: int | None = None  # every step taken
    deepest_spare: int | None = None  # every step but the turns kept to fit only

    @classmethod
    def of(cls, request: int, prune: dict[str, Any]) -> Cut:
        fig = prune.get("schedule") or {}
        room = int(prune.get("budget") or 0) - int(prune.get("reserve") or 0)

        def num(key: str) -> int | None:
            v = fig.get(key)
            return int(v) if isinstance(v, (int, float)) else None

        return cls(
            request, str(fig.get("decision")), room, int(prune.get("tokens_after") or 0),
            num("goal"), float(fig.get("growth") or 0.0), num("deepest"), num("deepest_spare"),
        )  # fmt: skip


def classify(previous: Cut, before_now: int, request: int) -> str:
    """Why the compaction at ``request`` (the request ``before_now`` tokens before it) came
    within ``GAP`` requests of ``previous``."""
    if previous.decision != "forced" or previous.goal is None:
        return "not forced before"
    seen = max(before_now - previous.after, 0) / max(request - previous.request, 1)
    room = previous.room
    deepest = previous.deepest if previous.deepest is not None else previous.after
    if deepest + GAP * previous.growth > room:
        return "floor"
    if previous.after > previous.goal and (previous.deepest_spare or 0) > previous.goal:
        return "protected"
    if seen > previous.growth and previous.after + GAP * seen > room:
        return "burst past the floor" if deepest + GAP * seen > room else "burst"
    if previous.goal + GAP * previous.growth > room:
        return "shallow goal"
    return "other"


def count_compaction(tally: Counter[str], lane: Any, request: int) -> None:
    """A compaction of ``lane`` (``bench.next_action.Lane``) at ``request``, and whether it came
    fewer than ``GAP`` requests after the session's previous one (thrash), with its class."""
    tally["compactions"] += 1
    tally[f"compactions: {lane.compacted}"] += 1
    if lane.compacted_at is not None and request - lane.compacted_at < GAP:
        tally["compactions: thrash"] += 1
        tally["compactions: thrash, over"] += lane.over  # the floor alone is over the budget
        if lane.cut is not None:
            before = (lane.prune.get("schedule") or {}).get("before", lane.cut.after)
            tally[f"thrash: {classify(lane.cut, int(before), request)}"] += 1
    lane.compacted_at, lane.cut = request, Cut.of(request, lane.prune)


OVERSHOOT = "overshoot per mille: "  # a tally key: requests over the budget by how far


def count_overshoot(tally: Counter[str], prune: dict[str, Any]) -> None:
    """A request forwarded over the budget: by how far, in thousandths of the budget (rounded
    up, so a request just over counts as 1)."""
    budget = int(prune.get("budget") or 0)
    if budget > 0:
        over = int(prune.get("tokens_after") or 0) - budget
        tally[f"{OVERSHOOT}{max(-(-over * 1000 // budget), 1)}"] += 1


def overshoot(tally: Counter[str]) -> tuple[float, float, float]:
    """(median, 90th percentile, largest) overshoot of the requests over the budget, as a share
    of the budget (the lower value at a percentile that falls between two)."""
    counts = sorted(
        (int(k[len(OVERSHOOT) :]), n) for k, n in tally.items() if k.startswith(OVERSHOOT)
    )
    total = sum(n for _, n in counts)
    if not total:
        return 0.0, 0.0, 0.0
    return _at(counts, total, 0.5), _at(counts, total, 0.9), counts[-1][0] / 1000


def _at(counts: list[tuple[int, int]], total: int, share: float) -> float:
    """The value at ``share`` of ``total`` in ``counts`` (value, how many), in thousandths."""
    seen = 0
    for value, n in counts:
        seen += n
        if seen >= share * total:
            return value / 1000
    return counts[-1][0] / 1000


def tally_row(tally: Counter[str]) -> dict[str, int]:
    return {c: tally[f"thrash: {c}"] for c in CLASSES}


def print_classes(rows: list[dict[str, Any]]) -> None:
    if not any(r.get("thrash") for r in rows):
        return
    print("\nThrash by why it came (bench/next_action_thrash.py):\n")
    print("| configuration | thrash | " + " | ".join(CLASSES) + " |")
    print("|---|---:|" + "---:|" * len(CLASSES))
    for r in rows:
        if r.get("thrash"):
            cells = " | ".join(f"{r['thrash_why'].get(c, 0):,}" for c in CLASSES)
            print(f"| {r['configuration']} | {r['thrash']:,} | {cells} |")
