"""bench/cost.py's protocol replay (``--protocol anthropic|responses``): each request converted,
rewritten through the real adapter, the forwarded body serialised in its protocol for the
emulated cache. On two short corpus conversations (one with reasoning, so Responses carries
reasoning items): direct is the reference, nothing breaks a chain, the numbers are sane."""

from __future__ import annotations

import pytest

from bench.cost import (
    PRICINGS,
    Job,
    Method,
    convert,
    replay_job,
    wire_parts,
)
from tests.support.traces import iter_conversations

CONVERSATIONS = (
    "mswea-pr816/deepseek_reasoner_dev/pvlib__pvlib-python-1072",  # reasoning_content
    "adp/nebius_SWE-agent-trajectories/1",
)
METHODS = (Method("direct", "direct"), Method("defaults", "ctxproxy"))


@pytest.fixture(scope="module")
def conversations() -> list[dict]:
    wanted = set(CONVERSATIONS)
    found = [c for c in iter_conversations() if c["id"] in wanted]
    assert len(found) == len(wanted)
    return found


def test_wire_parts_follow_each_protocols_order() -> None:
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    ]
    anthropic = convert("anthropic", "gpt-4o", chat)
    assert wire_parts("anthropic", anthropic) == [anthropic["system"], *anthropic["messages"]]
    responses = convert("responses", "gpt-4o", chat)
    assert wire_parts("responses", responses) == ["be brief", *responses["input"]]
    assert convert("chat", "gpt-4o", chat)["messages"] is chat


@pytest.mark.needs_shared
@pytest.mark.parametrize(
    ("protocol", "cache"),
    [
        ("chat", "prefix"),
        ("anthropic", "prefix"),
        ("anthropic", "anthropic"),
        ("responses", "prefix"),
    ],
)
def test_protocol_replay_runs_and_gives_sane_numbers(
    conversations: list[dict], protocol: str, cache: str
) -> None:
    pricing = PRICINGS[0]
    for conv in conversations:
        job = Job(conv, METHODS, (pricing,), seed=0, protocol=protocol, cache=cache)
        out = replay_job(job)
        direct = out.stats[("direct", "")]
        defaults = out.stats[("defaults", pricing.name)]
        assert direct.requests == defaults.requests == out.requests > 1
        assert direct.cost(pricing) / direct.cost(pricing) == 1.0
        assert direct.broken == defaults.broken == 0
        assert defaults.rule_errors == defaults.integrity_repairs == 0
        assert 0 < defaults.prompt <= direct.prompt * 1.2
        assert 0 < defaults.cached <= defaults.prompt
        assert 0.3 < defaults.cost(pricing) / direct.cost(pricing) < 1.2
        for key in ("first_user", "files"):
            share = defaults.share(key)
            assert share != share or share == 1.0  # nan (nothing to keep) or all kept
        # the adapter keeps the client's breakpoints on the blocks the client put them on
        assert defaults.breakpoints_lost == 0


def test_claude_codes_breakpoints_go_where_its_requests_carry_them() -> None:
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
    ]  # fmt: skip
    body = convert("anthropic", "gpt-4o", chat, breakpoints=True)
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marked) == 1
    # the earlier user message is a string again once the breakpoint has moved on
    assert body["messages"][0]["content"] == "hi"
