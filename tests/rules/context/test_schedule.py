"""prune's schedule: cold versus warm decisions, table-driven with a fake clock and fake upstream
usage (``CacheFacts``); the horizon; the figures every decision reports."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import CacheFacts, SessionState
from rules.context import prune, schedule
from tests.support.factories import assistant, call, ctx, result, user

NOW = 10_000.0


def step(k: int, size: int = 60) -> list[dict[str, Any]]:
    """One agent step: a read of its own file, ``size`` lines."""
    body = "\n".join(f"g{k}.py line {i} " + "tok " * 8 for i in range(size))
    return [assistant(None, call(f"c{k}", "Read", file_path=f"g{k}.py")), result(f"c{k}", body)]


def conversation(steps: int) -> list[dict[str, Any]]:
    return [user("Refactor the parser"), *[m for k in range(steps) for m in step(k)]]


def memory(requests: int, last_at: float, last_tokens: int, growth: float = 500.0) -> SessionState:
    session = {
        "requests": requests,
        "last_at": last_at,
        "last_tokens": last_tokens,
        "growth": growth,
        "expect_hit": True,
    }
    return SessionState({prune.SESSION: session})


def decide(
    messages: list[dict[str, Any]],
    budget: int,
    idle: float | None,
    facts: CacheFacts | None = None,
    requests: int = 20,
    growth: float = 500.0,
    **options: Any,
) -> Any:
    from tests.support.factories import TOKENS

    size = TOKENS.count_messages(messages)
    state = SessionState() if idle is None else memory(requests, NOW - idle, size, growth)
    context = ctx(messages, now=NOW, state=state, budget=budget, cache=facts or CacheFacts())
    return prune.apply(context, prune.Config(**options))


# (case, idle seconds or None for no earlier request, facts, budget share of the request,
#  expected cache state, expected decision, whether it compacts)
CASES = [
    ("idle past the ttl", 400.0, CacheFacts(), 3.0, "cold", "cold", True),
    ("just under the ttl", 290.0, CacheFacts(), 3.0, "warm", "none", False),
    (
        "upstream read nothing",
        5.0,
        CacheFacts(last_at=NOW - 5, last_prompt_tokens=9000, last_cached_tokens=0),
        3.0,
        "cold",
        "cold",
        True,
    ),
    (
        "upstream read the prefix",
        5.0,
        CacheFacts(last_at=NOW - 5, last_prompt_tokens=9000, last_cached_tokens=8000),
        3.0,
        "warm",
        "none",
        False,
    ),
    (
        "prompt below the provider's minimum reads nothing",
        5.0,
        CacheFacts(last_at=NOW - 5, last_prompt_tokens=900, last_cached_tokens=0),
        3.0,
        "warm",
        "none",
        False,
    ),
    (
        "a longer provider ttl keeps it warm",
        400.0,
        CacheFacts(ttl_s=3600),
        3.0,
        "warm",
        "none",
        False,
    ),
    ("no earlier request", None, CacheFacts(), 3.0, "unknown", "none", False),
    ("over the budget, warm", 5.0, CacheFacts(), 0.6, "warm", "forced", True),
    ("over the budget, unknown", None, CacheFacts(), 0.6, "unknown", "forced", True),
]


@pytest.mark.parametrize(
    ("idle", "facts", "share", "state", "decision", "compacts"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_cold_and_warm_decisions(
    idle: float | None,
    facts: CacheFacts,
    share: float,
    state: str,
    decision: str,
    compacts: bool,
) -> None:
    from tests.support.factories import TOKENS

    messages = conversation(14)  # four results past the last ten: a cold cache masks them
    budget = int(TOKENS.count_messages(messages) * share)
    out = decide(messages, budget, idle, facts)
    info = out.report["prune"]
    figures = info["schedule"]
    assert (figures["cache"], figures["decision"], info["compacted"]) == (state, decision, compacts)
    for key in ("why", "read_ratio", "horizon", "growth", "bust_cost"):
        assert key in figures
    if decision == "cold":  # the stale stages only, even far under the budget
        assert set(info["stages"]) <= {"supersede", "mask"} and info["stages"]
        assert figures["bust_cost"] == 0
    if decision == "forced":
        assert info["tokens_after"] <= budget


def test_warm_compaction_pays_only_with_enough_to_gain() -> None:
    """Far under the budget with a warm cache: a few maskable results do not pay for re-billing
    the prefix, many do (the saving over the horizon beats the bust and reaches the economic
    order quantity)."""
    budget = 200_000
    few = decide(conversation(14), budget, 5.0)
    assert few.report["prune"]["schedule"]["decision"] == "none"
    many = decide(conversation(120), budget, 5.0, growth=50.0)
    figures = many.report["prune"]["schedule"]
    assert figures["decision"] == "pays" and many.report["prune"]["compacted"]
    assert figures["expected_saving"] > figures["bust_cost"] > 0


def test_a_higher_cache_price_compacts_sooner() -> None:
    """r = 0.5 makes carrying stale tokens dearer: what does not pay at 0.1 pays at 0.5."""
    budget = 200_000
    messages = conversation(28)
    cheap = decide(messages, budget, 5.0, CacheFacts(read_ratio=0.1), growth=2000.0)
    dear = decide(messages, budget, 5.0, CacheFacts(read_ratio=0.5), growth=2000.0)
    assert cheap.report["prune"]["schedule"]["decision"] == "none"
    assert dear.report["prune"]["schedule"]["decision"] == "pays"


def test_a_session_near_its_end_does_not_compact() -> None:
    """The same prompt pays early in a session (a long horizon) and not past the corpus' end of
    most sessions when growth says little is left to come."""
    budget = 200_000
    messages = conversation(120)
    early = decide(messages, budget, 5.0, requests=4, growth=50.0)
    assert early.report["prune"]["schedule"]["decision"] == "pays"
    table = [10, 20, 30]
    assert schedule.horizon(29, table) == 1.0  # one session longer, by one request
    assert schedule.horizon(5, table) == pytest.approx((5 + 15 + 25) / 3)
    assert schedule.horizon(100, table) == 100.0  # past the longest: as long again


def test_the_corpus_horizon_is_read_from_the_pack() -> None:
    assert schedule.horizon(1) > schedule.horizon(60) > 0
    assert schedule.horizon(10_000) == 10_000.0


def test_memory_advances_once_per_request() -> None:
    m = schedule.Memory(requests=3, last_at=100.0, last_tokens=1000, growth=200.0)
    after = m.after(110.0, 1300, compacted=False, stored=None)
    assert after["requests"] == 4 and after["last_at"] == 110.0
    assert after["growth"] == pytest.approx(0.7 * 200 + 0.3 * 300)
    assert after["expect_hit"] is True
    assert m.after(110.0, 1300, compacted=True, stored=None)["expect_hit"] is False
    same = schedule.Memory(requests=4, last_at=110.0, last_tokens=1300)
    stored = {"requests": 4, "last_at": 110.0, "last_tokens": 1300}
    assert same.after(110.0, 1300, compacted=False, stored=stored) is stored


def test_a_warm_cache_is_looked_at_every_few_requests() -> None:
    """The warm check costs a pass over the session: it runs on every WARM_LOOK_EVERY-th
    request, and a compaction that pays is found at the next look."""
    budget = 200_000
    messages = conversation(120)
    looks = [
        decide(messages, budget, 5.0, requests=n, growth=50.0).report["prune"]["schedule"][
            "decision"
        ]
        for n in range(4, 12)
    ]
    assert looks == ["pays" if n % prune.WARM_LOOK_EVERY == 0 else "none" for n in range(4, 12)]
