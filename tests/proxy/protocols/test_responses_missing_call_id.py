"""A Responses call item with no usable ``call_id`` (null or empty) was lowered under its item
``id``, so the repair saw a valid call and forwarded the item with its null ``call_id`` beside an
output naming the item id: OpenAI answers 400. The call is now repaired under a new id, written
back into the item, and its chain is whole."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.protocols.checks import responses_violations
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine


@pytest.mark.parametrize("cid", [None, ""])
async def test_call_without_call_id(engine: Engine, cid: Any) -> None:
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "id": "fc_1", "call_id": cid, "name": "shell",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": cid, "output": "ok"},
        {"role": "user", "content": "next"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": f"s{cid!r}"}, now=1000.0, adapter=RESPONSES)
    sent = out.body["input"]
    call = next(i for i in sent if i.get("type") == "function_call")
    assert isinstance(call["call_id"], str) and call["call_id"]
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [call["call_id"]]
    assert not responses_violations(out.body)
    assert not out.report.get("integrity")
    assert body["input"][1]["call_id"] == cid  # the client's request is not mutated
