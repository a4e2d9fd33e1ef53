"""prune's schedule: cold versus warm decisions, table-driven with a fake clock and fake upstream
usage (``CacheFacts``); the horizon; the figures every decision reports."""

from __future__ import annotations

from typing import Any

import pytest

from rules.base import CacheFacts, SessionState
from rules.context import prune, schedule
from tests.support.factories import TOKENS, assistant, call, ctx, result, user

NOW = 10_000.0


def step(k: int, size: int = 60) -> list[dict[str, Any]]:
    """One agent step: a read of its own file, ``size`` lines."""
    body = "\n".join(f"g{k}.py line {i} " + "tok " * 8 for i in range(size))
    return [assistant(None, call(f"c{k}", "Read", file_path=f"g{k}.py")), result(f"c{k}", body)]


def conversation(steps: int) -> list[dict[str, Any]]:
    return [user("Refactor the parser"), *[m for k in range(steps) for m in step(k)]]


def memory(
    requests: int, last_at: float, last_tokens: int, growth: float = 500.0, **more: Any
) -> SessionState:
    session = {
        "requests": requests,
        "last_at": last_at,
        "last_tokens": last_tokens,
        "growth": growth,
        "expect_hit": True,
        **more,
    }
    return SessionState({prune.SESSION: session})


def decide(
    messages: list[dict[str, Any]],
    budget: int,
    idle: float | None,
    facts: CacheFacts | None = None,
    requests: int = 20,
    growth: float = 500.0,
    carried: dict[str, Any] | None = None,
    **options: Any,
) -> Any:
    context = context_for(messages, budget, idle, facts, requests, growth, carried)
    # break-even alone unless a test asks: the default's wait for the risk budget is
    # test_warm_risk's
    options.setdefault("warm_risk_share", None)
    return prune.apply(context, prune.Config(**options))


def context_for(
    messages: list[dict[str, Any]],
    budget: int,
    idle: float | None,
    facts: CacheFacts | None = None,
    requests: int = 20,
    growth: float = 500.0,
    carried: dict[str, Any] | None = None,
) -> Any:
    """The request ``decide`` gives prune: ``idle`` seconds after the session's last request
    (None: a new session), with prune's memory of it."""
    from tests.support.factories import TOKENS

    size = TOKENS.count_messages(messages)
    state = (
        SessionState()
        if idle is None
        else memory(requests, NOW - idle, size, growth, **(carried or {}))
    )
    return ctx(messages, now=NOW, state=state, budget=budget, cache=facts or CacheFacts())


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
    "wait", [None, prune.Config().warm_risk_share], ids=["break-even", "default"]
)
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
    wait: float | None,
) -> None:
    """Each case alike with break-even alone and with the default's wait for the risk budget,
    which holds no cold, forced or first request's compaction."""
    from tests.support.factories import TOKENS

    messages = conversation(14)  # four results past the last ten: a cold cache masks them
    budget = int(TOKENS.count_messages(messages) * share)
    out = decide(messages, budget, idle, facts, warm_risk_share=wait)
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


def test_warm_compaction_waits_until_carrying_has_cost_its_bust() -> None:
    """Under the budget with a warm cache, the break-even rule: nothing while carrying the
    reclaimable tokens has cost less than the bust since the last compaction, then everything
    reclaimable at once; the carrying cost is reported."""
    budget = 200_000
    messages = conversation(120)
    fresh = decide(messages, budget, 5.0, requests=20)
    figures = fresh.report["prune"]["schedule"]
    assert figures["decision"] == "none" and not fresh.report["prune"]["compacted"]
    assert figures["bust_cost"] > figures["carried"] == 0
    paid_for = {
        "carried": (figures["bust_cost"] + figures["expected_loss"]) * 2,
        "looked": 20,
        "due": 20,
    }
    later = decide(messages, budget, 5.0, requests=20, carried=paid_for)
    assert later.report["prune"]["schedule"]["decision"] == "paid"
    assert later.report["prune"]["compacted"]
    assert later.report["prune"]["schedule"]["carried"] >= figures["bust_cost"]


