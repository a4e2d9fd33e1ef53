"""The corpus invariants across protocols (``bench/protocol_invariants.py``) on a small fixed set of
traces: replayed as Chat Completions, and converted into Anthropic Messages and Responses bodies,
the rules decide the same repairs, entities and pruning, and every forwarded body passes its
protocol's integrity check. A disagreement is allowed only in a class documented as expected
(``EXPECTED``: the protocol's own view merges turns, or re-serialised arguments move a token count
near the budget); and even then the protocol agrees exactly with its own chat view replayed as chat
(a disagreement there is the adapter's, ``adapter:*``)."""

from __future__ import annotations

import asyncio
import copy
import itertools

import pytest

from bench.protocol_convert import to_anthropic, to_responses
from bench.protocol_invariants import (
    ALL_DIMENSIONS,
    EXPECTED,
    VARIANTS,
    run_variant,
)
from proxy.protocols.validate import validate_anthropic, validate_responses
from tests.support.traces import iter_conversations

pytestmark = pytest.mark.needs_shared

# Small traces from each source, chosen for what they exercise: consecutive user messages (the
# swe-agent demonstration, bookminder/day-013/s1), injected blocks on tool results (bookminder),
# reasoning_content (deepseek_reasoner), empty tool results, parallel calls (openhands).
TRACES = (
    "openhands/trajs/basic.json",
    "openhands/tests/unit/resolver/mock_output/output.jsonl/5",
    "adp/nebius_SWE-agent-trajectories/2",
    "swe-agent/tests/test_data/trajectories/gpt4__swe-agent__test-repo__default_from_url__"
    "t-0.00__p-0.95__c-3.00__install-1/swe-agent__test-repo-i1.traj",
    "swe-agent/trajectories/demonstrations/ctf/forensics/flash.traj",
    "bookminder/day-013/s1",
    "bookminder/day-015/s1",
    "mswea-pr816/deepseek_reasoner_dev/pvlib__pvlib-python-1606",
)


@pytest.fixture(scope="module")
def conversations() -> list[dict]:
    wanted = set(TRACES)
    found = [c for c in iter_conversations() if c["id"] in wanted]
    assert {c["id"] for c in found} == wanted
    return found


@pytest.mark.parametrize("variant", ["defaults", "budget-8k"])
def test_decisions_agree_across_protocols(conversations: list[dict], variant: str) -> None:
    results = asyncio.run(
        run_variant(VARIANTS[variant], conversations, ("anthropic", "responses"), "instructions")
    )
    unexplained = {
        (r.conv_id, protocol, cls): r.examples
        for r in results
        for (protocol, cls), _ in r.classes.items()
        if cls not in EXPECTED
    }
    assert not unexplained, unexplained
    for r in results:
        assert r.steps > 0
        for protocol in ("anthropic", "responses"):
            # integrity holds on every step, in every protocol
            assert r.agree[protocol, "integrity"] == r.steps, r.conv_id
            # a trace with no turns to merge agrees on every decision at every step
            if not any(p == protocol for p, _ in r.classes):
                assert all(r.agree[protocol, d] == r.steps for d in ALL_DIMENSIONS), r.conv_id


def test_converter_keeps_ids_and_shapes(conversations: list[dict]) -> None:
    for conv in conversations:
        chat = {"model": "gpt-4o", "messages": conv["messages"]}
        before = copy.deepcopy(chat)
        anthropic = to_anthropic(chat)
        responses = to_responses(chat)
        assert chat == before  # the chat body is never changed
        validate_anthropic(anthropic.body)
        validate_responses(responses.body)
        assert not anthropic.losses
        call_ids = [c["id"] for m in conv["messages"] for c in m.get("tool_calls") or []]
        result_ids = [m["tool_call_id"] for m in conv["messages"] if m["role"] == "tool"]
        blocks = [b for m in anthropic.body["messages"] if isinstance(m["content"], list)
                  for b in m["content"]]  # fmt: skip
        assert [b["id"] for b in blocks if b["type"] == "tool_use"] == call_ids
        assert [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"] == result_ids
        roles = [m["role"] for m in anthropic.body["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles))  # turns alternate
        items = responses.body["input"]
        assert [i["call_id"] for i in items if i.get("type") == "function_call"] == call_ids
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert outputs == result_ids


def test_tool_results_go_first_in_the_merged_user_turn() -> None:
    chat = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
            {"role": "user", "content": "next"},
        ],
    }  # fmt: skip
    body = to_anthropic(chat).body
    assert body["system"] == [{"type": "text", "text": "sys"}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "task"},
                                     {"type": "text", "text": "more"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"},
            {"type": "text", "text": "next"}]},
    ]  # fmt: skip
    responses = to_responses(chat).body
    assert responses["instructions"] == "sys"
    assert [i.get("type") for i in responses["input"]] == [
        "message", "message", "function_call", "function_call_output", "message"
    ]  # fmt: skip
    developer = to_responses(chat, system="developer").body
    assert "instructions" not in developer
    assert developer["input"][0]["role"] == "developer"
