"""What pruning leaves of a Responses input stays a valid one:

- a call the chat view cannot show (``computer_call``, ``shell_call``, ``tool_search_call``) made
  beside a function call is answered after that call's output, so its output is lowered into the
  next turn: the two turns go together or not at all (an output forwarded without its call is a
  400);
- an assistant turn of several messages written as one (shrink) keeps no reasoning item in front
  of an item it did not lead to: the reasoning before a message left out goes with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine

BIG = "\n".join(f"src/m/f_{k}.rs:{k}: fn f{k}() -> u32 {{ {k * 7919} }}" for k in range(300))
EXEC = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
OPAQUE = {
    "shell": (
        {"type": "shell_call", "id": "sh_1", "call_id": "call_B", "status": "completed",
         "action": {"commands": ["ls"], "timeout_ms": 1000}},
        {"type": "shell_call_output", "call_id": "call_B",
         "output": [{"stdout": "total 0\n" + BIG, "stderr": "",
                     "outcome": {"type": "exit", "exit_code": 0}}]},
    ),
    "tool_search": (
        {"type": "tool_search_call", "call_id": "call_B", "execution": "client",
         "arguments": {"query": "deploy"}, "status": "completed"},
        {"type": "tool_search_output", "call_id": "call_B", "execution": "client",
         "status": "completed", "tools": [{"type": "function", "name": "deploy",
                                           "description": BIG, "parameters": {}}]},
    ),
    "computer": (
        {"type": "computer_call", "id": "cu_1", "call_id": "call_B", "status": "completed",
         "action": {"type": "screenshot"}, "pending_safety_checks": []},
        {"type": "computer_call_output", "call_id": "call_B",
         "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}},
    ),
}  # fmt: skip


def function(cid: str, cmd: str, output: str) -> list[dict[str, Any]]:
    args = json.dumps({"cmd": cmd})
    return [
        {"type": "function_call", "call_id": cid, "name": "exec_command", "arguments": args},
        {"type": "function_call_output", "call_id": cid, "output": output},
    ]


def beside(kind: str, before: int) -> dict[str, Any]:
    """``before`` reads, then a function call and an opaque call made together (the opaque
    output after the function's), then reads up to 8 turns in all."""
    call, output = OPAQUE[kind]
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for t in range(before):
        items += function(f"p{t}", f"cat src/p{t}.rs", BIG.replace("fn", f"pn{t}"))
    fa, fa_out = function("call_A", "cargo build", BIG)
    items += [fa, call, fa_out, output]
    for t in range(8 - before):
        items += function(f"c{t}", f"cat src/m/f_{t}.rs", BIG.replace("fn", f"fn{t}"))
    return {"model": "gpt-5", "input": items, "tools": EXEC}


def unpaired(items: list[dict[str, Any]]) -> list[str]:
    """Outputs before (or without) their call, and calls without their output."""
    calls: set[str] = set()
    outputs: set[str] = set()
    wrong: list[str] = []
    for item in items:
        kind = str(item.get("type", "message"))
        cid = item.get("call_id")
        if kind.endswith("_output"):
            if cid not in calls:
                wrong.append(f"{kind} {cid} without its call before it")
            outputs.add(cid)
        elif kind.endswith("_call"):
            calls.add(cid)
    wrong += [f"call {cid} unanswered" for cid in calls - outputs]
    return wrong


@pytest.mark.parametrize("kind", OPAQUE)
async def test_an_opaque_call_and_its_later_output_go_together(engine: Engine, kind: str) -> None:
    dropped = 0
    for before in range(8):
        for budget in (30_000, 20_000, 12_000, 8_000, 5_000):
            body = beside(kind, before)
            out = await engine.rewrite(body, {}, now=1000.0, session_id=f"{kind}{before}{budget}",
                                       adapter=RESPONSES, model="gpt-5", budget=budget)  # fmt: skip
            sent = out.body["input"]
            assert unpaired(sent) == [], (before, budget)
            dropped += not any(i.get("call_id") == "call_B" for i in sent)
    assert dropped  # some budgets did drop the pair, together


async def test_reasoning_before_a_message_left_out_goes_with_it(engine: Engine) -> None:
    def reasoning(rid: str) -> dict[str, Any]:
        return {"type": "reasoning", "id": rid, "summary": [], "encrypted_content": "gAAAA" + rid}

    def said(mid: str, text: str) -> dict[str, Any]:
        return {"type": "message", "id": mid, "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}  # fmt: skip

    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for t in range(12):
        fc, fc_out = function(f"c{t}", f"cat src/m/f_{t}.rs", BIG.replace("fn", f"fn{t}"))
        preamble = f"Turn {t}: reading the module to see what the build needs.\n" * 60
        items += [reasoning(f"rs_{t}_0"), said(f"msg_{t}_0", preamble), reasoning(f"rs_{t}_1"),
                  said(f"msg_{t}_1", "Now the call."), fc, fc_out]  # fmt: skip
    body = {"model": "gpt-5", "input": items, "tools": EXEC}
    original = {i["id"]: n for n, i in enumerate(items) if "id" in i}
    shrunk = False
    for budget in (60_000, 40_000, 30_000):
        out = await engine.rewrite(body, {}, now=1000.0, session_id=f"r{budget}",
                                   adapter=RESPONSES, model="gpt-5", budget=budget)  # fmt: skip
        sent = out.body["input"]
        shrunk |= "msg_0_1" not in json.dumps(sent) and "rs_0_0" in json.dumps(sent)
        for n, item in enumerate(sent[:-1]):
            if item.get("type") != "reasoning":
                continue
            following = sent[n + 1]
            # what follows a reasoning item is what followed it in the client's input
            assert original.get(following.get("id")) == original[item["id"]] + 1, (budget, n)
    assert shrunk  # a turn's messages were written as one