def test_carrying_cost_adds_up_at_the_cache_price() -> None:
    """Between looks, carrying costs r per reclaimable token and request: the same history of
    reclaimable tokens has paid for a compaction at r = 0.5 and not yet at r = 0.1."""
    budget = 200_000
    messages = conversation(28)

    def cost_of_cut(r: float) -> float:
        figures = decide(messages, budget, 5.0, CacheFacts(read_ratio=r)).report["prune"]
        return figures["schedule"]["bust_cost"] + figures["schedule"]["expected_loss"]

    # 8 requests since the last look, each carrying ``tokens`` reclaimable tokens: enough at
    # r = 0.5, not at r = 0.1
    tokens = int(1.1 * cost_of_cut(0.5) / (0.5 * 8))
    assert 0.1 * 8 * tokens < cost_of_cut(0.1)
    history = {"carried": 0, "looked": 12, "reclaimable": tokens}
    cheap = decide(messages, budget, 5.0, CacheFacts(read_ratio=0.1), carried=history)
    dear = decide(messages, budget, 5.0, CacheFacts(read_ratio=0.5), carried=history)
    assert cheap.report["prune"]["schedule"]["decision"] == "none"
    assert dear.report["prune"]["schedule"]["decision"] == "paid"


def test_a_compaction_starts_the_carrying_cost_again() -> None:
    m = schedule.Memory(requests=8, carried=500.0, looked=4, reclaimable=1000)
    assert m.carried_now(0.1) == pytest.approx(500 + 0.1 * 1000 * 4)
    after = m.after(1.0, 9000, compacted=True, stored=None)
    assert (after["carried"], after["looked"], after["reclaimable"]) == (0.0, 8, 0)
    looked = m.after(1.0, 9000, compacted=False, stored=None, look=(900.0, 3000))
    assert (looked["carried"], looked["looked"], looked["reclaimable"]) == (900.0, 8, 3000)


def test_the_horizon_table() -> None:
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


def test_a_warm_cache_is_looked_at_when_a_cut_may_have_paid_or_every_few_requests() -> None:
    """The warm check costs a pass over the session: it runs on every WARM_LOOK_EVERY-th
    request, and from the request by which the last look's figures said some cut could pay
    (``due``); a compaction that has paid for itself is made at the next look, never between."""
    budget = 200_000
    messages = conversation(120)

    def looks(**kept: Any) -> list[str]:
        paid_for = {"carried": 1e9, "looked": 4, **kept}
        return [
            decide(messages, budget, 5.0, requests=n, carried=paid_for).report["prune"]["schedule"][
                "decision"
            ]
            for n in range(4, 12)
        ]

    every = prune.WARM_LOOK_EVERY
    assert looks() == ["paid" if n % every == 0 else "none" for n in range(4, 12)]
    assert looks(due=6) == ["paid" if n % every == 0 or n >= 6 else "none" for n in range(4, 12)]


def test_a_breakpoint_cache_rebills_all_but_the_first_message_past_its_lookback() -> None:
    """On Anthropic's cache (``lookback_messages``) an edit further back than the lookback
    leaves only the system prompt's breakpoint cached; a plain prefix cache keeps all before."""
    prefix = [100 * i for i in range(41)]  # 40 messages of 100 tokens
    plain = CacheFacts(min_prefix_tokens=50)
    anthropic = CacheFacts(lookback_messages=10, min_prefix_tokens=50)
    assert schedule.cached_after(35, prefix, 4000, anthropic) == 3500  # within the lookback
    assert schedule.cached_after(20, prefix, 4000, anthropic) == 100  # past it
    assert schedule.cached_after(20, prefix, 4000, plain) == 2000
    assert schedule.cached_after(40, prefix, 4000, anthropic) == 4000  # nothing changed


def test_what_stays_before_an_edit_is_cached_only_from_the_minimum_prefix() -> None:
    """A prefix shorter than the provider's minimum is never cached: an edit that leaves less
    before it re-bills the whole prompt (Anthropic's system prompt of a few hundred tokens, or
    an early edit on a prefix cache)."""
    prefix = [100 * i for i in range(41)]
    anthropic = CacheFacts(lookback_messages=10, min_prefix_tokens=1024)
    plain = CacheFacts(min_prefix_tokens=1024)
    assert schedule.cached_after(20, prefix, 4000, anthropic) == 0  # the system prompt: 100
    assert schedule.cached_after(8, prefix, 4000, plain) == 0  # 800 tokens before the edit
    assert schedule.cached_after(11, prefix, 4000, plain) == 1100


