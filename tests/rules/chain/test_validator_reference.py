"""The validator (memoised, with fast paths) against its plain reference definition, over
generated and damaged real histories and odd shapes: the same violations, in the same order,
with or without a memo, and with a memo filled by another list holding the same objects."""

from __future__ import annotations

import copy
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.chain.validator import empty_content, find_violations
from rules.messages import HELD
from tests.rules.chain.test_chain_properties import damaged_real_histories, mutated_chains
from tests.support.factories import assistant, result, shell, user

# an id, or litellm's id of a Gemini call: an id, "__thought__", the signature (base64)
_ID = re.compile(r"^[a-zA-Z0-9_-]+$|^[a-zA-Z0-9_-]+?__thought__[A-Za-z0-9+/=_-]+$")


def _role(m: dict[str, Any]) -> str:
    r = m.get("role")
    return r if isinstance(r, str) else ""


def _shape_ok(call: Any) -> bool:
    if not isinstance(call, dict) or call.get("type") not in ("function", "custom"):
        return False
    fn = call.get(call["type"])  # "function", or a custom tool's "custom"
    return isinstance(fn, dict) and isinstance(fn.get("name"), str) and bool(fn["name"])


def _args_ok(call: dict[str, Any]) -> bool:
    if call.get("type") == "custom":
        return isinstance(call["custom"].get("input"), str)
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if not isinstance(args, str):
        return False
    try:
        return isinstance(orjson.loads(args), dict)
    except orjson.JSONDecodeError:
        return False


def _v(kind: str, index: int, tid: Any, message: str) -> dict[str, Any]:
    tid = tid if isinstance(tid, str) else None
    return {"kind": kind, "index": index, "tool_call_id": tid, "message": message}


