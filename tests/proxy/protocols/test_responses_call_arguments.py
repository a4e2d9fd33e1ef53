"""A Responses ``function_call`` whose ``arguments`` is not a string (an object, null, or
missing) is repaired as a chat call's is (`invalid_arguments`: a JSON object string), not
forwarded as it came: the API requires a string and answers 400 on every retry."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine

_MISSING = object()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [({"path": "a.txt"}, {"path": "a.txt"}), (None, {}), (_MISSING, {})],
)
async def test_arguments_not_a_string(engine: Engine, arguments: Any, expected: Any) -> None:
    call: dict[str, Any] = {"type": "function_call", "call_id": "c1", "name": "read"}
    if arguments is not _MISSING:
        call["arguments"] = arguments
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "user", "content": "next"},
    ]}  # fmt: skip
    sent = copy.deepcopy(body)
    out = await engine.rewrite(body, {"session-id": "s"}, now=1000.0, adapter=RESPONSES)
    forwarded = out.body["input"][1]
    assert isinstance(forwarded["arguments"], str)
    assert orjson.loads(forwarded["arguments"]) == expected
    assert out.body["input"][2:] == body["input"][2:]
    assert not out.report.get("integrity")
    assert body == sent  # the client's request is not mutated


async def test_string_arguments_untouched(engine: Engine) -> None:
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": "t"}, now=1000.0, adapter=RESPONSES)
    assert out.body["input"] == body["input"]


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, ""), (_MISSING, ""), ({"patch": "x"}, '{"patch":"x"}')]
)
async def test_custom_input_not_a_string(engine: Engine, raw: Any, expected: str) -> None:
    """A custom tool's call whose ``input`` is no string gets it as a string, as a chat custom
    call does (``input_to_string``)."""
    call: dict[str, Any] = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch"}
    if raw is not _MISSING:
        call["input"] = raw
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"},
        call,
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]}  # fmt: skip
    sent = copy.deepcopy(body)
    out = await engine.rewrite(body, {"session-id": "c"}, now=1000.0, adapter=RESPONSES)
    forwarded = out.body["input"][1]
    assert forwarded == {**call, "input": expected}
    assert out.body["input"][2] == body["input"][2]
    assert not out.report.get("integrity")
    assert body == sent


async def test_custom_input_untouched(engine: Engine) -> None:
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": "go"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": "u"}, now=1000.0, adapter=RESPONSES)
    assert out.body["input"] == body["input"]
