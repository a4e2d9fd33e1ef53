"""An Anthropic ``tool_use`` whose ``input`` is null (the API wants an object, and answers 400 on
every retry) is forwarded with ``{}``, as a chat call's null arguments are: no arguments, not a
``raw_arguments`` wrapper of the text "null"."""

from __future__ import annotations

import copy
from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.rewrite.engine import Engine


async def test_null_input_forwarded_as_an_empty_object(engine: Engine) -> None:
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "list", "input": None}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
    ]}  # fmt: skip
    sent = copy.deepcopy(body)
    out = await engine.rewrite(body, {"session-id": "s"}, now=1000.0, adapter=ANTHROPIC)
    use = out.body["messages"][1]["content"][0]
    assert use["input"] == {}
    assert {k: v for k, v in use.items() if k != "input"} == {
        "type": "tool_use", "id": "toolu_1", "name": "list"}  # fmt: skip
    assert out.body["messages"][2] == body["messages"][2]
    assert body == sent  # the client's request is not mutated
