"""A Responses turn sent twice (a client's retry appending its items again) repeats item ids,
and OpenAI refuses an input with an id said twice ("Duplicate item found with id rs_1", 400, on
every retry). A whole copy goes, of any kind: reasoning, a message, a shell or patch call with
its output. A copy whose tool ran again stays, renamed, and a local shell call keeps an id of its
own (it is required). The check of what is forwarded now says an id twice."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.protocols.checks import responses_violations
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import engine, rewrite  # noqa: F401

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
SAID = {"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "done"}]}  # fmt: skip
SHELL = {"type": "shell_call", "id": "sh_1", "call_id": "c3", "status": "completed",
         "action": {"commands": ["ls"]}}  # fmt: skip
EXIT = {"type": "exit", "exit_code": 0}
SHELL_OUT = {"type": "shell_call_output", "call_id": "c3",
             "output": [{"stdout": "x", "stderr": "", "outcome": EXIT}]}  # fmt: skip
PATCH = {"type": "apply_patch_call", "id": "ap_1", "call_id": "c4", "status": "completed",
         "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"}}  # fmt: skip
PATCH_OUT = {"type": "apply_patch_call_output", "call_id": "c4", "status": "completed"}
LOCAL = {"type": "local_shell_call", "id": "ls_1", "call_id": "c2", "status": "completed",
         "action": {"type": "exec", "command": ["ls"], "env": {}}}  # fmt: skip


def _body(*items: Any) -> dict[str, Any]:
    user = [{"role": "user", "content": "go"}]
    return {"model": "gpt-5.1", "input": [*user, *items, {"role": "user", "content": "next"}]}


def _ids(body: dict[str, Any]) -> list[str]:
    return [
        x["id"] for x in body["input"] if "id" in x and x.get("type") != "local_shell_call_output"
    ]


@pytest.mark.parametrize(
    "turn",
    [[REASONING, SAID], [REASONING, SHELL, SHELL_OUT], [REASONING, PATCH, PATCH_OUT]],
    ids=["message", "shell", "patch"],
)
async def test_a_whole_copy_goes(engine: Engine, turn: list[Any]) -> None:  # noqa: F811
    body = _body(*turn, *[dict(x) for x in turn])
    assert any("said again" in v for v in responses_violations(body))
    out = await rewrite(engine, body)  # asserts the forwarded body has no violation
    assert out.body["input"][1:-1] == turn
    assert {r["kind"] for r in out.report["repairs"]} == {"repeated_item"}


async def test_a_copy_that_did_not_finish_goes_too(engine: Engine) -> None:  # noqa: F811
    body = _body(REASONING, SHELL, SHELL_OUT, dict(REASONING), dict(SHELL))
    out = await rewrite(engine, body)
    assert out.body["input"][1:-1] == [REASONING, SHELL, SHELL_OUT]


async def test_a_message_said_again_with_other_text_loses_the_copys_id(
    engine: Engine,  # noqa: F811
) -> None:
    other = {**SAID, "content": [{"type": "output_text", "text": "done, again"}]}
    out = await rewrite(engine, _body(SAID, other))
    sent = out.body["input"]
    assert sent[1] == SAID and sent[2] == {k: v for k, v in other.items() if k != "id"}


async def test_a_local_shell_call_that_ran_again_keeps_an_id_of_its_own(
    engine: Engine,  # noqa: F811
) -> None:
    """Its copy is renamed by the repair; the copy lost its ``id`` with it, which a local shell
    call requires (400)."""
    first = {"type": "local_shell_call_output", "id": "c2", "output": "a.txt"}
    again = {"type": "local_shell_call_output", "id": "c2", "output": "a.txt b.txt"}
    out = await rewrite(engine, _body(LOCAL, first, dict(LOCAL), again))
    calls = [x for x in out.body["input"] if x.get("type") == "local_shell_call"]
    assert len(calls) == 2 and all(isinstance(c.get("id"), str) for c in calls)
    assert len(set(_ids(out.body))) == len(_ids(out.body))
    assert not responses_violations(out.body)


def _call(call_id: str, item_id: str = "fc_1", kind: str = "function_call") -> dict[str, Any]:
    return {"type": kind, "id": item_id, "call_id": call_id, "name": "exec", "arguments": "{}"}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": f"out {call_id}"}


async def test_a_function_call_that_says_an_id_again_for_another_call_loses_it(
    engine: Engine,  # noqa: F811
) -> None:
    """Two calls sharing an item id (``fc_1``) with their own call ids were forwarded as sent,
    though the check of the forwarded body flagged them."""
    body = _body(_call("c1"), _output("c1"), _call("c2"), _output("c2"))
    out = await rewrite(engine, body)  # asserts the forwarded body has no violation
    items = out.body["input"][1:-1]
    assert items[0] == _call("c1")
    assert items[2] == {k: v for k, v in _call("c2").items() if k != "id"}
    assert [x.get("output") for x in items[1::2]] == ["out c1", "out c2"]


async def test_a_shell_call_that_says_an_id_again_for_another_call_gets_its_own(
    engine: Engine,  # noqa: F811
) -> None:
    second = {**LOCAL, "call_id": "c9", "action": {"type": "exec", "command": ["pwd"], "env": {}}}
    out_9 = {"type": "local_shell_call_output", "id": "c9", "output": "/w"}
    out_2 = {"type": "local_shell_call_output", "id": "c2", "output": "x"}
    body = _body(LOCAL, out_2, second, out_9)
    out = await rewrite(engine, body)
    assert _ids(out.body) == ["ls_1", "ls_1_c9"]
