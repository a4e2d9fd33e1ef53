"""bench/cost.py's parts: which price fields a rule read (so price variants share a run only
while none was), the seeded clock and its cadences, the baselines' masking, inject's blocks set
aside before the evidence checks, the variant names, the per-conversation distribution, and the
first N requests of a replay."""

from __future__ import annotations

import itertools

import pytest

from bench.cost import (
    MASK_PLACEHOLDER,
    PRICINGS,
    STEP_S,
    Job,
    Method,
    WatchedFacts,
    mask_older,
    parse_variant,
    replay_job,
    timeline,
    without_injected,
)
from bench.cost_stats import distribution, quantile
from rules.messages import INJECT_CLOSE, INJECT_OPEN

BLOCK = f"{INJECT_OPEN}\nnoted\n{INJECT_CLOSE}"


def test_watched_facts_note_price_reads_only() -> None:
    facts = WatchedFacts(read_ratio=0.5, last_at=3.0)
    assert (facts.ttl_s, facts.last_at, facts.min_prefix_tokens) == (300.0, 3.0, 1024)
    assert facts.reads == set()
    assert facts.read_ratio == 0.5
    assert facts.write_ratio == 1.0
    assert facts.reads == {"read_ratio", "write_ratio"}


def test_the_clock_is_seeded_per_conversation_and_gives_user_turns_idle_gaps() -> None:
    tool = [{"role": "user", "content": "task"}, {"role": "tool", "content": "x"}]
    user = [*tool, {"role": "user", "content": "next"}]
    prefixes = [tool[:1], tool, user, [*user, {"role": "tool", "content": "y"}]]
    times = timeline("conv", prefixes, seed=1, cadence="idle")
    assert times == timeline("conv", prefixes, seed=1)
    assert times != timeline("conv", prefixes, seed=2)
    assert times[0] == 0.0
    assert STEP_S[0] <= times[1] - times[0] <= STEP_S[1]
    assert STEP_S[0] <= times[3] - times[2] <= STEP_S[1]
    gaps = [
        timeline(f"c{i}", prefixes, 0)[2] - timeline(f"c{i}", prefixes, 0)[1] for i in range(400)
    ]
    over = sum(g > 300 for g in gaps) / len(gaps)
    assert 0.1 < over < 0.25  # lognormal, median 60 s, σ 1.7: 17% beyond the TTL


def test_mask_older_keeps_the_last_results() -> None:
    messages = [{"role": "tool", "tool_call_id": str(i), "content": f"r{i}"} for i in range(4)]
    out = mask_older(messages, 2, MASK_PLACEHOLDER)
    assert [m["content"] for m in out] == [MASK_PLACEHOLDER, MASK_PLACEHOLDER, "r2", "r3"]
    assert out[2] is messages[2]
    assert [m["tool_call_id"] for m in out] == ["0", "1", "2", "3"]


def test_inject_blocks_are_set_aside_wherever_they_are() -> None:
    client = [
        {"role": "user", "content": "task"},
        {"role": "tool", "tool_call_id": "a", "content": "failed"},
        {"role": "tool", "tool_call_id": "b", "content": "ok"},
    ]
    forwarded = [
        client[0],
        {**client[1], "content": f"failed\n\n{BLOCK}"},  # a sticky block, now history
        client[2],
        {"role": "user", "content": BLOCK},  # a block of its own
    ]
    assert without_injected(forwarded, {id(m) for m in client}) == client
    assert without_injected(client, {id(m) for m in client}) is client


