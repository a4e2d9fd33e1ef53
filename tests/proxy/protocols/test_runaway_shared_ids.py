"""A runaway turn (more calls left unanswered than the repair writes results for) whose calls all
share one id: the repair keeps the answered call and a note for the rest, and the lift matched
that one call to every block of the id, so all of them were forwarded, one id eighteen times,
with one result: Anthropic and OpenAI answer 400. Each kept call now stands for one block."""

from __future__ import annotations

from collections import Counter
from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine


async def test_messages(engine: Engine) -> None:
    uses = [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"n": k}}
            for k in range(18)]  # fmt: skip
    body = {"model": "claude-x", "max_tokens": 64, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "ok"}, {"type": "text", "text": "next"}]},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC)
    calls = [b["id"] for b in out.body["messages"][1]["content"] if b.get("type") == "tool_use"]
    assert calls == ["toolu_1"]
    assert not out.report.get("integrity")


async def test_responses(engine: Engine) -> None:
    calls: list[Any] = [{"type": "function_call", "id": f"fc_{k}", "call_id": "call_1",
                         "name": "shell", "arguments": "{}"} for k in range(18)]  # fmt: skip
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"}, *calls,
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
        {"role": "user", "content": "next"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": "r"}, now=1000.0, adapter=RESPONSES)
    sent = Counter(i["call_id"] for i in out.body["input"] if i.get("type") == "function_call")
    assert sent == {"call_1": 1}
    assert not out.report.get("integrity")


async def test_responses_runaway_keeps_its_reasoning_and_its_note(engine: Engine) -> None:
    """A runaway turn of reasoning then 18 calls, the last answered: the first dropped call took
    the reasoning with it, so the kept call went without the reasoning it came with (Responses
    refuses it), and the note went nowhere, the turn holding no message to carry it. The turn's
    first call stays (with the interrupted note), so the reasoning keeps the call it led to."""
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    calls: list[Any] = [{"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}",
                         "name": "shell", "arguments": f'{{"n": {k}}}'}
                        for k in range(18)]  # fmt: skip
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"}, reasoning, *calls,
        {"type": "function_call_output", "call_id": "call_17", "output": "ok"},
        {"role": "user", "content": "next"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": "r"}, now=1000.0, adapter=RESPONSES)
    sent = out.body["input"]
    assert [i.get("type", "message") for i in sent] == [
        "message", "message", "reasoning", "function_call", "function_call",
        "function_call_output", "function_call_output", "message",
    ]  # fmt: skip
    note = sent[1]
    assert note["role"] == "assistant" and "16 tool calls" in note["content"][0]["text"]
    assert sent[2] == reasoning and sent[3] == calls[0] and sent[4] == calls[17]
    assert [i["call_id"] for i in sent[5:7]] == ["call_17", "call_0"]
    assert not out.report.get("integrity")


async def test_responses_reasoning_of_a_dropped_call_goes_when_more_reasoning_follows(
    engine: Engine,
) -> None:
    """Each call led by its own reasoning: the dropped calls' reasoning goes with them (the
    turn's first call stays, and its reasoning with it)."""
    items: list[Any] = [{"role": "user", "content": "go"}]
    for k in range(18):
        items.append({"type": "reasoning", "id": f"rs_{k}", "summary": [],
                      "encrypted_content": f"g{k}"})  # fmt: skip
        items.append({"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}",
                      "name": "shell", "arguments": f'{{"n": {k}}}'})  # fmt: skip
    items += [{"type": "function_call_output", "call_id": "call_17", "output": "ok"},
              {"role": "user", "content": "next"}]  # fmt: skip
    out = await engine.rewrite({"model": "gpt-5", "input": items}, {"session-id": "r"},
                               now=1000.0, adapter=RESPONSES)  # fmt: skip
    sent = out.body["input"]
    assert [i.get("id") for i in sent if i.get("type") == "reasoning"] == ["rs_0", "rs_17"]
    assert [i["call_id"] for i in sent if i.get("type") == "function_call"] == [
        "call_0", "call_17"
    ]