def reference(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """find_violations as first written (before memos and fast paths)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    held: set[str] = set()
    n, i = len(messages), 0
    while i < n:
        m = messages[i]
        r = _role(m)
        if r not in ("assistant", "tool"):
            i += 1
            continue
        ids: list[Any] = []
        if r == "assistant":
            if "tool_calls" not in m or m["tool_calls"] is None:
                calls: list[Any] = []
            elif not isinstance(m["tool_calls"], list) or not m["tool_calls"]:
                out.append(_v("empty_tool_calls", i, None, "tool_calls is present but empty"))
                calls = []
            else:
                calls = m["tool_calls"]
            for call in calls:
                cid = call.get("id") if isinstance(call, dict) else None
                ids.append(cid)
                if not _shape_ok(call):
                    out.append(_v("invalid_call", i, cid, "call lacks type 'function' or a name"))
                elif not _args_ok(call):
                    out.append(
                        _v("invalid_arguments", i, cid, "arguments are not a JSON object string")
                    )
                if not (isinstance(cid, str) and _ID.fullmatch(cid)):
                    text = f"call id {cid!r} is not one the upstream accepts"
                    out.append(_v("invalid_call_id", i, cid, text))
                elif cid in seen:
                    out.append(_v("duplicate_call_id", i, cid, f"call id {cid!r} is used twice"))
                else:
                    seen.add(cid)
            other = (
                (isinstance(m.get("refusal"), str) and m["refusal"].strip())
                or isinstance(m.get("audio"), dict)
                or isinstance(m.get("function_call"), dict)
            )  # fmt: skip
            if not calls and empty_content(m.get("content")) and not other:
                out.append(
                    _v("empty_assistant", i, None, "assistant message has neither text nor calls")
                )
        j = i if r == "tool" else i + 1
        pending = {cid for cid in ids if isinstance(cid, str)}
        answered: set[str] = set()
        while j < n and _role(messages[j]) == "tool":
            t = messages[j]
            tid = t.get("tool_call_id")
            if t.get("content") is None:
                out.append(_v("null_tool_content", j, tid, "tool message content is null"))
            if isinstance(tid, str) and tid in answered:
                out.append(_v("duplicate_result", j, tid, f"call {tid!r} is answered twice"))
            elif isinstance(tid, str) and tid in pending:
                answered.add(tid)
            elif isinstance(tid, str) and t.get(HELD) is True and tid not in seen | held:
                answered.add(tid)  # answers a call the provider holds, the first with its id
                held.add(tid)
            else:
                out.append(
                    _v("orphan_result", j, tid, "tool message answers no call directly before it")
                )
            j += 1
        for cid in ids:
            if isinstance(cid, str) and cid not in answered:
                out.append(_v("unanswered_call", i, cid, f"call {cid!r} has no result"))
            elif not isinstance(cid, str):
                out.append(_v("unanswered_call", i, None, "call without an id has no result"))
        i = max(j, i + 1)
    return out


def _agree(messages: list[dict[str, Any]]) -> None:
    expected = reference(messages)
    assert find_violations(messages) == expected
    memo: dict[int, Any] = {}
    assert find_violations(messages, memo) == expected
    assert find_violations(messages, memo) == expected  # all from the memo
    shuffled = list(reversed(messages))  # the same objects elsewhere, the memo reused
    assert find_violations(shuffled, memo) == reference(shuffled)


def held(tid: str, text: str) -> dict[str, Any]:
    return {**result(tid, text), HELD: True}


ODD: list[list[dict[str, Any]]] = [
    [user("x"), {"role": ["assistant"], "content": "a"}, {"role": 7, "tool_call_id": "c"}],
    [user("x"), {"role": "assistant", "content": None, "tool_calls": "nope"}],
    [user("x"), {"role": "assistant", "content": "", "tool_calls": {}}],
    [user("x"), {"role": "assistant", "content": "a", "tool_calls": [None, "c", 3]}],
    [
        user("x"),
        {"role": "assistant", "tool_calls": [{"id": 5, "type": "function", "function": {}}]},
        {"role": "tool", "tool_call_id": 5, "content": "r"},
    ],
    [
        user("x"),
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "function": {"name": "bash", "arguments": "{}"}},
                {"id": "c2\n", "type": "function", "function": {"name": "", "arguments": "{}"}},
                {"id": "c3", "type": "function", "function": {"name": "b", "arguments": {}}},
                {"id": "c4", "type": "function", "function": {"name": "b", "arguments": "[1]"}},
            ],
        },
        result("c1", "a"),
        result("c1", "b"),
        {"role": "tool", "tool_call_id": "c4", "content": None},
        result("c9", "z"),
    ],
    [user("x"), assistant(None, shell("c1", "ls")), {"role": "tool", "tool_call_id": "c1"}],
    [user("x"), assistant(None, shell("c1", "ls")), result("c1", "a"), result("c1", "a")],
    [user("x"), assistant(None, shell("c1", "ls")), result("C1", "a")],
    [user("x"), assistant(None, shell("c1", "ls")), user("y"), result("c1", "a")],
    [
        user("x"),
        assistant(None, shell("c1", "ls")),
        result("c1", "a"),
        assistant(None, shell("c1", "pwd")),
        result("c1", "b"),
    ],
    [user("x"), assistant(None, shell("c1", "ls"))],
    [result("c1", "a"), assistant([{"type": "text", "text": " "}])],
    [user("x"), assistant(None, shell("c1", "ls"), shell("c2", "ls")), result("c2", "b")],
    # results of calls the provider holds (``HELD``): valid where no message makes the call
    [held("h1", "a"), user("x")],
    [held("h1", "a"), held("h1", "b"), user("x")],
    [user("x"), held("h1", "a"), held("h2", "b"), assistant(None, shell("c1", "ls"))],
    [user("x"), assistant(None, shell("c1", "ls")), result("c1", "a"), held("h1", "b")],
    [user("x"), assistant(None, shell("c1", "ls")), held("c1", "a")],
    [user("x"), assistant(None, shell("c1", "ls")), result("c1", "a"), held("c1", "b")],
    [held("c1", "a"), assistant(None, shell("c1", "ls")), result("c1", "b")],
    [held("c1", "a"), user("y"), assistant(None, shell("c1", "ls")), result("c1", "b")],
    [held("h1", "a"), user("y"), held("h1", "b"), held("h2", "c")],
    [user("x"), {"role": "tool", "tool_call_id": 7, "content": "a", HELD: True}],
    [user("x"), {"role": "tool", "tool_call_id": "h1", "content": "a", HELD: "yes"}],
    # custom tools' calls, whole and broken; answers without content
    [
        user("x"),
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "p"}},
                {"id": "c2", "type": "custom", "custom": {"name": "t", "input": {"a": 1}}},
                {"id": "c3", "type": "custom", "custom": {"name": "", "input": "p"}},
                {"id": "c4", "type": "custom", "function": {"name": "t", "arguments": "{}"}},
                {"id": "c5", "type": "function", "custom": {"name": "t", "input": "p"}},
            ],
        },
        result("c1", "a"),
        result("c2", "b"),
        result("c3", "c"),
        result("c4", "d"),
        result("c5", "e"),
    ],
    [user("x"), {"role": "assistant", "content": None, "refusal": "no"}],
    [user("x"), {"role": "assistant", "content": "", "refusal": " "}],
    [user("x"), {"role": "assistant", "content": None, "audio": {"id": "a1"}}],
    [user("x"), {"role": "assistant", "content": None, "function_call": {"name": "f"}}],
]


def test_odd_shapes_agree_with_the_reference() -> None:
    for messages in ODD:
        _agree(copy.deepcopy(messages))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_chains())
def test_generated_histories_agree_with_the_reference(case: Any) -> None:
    _, messages, _ = case
    _agree(messages)


@pytest.mark.needs_shared
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_real_histories())
def test_damaged_real_histories_agree_with_the_reference(messages: Any) -> None:
    _agree(messages)


@pytest.mark.needs_shared
@given(st.data())
@settings(max_examples=50, deadline=None)
def test_a_replaced_message_is_checked_afresh(data: st.DataObject) -> None:
    messages = copy.deepcopy(data.draw(damaged_real_histories()))
    memo: dict[int, Any] = {}
    find_violations(messages, memo)
    i = data.draw(st.integers(0, len(messages) - 1))
    messages[i] = {**messages[i], "tool_calls": [{"id": "bad id", "function": None}]}
    messages[i]["role"] = data.draw(st.sampled_from(["assistant", "tool", "user"]))
    assert find_violations(messages, memo) == reference(messages)
