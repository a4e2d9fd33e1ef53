"""Gemini's REST API reads proto-JSON field names in snake_case as well as camelCase
(``function_call``, ``function_response``, ``system_instruction``, ``parameters_json_schema``,
``generation_config`` …). The adapter reads both spellings and forwards the client's own."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.gemini import GEMINI
from proxy.protocols.gemini_checks import pairing_violations
from proxy.rewrite.budgets import asked_output
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_gemini_adapter import model, rewrite, user

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}}


def snake_body(*contents: dict[str, Any]) -> dict[str, Any]:
    shell = {"name": "run_shell_command", "description": "Run.", "parameters_json_schema": SCHEMA}
    return {
        "contents": list(contents),
        "system_instruction": {"parts": [{"text": "You are a coding assistant."}]},
        "tools": [{"function_declarations": [shell]}],
        "tool_config": {"function_calling_config": {"mode": "AUTO"}},
        "generation_config": {"max_output_tokens": 512},
    }


def snake_call(cid: str | None, command: str) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": "run_shell_command", "args": {"command": command}}
    if cid is not None:
        fc["id"] = cid
    return {"function_call": fc, "thought_signature": "c2ln"}


def snake_response(cid: str | None, output: str = "made") -> dict[str, Any]:
    fr: dict[str, Any] = {"name": "run_shell_command", "response": {"output": output}}
    if cid is not None:
        fr["id"] = cid
    return {"function_response": fr}


async def test_a_snake_case_call_and_its_answer_are_a_pair(engine: Engine) -> None:
    b = snake_body(
        user("make a folder"),
        model("Running.", snake_call(None, "mkdir demo")),
        user(snake_response(None)),
        model("Created."),
        user("thanks"),
    )
    lowered = GEMINI.lower(b)
    assert [m["role"] for m in lowered.messages][2:4] == ["assistant", "tool"]
    out = await rewrite(engine, b)
    assert out.body is b  # nothing to repair: the client's own body
    assert not out.report.get("repairs")


async def test_a_camel_case_call_answered_in_snake_case_is_a_pair(engine: Engine) -> None:
    call = {"functionCall": {"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}}}
    b = snake_body(user("go"), model(call), user(snake_response("c1")), model("ok"), user("next"))
    out = await rewrite(engine, b)
    assert out.body is b
    assert not out.report.get("repairs")


async def test_a_doubled_snake_case_answer_is_repaired_in_its_spelling(engine: Engine) -> None:
    turn = model(snake_call("c1", "mkdir demo"))
    doubled = user(snake_response("c1"), snake_response("c1"))
    out = await rewrite(engine, snake_body(user("go"), turn, doubled, model("ok"), user("next")))
    fwd = out.body["contents"]
    assert fwd[1] is turn
    assert fwd[2]["parts"] == [snake_response("c1")]  # one answer, in the client's spelling
    assert [r["kind"] for r in out.report["repairs"]] == ["duplicate_result"]
    assert out.data is None or out.data == orjson.dumps(out.body)


async def test_an_unanswered_snake_case_call_gets_one_answer(engine: Engine) -> None:
    b = snake_body(user("go"), model(snake_call("c1", "ls")), user("what happened?"))
    out = await rewrite(engine, b)
    fwd = out.body["contents"]
    answers = [p for p in fwd[2]["parts"] if "functionResponse" in p or "function_response" in p]
    assert len(answers) == 1


def test_the_pairing_check_reads_both_spellings() -> None:
    contents = [user("go"), model(snake_call("c1", "ls")), user(snake_response("c1"))]
    assert pairing_violations(contents) == []
    assert pairing_violations([*contents[:2], user(snake_response("c1"), snake_response("c1"))])


def test_tools_and_output_limit_are_read_in_snake_case() -> None:
    lowered = GEMINI.lower(snake_body(user("go")))
    assert lowered.tools is not None
    assert lowered.tools[0]["function"]["parameters"] == SCHEMA
    assert lowered.messages[0]["role"] == "system"
    assert asked_output(snake_body(user("go"))) == 512


def test_a_snake_case_image_part_is_the_same_kind_as_a_camel_case_one() -> None:
    snake = {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}
    camel = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    lowered = [GEMINI.lower(snake_body(user("what is this?", p))) for p in (snake, camel)]
    assert [low.messages[-1]["content"][1] for low in lowered] == [{"type": "image"}] * 2
