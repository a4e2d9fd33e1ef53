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
