"""A runaway turn (more calls left unanswered than the repair writes results for) whose kept call
reuses an id an earlier turn's call had: the repair renames it and drops the others. The lift
matched the turn's calls by id only, so the renamed call stood for none of the client's and was
written anew at the turn's end: on Gemini without the ``thoughtSignature`` its part carried
(Gemini 3 refuses a turn whose first call comes back unsigned, on every retry), on Responses
without its item id and the reasoning item that led to it, on Messages without its block's
``cache_control``. The renamed call now keeps its own block, part or item."""

from __future__ import annotations

from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.gemini import GEMINI
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine

CALLS = 20  # past ``max_synthetic_results`` (16): a runaway turn


async def test_gemini_keeps_the_signature_of_the_renamed_first_call(engine: Engine) -> None:
    calls: list[Any] = [
        {"functionCall": {"id": f"call_{k}", "name": "sh", "args": {"n": k}}} for k in range(CALLS)
    ]
    calls[0]["thoughtSignature"] = "SIG2"
    body = {"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_0", "name": "sh", "args": {}}},
                                    ]},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_0", "name": "sh",
                                                         "response": {"output": "a"}}}]},
        {"role": "model", "parts": calls},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_0", "name": "sh",
                                                         "response": {"output": "0"}}}]},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {}, now=1000.0, adapter=GEMINI, model="gemini-3-pro")
    turn = out.body["contents"][3]["parts"]
    kept = [p for p in turn if "functionCall" in p]
    assert len(kept) == 1
    assert kept[0]["functionCall"]["args"] == {"n": 0}
    assert kept[0]["functionCall"]["id"] != "call_0"  # renamed: the id was the earlier call's
    assert kept[0]["thoughtSignature"] == "SIG2"
    answer = out.body["contents"][4]["parts"][0]["functionResponse"]
    assert answer["id"] == kept[0]["functionCall"]["id"]
    assert not out.report.get("integrity")


async def test_responses_keeps_the_item_and_its_reasoning(engine: Engine) -> None:
    calls: list[Any] = [
        {"type": "function_call", "id": f"fc_{k}", "call_id": f"call_{k}", "name": "sh",
         "arguments": f'{{"n":{k}}}'} for k in range(CALLS)
    ]  # fmt: skip
    body = {"model": "gpt-5", "store": False, "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "call_0", "name": "sh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_0", "output": "a"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "E2"},
        *calls,
        {"type": "function_call_output", "call_id": "call_0", "output": "0"},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {"session-id": "r"}, now=1000.0, adapter=RESPONSES)
    items = out.body["input"]
    at = next(i for i, it in enumerate(items) if it.get("id") == "fc_0")
    assert items[at]["call_id"] not in ("call_0", "call_1")  # renamed
    assert items[at - 1]["id"] == "rs_2"  # the reasoning that led to it, before it
    assert sum(it.get("type") == "function_call" for it in items) == 2
    assert not out.report.get("integrity")


async def test_messages_keeps_the_block_with_its_breakpoint(engine: Engine) -> None:
    uses: list[Any] = [
        {"type": "tool_use", "id": f"toolu_{k}", "name": "Bash", "input": {"n": k}}
        for k in range(CALLS)
    ]
    uses[0]["cache_control"] = {"type": "ephemeral"}
    body = {"model": "claude-x", "max_tokens": 64, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0", "name": "Bash",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0",
                                      "content": "a"}]},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0",
                                      "content": "0"}]},
    ]}  # fmt: skip
    out = await engine.rewrite(body, {}, now=1000.0, adapter=ANTHROPIC)
    kept = [b for b in out.body["messages"][3]["content"] if b.get("type") == "tool_use"]
    assert len(kept) == 1
    assert kept[0]["input"] == {"n": 0} and kept[0]["id"] != "toolu_0"
    assert kept[0]["cache_control"] == {"type": "ephemeral"}
    assert not out.report.get("integrity")
