"""The helpers of bench/cost.py: which price fields a rule read (so price variants share a run
only while none was), the seeded clock, the baselines' masking, inject's blocks set aside before
the evidence checks, and the variant names."""

from __future__ import annotations

from bench.cost import (
    MASK_PLACEHOLDER,
    STEP_S,
    Method,
    WatchedFacts,
    mask_older,
    parse_variant,
    timeline,
    without_injected,
)
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
    times = timeline("conv", prefixes, seed=1)
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
