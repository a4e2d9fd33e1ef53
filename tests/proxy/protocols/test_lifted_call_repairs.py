"""What the chain repair does to a call reaches the call forwarded. A call sent without a name
gets one (``unknown_tool``), written onto the call the provider gets: Gemini's ``functionCall``
and a Responses ``function_call`` went out nameless (a 400), and Gemini's response was renamed to
a name its call never carried. A Responses turn sent twice has its copy's call renamed, and the
copy says none of the first's item ids again."""

from __future__ import annotations

import pytest

from proxy.rewrite.engine import Engine
from tests.proxy.protocols import test_gemini_adapter as gemini
from tests.proxy.protocols import test_responses_adapter as responses


async def test_gemini_a_nameless_call_and_its_response_name_the_same_tool(engine: Engine) -> None:
    nameless = {"functionCall": {"id": "a", "args": {}}}
    b = gemini.body(gemini.user("fix"), gemini.model(nameless), gemini.user(gemini.response("a")))
    out = await gemini.rewrite(engine, b)  # checks the pairing and the adapter's integrity
    called = out.body["contents"][1]["parts"][0]["functionCall"]
    answered = out.body["contents"][2]["parts"][0]["functionResponse"]
    assert called["name"] and called["name"] == answered["name"]


async def test_responses_a_nameless_function_call_gets_its_name(
    engine: Engine,
) -> None:
    b = responses.body(
        responses.msg("user", "fix"),
        {"type": "function_call", "call_id": "c1", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    )
    out = await responses.rewrite(engine, b)
    call = out.body["input"][1]
    assert call["type"] == "function_call" and call["name"] == "unknown_tool"


@pytest.mark.parametrize("ran_again", [False, True], ids=["same-output", "ran-again"])
async def test_responses_a_turn_sent_twice_says_no_item_id_twice(
    engine: Engine, ran_again: bool
) -> None:
    """A retry that appended its turn's items again (OpenAI refuses "Duplicate item found with
    id rs_1" with a 400): a whole copy goes; a copy whose tool ran again (another output) stays,
    its call renamed by the repair, without the item ids the first holds."""
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "exec_command",
            "arguments": '{"cmd": "ls"}'}  # fmt: skip
    output = {"type": "function_call_output", "call_id": "c1", "output": "a.py"}
    again = {**output, "output": "a.py b.py"} if ran_again else dict(output)
    b = responses.body(responses.msg("user", "fix"), reasoning, call, output,
                       dict(reasoning), dict(call), again)  # fmt: skip
    out = await responses.rewrite(engine, b)
    ids = [x["id"] for x in out.body["input"] if isinstance(x, dict) and "id" in x]
    assert len(ids) == len(set(ids)) and {"fc_1", "rs_1"} <= set(ids)
    calls = [x["call_id"] for x in out.body["input"] if x.get("type") == "function_call"]
    outputs = [x["call_id"] for x in out.body["input"] if x.get("type") == "function_call_output"]
    assert len(set(calls)) == (2 if ran_again else 1) and sorted(calls) == sorted(outputs)
    if not ran_again:
        assert out.body["input"][1:] == [reasoning, call, output]
