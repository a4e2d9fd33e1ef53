"""The offline-optimal compaction schedule (bench/optimal.py): on sequences small enough to work
out by hand, and against every schedule enumerated."""

from __future__ import annotations

import itertools
import random

import pytest

from bench.optimal import Inputs, Schedule, direct_cost, optimal_schedule


def growing(n: int, big_after: int = 5000, step: int = 100) -> Inputs:
    """A system prompt (100), a result eligible for elision from the second request on (1,030
    tokens, 1,000 freed), a large message after it (``big_after``), then ``step`` tokens per
    request."""
    sizes = [100, 1030, big_after] + [step] * n
    lengths = [3 + t for t in range(n)]
    eligible = [{} if t == 0 else {1: 1000} for t in range(n)]
    return Inputs(sizes, lengths, eligible)


def test_never_compacting_is_optimal_for_a_short_sequence() -> None:
    # the bust re-bills the 5,000 tokens after the result (0.9 × 5,000 more than a read) to
    # save 0.1 × 1,000 per later request: not within 10 requests
    inputs = growing(10)
    best = optimal_schedule(inputs, r=0.1, w=1.0)
    assert best == Schedule(direct_cost(inputs.sizes, inputs.lengths, 0.1, 1.0), ())


def test_compacting_once_at_the_first_chance_is_optimal_for_a_long_sequence() -> None:
    inputs = growing(200)
    best = optimal_schedule(inputs, r=0.1, w=1.0)
    assert best.compactions == (1,)
    never = direct_cost(inputs.sizes, inputs.lengths, 0.1, 1.0)
    # at request 1: 100 tokens read, the rest of the compacted prompt written
    prompt_1 = 100 + 30 + 5000 + 100
    compacted = (
        1.0 * (100 + 1030 + 5000)  # request 0
        + 0.1 * 100
        + 1.0 * (prompt_1 - 100)  # request 1: the bust
        + sum(0.1 * (prompt_1 + 100 * (t - 2)) + 100 for t in range(2, 200))
    )
    assert best.cost == pytest.approx(compacted)
    assert best.cost < never


def test_writes_at_125_make_a_compaction_pay_later() -> None:
    # the same sequence: dearer writes make the bust dearer, so a longer one is needed
    # the bust costs 0.9 × 6,130 − 1,090 = 4,427 more than staying at w = 1, 5,684.5 at 1.25;
    # each of the 53 requests after it saves 100
    inputs = growing(55)
    assert optimal_schedule(inputs, r=0.1, w=1.0).compactions == (1,)
    assert optimal_schedule(inputs, r=0.1, w=1.25).compactions == ()


def test_a_request_over_the_budget_compacts() -> None:
    inputs = growing(10)
    assert optimal_schedule(inputs, r=0.1, w=1.0).compactions == ()
    # request 2 is 6,330 tokens, over the budget: a compaction by then, and at request 1 its
    # bust re-bills 100 tokens less and request 2 reads the smaller prompt
    best = optimal_schedule(inputs, r=0.1, w=1.0, budget=6300)
    assert best.compactions == (1,)


def brute_force(inputs: Inputs, r: float, w: float, budget: float) -> float:
    n = len(inputs.lengths)
    cum = [0]
    for s in inputs.sizes:
        cum.append(cum[-1] + s)
    eligible_by: list[dict[int, int]] = []
    seen: dict[int, int] = {}
    for t in range(n):
        for i, f in inputs.eligible[t].items():
            seen.setdefault(i, min(f, inputs.sizes[i]))
        eligible_by.append(dict(seen))
    best = float("inf")
    for times in itertools.product((False, True), repeat=n):
        elided: dict[int, int] = {}
        cost, prev_prompt, feasible = 0.0, 0, True
        for t in range(n):
            before = dict(elided)
            if times[t]:
                elided = dict(eligible_by[t])
            prompt = cum[inputs.lengths[t]] - sum(elided.values())
            new = set(elided) - set(before)
            if not times[t] and prompt > budget and set(eligible_by[t]) - set(elided):
                feasible = False
                break
            if t == 0:
                cached = 0
            elif new:
                j = min(new)
                cached = min(prev_prompt, cum[j] - sum(f for i, f in before.items() if i < j))
            else:
                cached = prev_prompt
            cost += r * cached + w * (prompt - cached)
            prev_prompt = prompt
        if feasible:
            best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(30))
def test_the_schedule_is_the_best_of_every_schedule(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    lengths = sorted(rng.randint(2, 12) for _ in range(n))
    sizes = [rng.randint(10, 3000) for _ in range(lengths[-1])]
    eligible: list[dict[int, int]] = []
    for t in range(n):
        items = {i: rng.randint(1, sizes[i]) for i in range(lengths[t] - 1) if rng.random() < 0.3}
        eligible.append(items)
    inputs = Inputs(sizes, lengths, eligible)
    r, w = rng.choice([(0.1, 1.0), (0.5, 1.0), (0.1, 1.25)])
    budget = rng.choice([float("inf"), sum(sizes) * 0.6])
    assert optimal_schedule(inputs, r, w, budget).cost == pytest.approx(
        brute_force(inputs, r, w, budget)
    )
