"""A Responses tool output sent with ``output`` null or missing is repaired as a chat tool
message with null content is (``null_tool_content``: a short placeholder), not forwarded as it
came: the API requires the output and answers 400 on every retry."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine

_MISSING = object()


def _body(output: Any, call_type: str = "function_call") -> dict[str, Any]:
    call: dict[str, Any] = {"type": call_type, "call_id": "c1", "name": "read"}
    if call_type == "function_call":
        call["arguments"] = "{}"
    else:
        call["input"] = "x"
    result: dict[str, Any] = {"type": f"{call_type}_output", "call_id": "c1"}
    if output is not _MISSING:
        result["output"] = output
    return {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"}, call, result, {"role": "user", "content": "next"},
    ]}  # fmt: skip


@pytest.mark.parametrize("output", [None, _MISSING])
@pytest.mark.parametrize("call_type", ["function_call", "custom_tool_call"])
async def test_output_null_or_missing(engine: Engine, output: Any, call_type: str) -> None:
    body = _body(output, call_type)
    sent = copy.deepcopy(body)
    out = await engine.rewrite(
        body, {"session-id": f"s{call_type}{output is None}"}, now=1000.0, adapter=RESPONSES
    )
    result = out.body["input"][2]
    assert result["type"] == f"{call_type}_output" and result["call_id"] == "c1"
    assert isinstance(result["output"], str) and result["output"]
    assert out.body["input"][:2] == body["input"][:2]
    assert out.body["input"][3] == body["input"][3]
    assert any(r.get("kind") == "null_tool_content" for r in out.report["repairs"])
    assert not out.report.get("integrity")
    assert body == sent  # the client's request is not mutated


async def test_empty_output_untouched(engine: Engine) -> None:
    body = _body("")
    out = await engine.rewrite(body, {"session-id": "e"}, now=1000.0, adapter=RESPONSES)
    assert out.body["input"] == body["input"]


async def test_held_output_null(engine: Engine) -> None:
    """An output answering a call the provider holds (``previous_response_id``) stays an output
    where it stands, its null filled: it is not flattened into text, which would leave the
    held call unanswered."""
    body = {"model": "gpt-5", "previous_response_id": "resp_1", "input": [
        {"type": "function_call_output", "call_id": "c1", "output": None},
        {"type": "function_call_output", "call_id": "c2", "output": "ok"},
        {"role": "user", "content": "next"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": "h"}, now=1000.0, adapter=RESPONSES)
    first, second, user = out.body["input"]
    assert first["type"] == "function_call_output" and first["call_id"] == "c1"
    assert isinstance(first["output"], str) and first["output"]
    assert (second, user) == (body["input"][1], body["input"][2])
    assert not out.report.get("integrity")
