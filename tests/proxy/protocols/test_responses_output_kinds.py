"""A result the repair writes for an unanswered Responses call has its call's type as forwarded:
a ``custom_tool_call`` (Codex's ``apply_patch``) the repair renamed got a
``function_call_output``, and of a function and a custom call sharing one id each got the other's
type; the upstream answers such a body 400 ("No tool output found for custom tool call"). So
does a client's own result the repair moves to another call (its id reused, a result sent twice):
it takes the type of the call it now answers."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.protocols.checks import responses_violations
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import engine, rewrite  # noqa: F401

PATCH = "*** Begin Patch\n*** End Patch"


def _custom(item_id: str, cid: str) -> dict[str, Any]:
    return {"type": "custom_tool_call", "id": item_id, "call_id": cid, "name": "apply_patch",
            "input": PATCH}  # fmt: skip


def _function(item_id: str, cid: str) -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": cid, "name": "shell",
            "arguments": '{"cmd":"ls"}'}  # fmt: skip


def _out(cid: str, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": cid, "output": "ok"}


CASES = {
    "a renamed custom call": [
        {"role": "user", "content": "go"},
        _function("fc_1", "call_1"),
        _out("call_1"),
        _custom("ctc_2", "call_1"),  # its id reused: renamed, then unanswered
        {"role": "user", "content": "stop"},
    ],
    "a function and a custom call sharing an id": [
        {"role": "user", "content": "go"},
        _function("fc_1", "call_1"),
        _custom("ctc_2", "call_1"),
        {"role": "user", "content": "stop"},
    ],
}


# a result sent twice, then the id reused by a call of the other kind: the repair renames that
# call and moves the spare result to it (merged with the call's own)
REASSIGNED = {
    "a function result moved to a custom call": [
        {"role": "user", "content": "go"},
        _function("fc_1", "call_1"),
        _out("call_1"),
        _out("call_1"),
        _custom("ctc_2", "call_1"),
        _out("call_1", "custom_tool_call_output"),
    ],
    "a custom result moved to a function call": [
        {"role": "user", "content": "go"},
        _custom("ctc_1", "call_1"),
        _out("call_1", "custom_tool_call_output"),
        _out("call_1", "custom_tool_call_output"),
        _function("fc_2", "call_1"),
        _out("call_1"),
    ],
}


# a result sent ahead of its call, typed as the other kind's: the repair moves it after the call
MOVED = [
    {"role": "user", "content": "go"},
    _out("call_1", "custom_tool_call_output"),
    _function("fc_1", "call_1"),
    {"role": "user", "content": "next"},
]


@pytest.mark.parametrize("items", CASES.values(), ids=CASES.keys())
async def test_a_written_result_has_its_calls_type(engine: Engine, items: list[Any]) -> None:  # noqa: F811
    await _types_match(engine, items)


@pytest.mark.parametrize("items", REASSIGNED.values(), ids=REASSIGNED.keys())
async def test_a_moved_result_takes_its_new_calls_type(engine: Engine, items: list[Any]) -> None:  # noqa: F811
    sent = await _types_match(engine, items)
    assert [i["call_id"] for i in sent[1:]] == ["call_1", "call_1", "call_1_2", "call_1_2"]


async def test_a_result_moved_after_its_call_takes_its_type(engine: Engine) -> None:  # noqa: F811
    sent = await _types_match(engine, MOVED)
    assert [i.get("type") for i in sent[1:3]] == ["function_call", "function_call_output"]
    assert sent[2]["output"] == "ok"


async def _types_match(engine: Engine, items: list[Any]) -> list[Any]:  # noqa: F811
    out = await rewrite(engine, {"model": "gpt-5", "input": items})
    sent: list[Any] = out.body["input"]
    kinds = {
        i["call_id"]: i["type"]
        for i in sent
        if i.get("type") in ("function_call", "custom_tool_call")
    }
    for item in sent:
        if item.get("type", "").endswith("_output"):
            custom = kinds[item["call_id"]] == "custom_tool_call"
            assert item["type"] == ("custom_tool_call_output" if custom else "function_call_output")
    return sent


def test_the_final_check_finds_an_output_of_another_kind() -> None:
    items = REASSIGNED["a function result moved to a custom call"][:3]
    assert responses_violations({"input": items}) == []
    items = [*items[:2], _out("call_1", "custom_tool_call_output")]
    found = responses_violations({"input": items})
    assert found == ["input[2]: custom_tool_call_output for the function_call at input[1]"]