def test_variant_names() -> None:
    assert parse_variant("budget32k") == Method("budget32k", "ctxproxy", 32_000)
    assert parse_variant("defaults-no-inject+measure") == Method(
        "defaults-no-inject+measure", "ctxproxy", None, ("inject", "measure")
    )
    assert parse_variant("mask10").keep == 10
    assert parse_variant("microcompact").keep == 5
    both = parse_variant("budget32k+restore+bet-no-inject")
    assert (both.budget, both.bet, both.restore) == (32_000, True, True)
    assert both.rules_off == ("inject",)
    assert not parse_variant("defaults+bet").restore and parse_variant("defaults+restore").restore
    drawn = parse_variant("defaults+rand50+bet-no-inject")
    assert (drawn.threshold, drawn.floor, drawn.bet, drawn.rules_off) == (
        "randomised",
        0.5,
        True,
        ("inject",),
    )
    assert parse_variant("defaults+srand").threshold == "randomised_session"
    assert parse_variant("defaults+srand").floor == 0.0
    assert parse_variant("defaults").threshold == "break_even"
    assert parse_variant("defaults").risk is None
    assert parse_variant("defaults+risk5+bet").risk == 0.05
    assert parse_variant("defaults+risk").risk == 0.0
    with pytest.raises(ValueError):
        parse_variant("defaults+risk2+risk5")
    assert parse_variant("defaults").guard is None
    guarded = parse_variant("defaults+guard2+risk5")
    assert (guarded.guard, guarded.risk) == (0.02, 0.05)
    with pytest.raises(ValueError):
        parse_variant("defaults+guard1+guard2")
    assert parse_variant("budget32k+guardoff").guard == "off"  # unset: break-even alone


def test_guardoff_builds_prune_with_no_risk_wait() -> None:
    from bench.cost_lanes import _pipeline

    def prune_config(guard: object) -> object:
        pipeline = _pipeline((), guard=guard)  # type: ignore[arg-type]
        (step,) = [s for s in pipeline.steps if s.name == "prune"]
        return step.config

    assert prune_config(None).warm_risk_share == 0.10  # type: ignore[attr-defined]
    assert prune_config("off").warm_risk_share is None  # type: ignore[attr-defined]
    assert prune_config(0.02).warm_risk_share == 0.02  # type: ignore[attr-defined]


def test_every_turn_and_even_cadences_have_no_idle_gaps() -> None:
    tool = [{"role": "user", "content": "task"}, {"role": "tool", "content": "x"}]
    user = [*tool, {"role": "user", "content": "next"}]
    prefixes = [tool[:1], tool, user, [*user, {"role": "tool", "content": "y"}]] * 20
    every = timeline("conv", prefixes, 0, "every-turn")
    gaps = [b - a for a, b in itertools.pairwise(every)]
    assert all(STEP_S[0] <= g <= STEP_S[1] for g in gaps)
    assert timeline("conv", prefixes, 0, "even", 30.0) == [30.0 * k for k in range(80)]
    # the idle clock draws the same steps: its agent steps are every-turn's
    idle = timeline("conv", prefixes, 0, "idle")
    assert idle[1] - idle[0] == every[1] - every[0]
    with pytest.raises(ValueError):
        timeline("conv", prefixes, 0, "sometimes")


def test_the_per_conversation_distribution() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([5.0], 0.9) == 5.0
    d = distribution([0.9, 1.0, 1.01, 1.05, 0.8])
    assert d["median"] == 1.0
    assert d["over_1.00"] == 0.4
    assert d["over_1.02"] == 0.2
    assert distribution([])["median"] != distribution([])["median"]  # nan


def test_max_requests_replays_the_first_requests_only() -> None:
    messages = [{"role": "system", "content": "be brief"}]
    for k in range(6):
        messages += [
            {"role": "user", "content": f"question {k} " * 200},
            {"role": "assistant", "content": f"answer {k} " * 200},
        ]
    conv = {"id": "synthetic", "messages": messages, "meta": {}}
    methods = (Method("direct", "direct"),)
    full = replay_job(Job(conv, methods, PRICINGS[:1], 0, cadence="every-turn"))
    first = replay_job(Job(conv, methods, PRICINGS[:1], 0, cadence="every-turn", max_requests=2))
    assert (full.requests, first.requests) == (6, 2)
    assert first.stats[("direct", "")].requests == 2
    # every turn within the TTL: after the first, each request reads its predecessor
    assert full.stats[("direct", "")].cached > 0


def test_a_variant_takes_one_drawn_threshold() -> None:
    """Two draw flags in one variant name would be read in the set's order, which differs from
    run to run: refused."""
    from bench.cost_config import parse_variant

    with pytest.raises(ValueError, match="more than one"):
        parse_variant("defaults+rand+srand50")
