"""prune's randomised warm threshold (``ski_draw``): the hashed draw is deterministic and follows
its density, the expected cost of one cut over many draws stays within ``expected_ratio`` of the
best schedule wherever the session ends, and the rule compacts on the drawn share."""

from __future__ import annotations

import hashlib
import math
import statistics
from typing import Any

import pytest

from rules.base import CacheFacts
from rules.context import payback, prune, ski_draw
from tests.rules.context import test_schedule
from tests.rules.context.test_schedule import conversation
from tests.support.factories import TOKENS, ctx

DRAWS = 1500


def test_the_draw_is_a_stable_function_of_its_key() -> None:
    assert ski_draw.uniform("s|m1") == ski_draw.uniform("s|m1")
    assert ski_draw.uniform("s|m1") != ski_draw.uniform("s|m2")
    # blake2b of the key, not Python's salted hash: the same figure on every run
    digest = hashlib.blake2b(b"session|anchor", digest_size=8).digest()
    assert ski_draw.uniform("session|anchor") == int.from_bytes(digest, "big") / 2**64
    assert 0.0 <= ski_draw.drawn("x") <= 1.0
    assert 0.5 <= ski_draw.drawn("x", floor=0.5) <= 1.0


@pytest.mark.parametrize("floor", [0.0, 0.5])
def test_the_hashed_draws_follow_the_density(floor: float) -> None:
    """The empirical CDF of the hashed shares against ``(e^z - e^g) / (e - e^g)``: a
    Kolmogorov-Smirnov distance a uniform sample of this size stays under (1.63 / sqrt(n): 1%)."""
    zs = sorted(ski_draw.drawn(f"draw {i}", floor) for i in range(DRAWS))
    low = math.exp(floor)
    gap = max(
        max(abs((i + 1) / DRAWS - c), abs(i / DRAWS - c))
        for i, z in enumerate(zs)
        for c in [(math.exp(z) - low) / (math.e - low)]
    )
    assert gap < 1.63 / math.sqrt(DRAWS)
    assert zs[0] >= floor and zs[-1] <= 1.0
    mean = (math.e - floor * low) / (math.e - low) - 1  # E[z] = expected_ratio - 1
    assert statistics.fmean(zs) == pytest.approx(mean, abs=0.02)


def test_the_stated_bounds() -> None:
    assert ski_draw.expected_ratio(0.0) == pytest.approx(math.e / (math.e - 1))
    assert ski_draw.expected_ratio(0.5) == pytest.approx(1.7707, abs=1e-4)
    assert ski_draw.expected_ratio(1.0) == 2.0  # break-even
    assert ski_draw.worst_ratio(0.5) == 3.0 and ski_draw.worst_ratio(0.0) == math.inf


def _cut_after(share: float, carry: float, price: float) -> int:
    """The requests one cut carries before the rule makes it (``payback.verdict`` asked at each
    request with what carrying has cost so far)."""
    k = 0
    while payback.verdict(k * carry, future=0.0, price=price, share=share) is None:
        k += 1
    return k


@pytest.mark.parametrize("floor", [0.0, 0.5])
@pytest.mark.parametrize("carry", [1.0, 7.0, 33.0, 250.0])
def test_the_expected_cost_is_within_the_bound_wherever_the_session_ends(
    floor: float, carry: float
) -> None:
    """One cut of price ``P``, carrying ``c`` a request. For every session length, the mean cost
    over many hashed draws is at most ``expected_ratio × best + c`` (requests come whole: a cut
    comes up to one request's carrying past its threshold), within three standard errors of the
    sample; the same on evenly spaced draws (the expectation without the sample's noise). The
    break-even rule (share 1) costs twice the best where the session ends right after its cut."""
    price = 1_000.0
    bound = ski_draw.expected_ratio(floor)
    hashed = [_cut_after(ski_draw.drawn(f"cut {i}", floor), carry, price) for i in range(DRAWS)]
    spaced = [ski_draw.share((i + 0.5) / DRAWS, floor) for i in range(DRAWS)]
    even = [_cut_after(z, carry, price) for z in spaced]
    last = int(3 * price / carry) + 2
    for end in range(1, last + 1):
        best = min(carry * end, price)

        def cost(k: int, end: int = end) -> float:
            return k * carry + price if k < end else end * carry

        sample = [cost(k) for k in hashed]
        error = statistics.pstdev(sample) / math.sqrt(DRAWS)
        assert statistics.fmean(sample) <= bound * best + carry + 3 * error
        assert statistics.fmean(cost(k) for k in even) <= bound * best + carry + 1e-9
    at_price = math.ceil(price / carry)  # break-even: the session ends right after its cut
    assert _cut_after(1.0, carry, price) == at_price
    assert at_price * carry + price >= 2 * price