def test_the_bust_is_priced_in_the_providers_tokens() -> None:
    """The provider counted the previous prompt at twice this rule's count (fields the count
    leaves out): re-billing the prompt after a cut costs twice the counted bust, while what the
    cut frees is counted exactly. A carrying cost that paid for the counted bust has not paid
    for the provider's."""
    budget = 200_000
    messages = conversation(28)
    size = TOKENS.count_messages(messages)
    plain = decide(messages, budget, 5.0).report["prune"]["schedule"]
    assert plain["provider_scale"] == 1.0  # the upstream's count unknown: ours
    price = plain["bust_cost"] + plain["expected_loss"]
    paid_for = {"carried": price * 1.5, "looked": 20, "due": 20}
    counted = decide(messages, budget, 5.0, requests=20, carried=paid_for)
    assert counted.report["prune"]["schedule"]["decision"] == "paid"
    doubled = CacheFacts(last_prompt_tokens=2 * size)
    billed = decide(messages, budget, 5.0, doubled, requests=20, carried=paid_for)
    figures = billed.report["prune"]["schedule"]
    assert figures["provider_scale"] == pytest.approx(2.0, rel=0.01)
    assert figures["decision"] != "paid"
    # reported in the rule's tokens, as every figure (the payback account scales them itself)
    assert figures["bust_cost"] == plain["bust_cost"]


def test_a_provider_counting_fewer_tokens_never_cheapens_the_bust() -> None:
    m = schedule.Memory(requests=5, last_tokens=10_000)
    assert schedule.provider_scale(CacheFacts(last_prompt_tokens=6_000), m) == 1.0
    assert schedule.provider_scale(CacheFacts(last_prompt_tokens=15_000), m) == 1.5
    assert schedule.provider_scale(CacheFacts(), m) == 1.0
    assert schedule.provider_scale(CacheFacts(last_prompt_tokens=500), schedule.Memory()) == 1.0


def test_a_cut_at_the_tail_leaves_the_steps_before_it_what_carrying_them_cost() -> None:
    """Two stale results of 900 tokens, one early (its cut re-bills 7,200 tokens after it), one
    near the tail (900). Carrying both has cost 2,000: the tail's half pays for its cut, the
    early one's half does not. The tail is cut, and the early one keeps its 1,000 of carrying:
    a small cut does not restart the count of a large one."""
    prefix = [1000 * i for i in range(11)]
    steps = [
        schedule.Step("mask", 900, 1, (1,), reuse=0.0),
        schedule.Step("mask", 900, 8, (8,), reuse=0.0),
    ]
    memory = schedule.Memory(requests=20, last_tokens=10_000, carried=2000.0, looked=20)
    facts = CacheFacts(read_ratio=0.1, min_prefix_tokens=1024)
    choice = schedule.choose(
        steps, prefix, 10_000, 200_000, 150_000, facts, memory, "warm", {"mask": 1.0}, 0
    )
    assert choice.figures["decision"] == "paid" and choice.chosen == (1,)
    assert choice.figures["carried_left"] == pytest.approx(1000.0)
    # the share left is the early step's, not this cut's saving (else counted again later)
    assert choice.figures["expected_saving"] == 1000
    after = memory.after(1.0, 9100, compacted=True, stored=None, look=(1000.0, 900))
    assert (after["carried"], after["reclaimable"]) == (1000.0, 900)
    richer = schedule.Memory(requests=20, last_tokens=10_000, carried=20_000.0, looked=20)
    both = schedule.choose(
        steps, prefix, 10_000, 200_000, 150_000, facts, richer, "warm", {"mask": 1.0}, 0
    )
    assert both.chosen == (0, 1) and both.figures["carried_left"] == 0.0


def test_prune_keeps_what_a_warm_cut_left_in_the_sessions_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """prune stores the schedule's ``carried_left`` and the reclaimable tokens the cut left as
    the session's carrying count after a warm cut (a forced or cold one starts it again)."""
    original = schedule.choose

    def tail_only(steps: Any, *args: Any, **kwargs: Any) -> schedule.Choice:
        choice = original(steps, *args, **kwargs)
        if choice.figures.get("cache") != "warm" or not steps:
            return choice
        last = len(steps) - 1
        figures = {**choice.figures, "decision": "paid", "carried_left": 1234.5}
        return schedule.Choice(1, args[1] - steps[last].freed, figures, (last,))

    messages = conversation(120)
    looked = decide(messages, 200_000, 5.0, requests=20).state.get(prune.SESSION)
    monkeypatch.setattr(schedule, "choose", tail_only)
    out = decide(
        messages, 200_000, 5.0, requests=20, carried={"carried": 10.0, "looked": 20, "due": 20}
    )
    assert out.report["prune"]["compacted"]
    session = out.state.get(prune.SESSION)
    assert session["carried"] == 1234.5
    assert 0 < session["reclaimable"] < looked["reclaimable"]
