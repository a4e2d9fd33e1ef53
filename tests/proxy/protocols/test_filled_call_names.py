"""A call sent without a name gets one from the chain repair (``unknown_tool``), and the lifting
writes it onto the call the provider gets: Gemini's ``functionCall`` and a Responses
``function_call`` went out nameless (a 400), and Gemini's response was renamed to match a name
its call never carried."""

from __future__ import annotations

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