def _decide(session: str, carried: float | None = None, **options: Any) -> Any:
    """Warm, under the budget (test_schedule's case), in session ``session``, carrying at
    ``carried`` of the deepest cut's price."""
    messages = conversation(28)
    size = TOKENS.count_messages(messages)
    kept = {} if carried is None else {"carried": carried, "looked": 20, "due": 20}
    state = test_schedule.memory(20, test_schedule.NOW - 5.0, size, 500.0, **kept)
    context = ctx(messages, now=test_schedule.NOW, state=state, budget=200_000,
                  cache=CacheFacts(), session_id=session)  # fmt: skip
    options.setdefault("warm_risk_share", None)  # the thresholds alone, without the risk wait
    return prune.apply(context, prune.Config(**options))


def test_a_cut_is_made_once_carrying_reaches_its_drawn_share() -> None:
    """Carrying at 0.3 of the cut's price: break-even waits; the randomised rule cuts in a
    session whose draw is below 0.1 and waits in one whose draw is above 0.9, the same decision
    and bytes on the same input every time; with a floor of 1/2, no draw is that low."""
    plain = _decide("s").report["prune"]["schedule"]
    price = plain["bust_cost"] + plain["expected_loss"]
    carried = 0.3 * price
    sessions = [f"session {i}" for i in range(200)]
    low = next(s for s in sessions if ski_draw.drawn(f"{s}|") < 0.1)
    high = next(s for s in sessions if ski_draw.drawn(f"{s}|") > 0.9)
    waits = _decide(low, carried).report["prune"]
    assert waits["schedule"]["decision"] == "none" and not waits["compacted"]
    cuts = [_decide(low, carried, warm_threshold="randomised_session") for _ in range(2)]
    assert cuts[0].report["prune"]["schedule"]["decision"] == "paid"
    assert cuts[0].report["prune"]["compacted"]
    assert cuts[0].messages == cuts[1].messages and cuts[0].report == cuts[1].report
    assert not _decide(high, carried, warm_threshold="randomised_session").report["prune"][
        "compacted"
    ]
    floored = _decide(low, carried, warm_threshold="randomised_session", warm_threshold_floor=0.5)
    assert not floored.report["prune"]["compacted"]


def test_a_deeper_cut_keeps_its_guard_on_the_whole_price_whatever_share_is_drawn() -> None:
    """``soon`` (one bust, not two) may take a cut before it pays, once it has carried
    ``GUARD`` of its price: of the whole price, not of the share drawn, so its worst case stays
    ``(1 + GUARD) / GUARD`` the best (a guard on the drawn share would allow 5x at a share of
    1/2, and no bound at all as the share nears 0)."""
    from rules.context import payback

    price = 1000.0
    early = payback.GUARD * price * 0.6  # carried: less than GUARD of the whole price
    assert early >= payback.GUARD * 0.25 * price  # but more than GUARD of a drawn quarter
    assert not payback.soon(early, 10 * price, price, 0.25)
    assert payback.soon(payback.GUARD * price, 0.0, price, 0.5)  # the guard met, the share paid
    assert payback.soon(payback.GUARD * price, 0.5 * price, price)  # break-even's, unchanged
