"""Random Responses inputs mixing every kind of call and output a client sends (functions, custom
tools, local shell, shell, apply_patch, tool search, computer), reasoning items and messages,
with ids shared at random: what is forwarded pairs every call with an output after it and every
output with a call before it (unless a stored response holds the call), and keeps no reasoning
item in front of an output or a user's message. The check is written here, apart from the
adapter's own (``proxy/protocols/checks.py``), so a blind spot in one is not in both."""

from __future__ import annotations

import copy
import random
from typing import Any

from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import engine  # noqa: F401
from tests.support.random_histories import histories

CALLS = {"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call"}
OUTPUTS = {f"{k}_output" for k in CALLS}
SEARCH = ("tool_search_call", "tool_search_output")  # paired when the client runs the search


def _item(rng: random.Random, cid: str, n: int) -> dict[str, Any]:
    shell_out = {"stdout": "x", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    return rng.choice([
        {"role": "user", "content": "go on"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                              "text": "ok"}]},
        {"type": "function_call", "call_id": cid, "name": "exec", "arguments": '{"cmd":"ls"}'},
        {"type": "function_call_output", "call_id": cid, "output": "a.txt"},
        {"type": "custom_tool_call", "call_id": cid, "name": "apply_patch", "input": "*** Begin"},
        {"type": "custom_tool_call_output", "call_id": cid, "output": "done"},
        {"type": "shell_call", "call_id": cid, "status": "completed",
         "action": {"commands": ["ls"]}},
        {"type": "shell_call_output", "call_id": cid, "output": [shell_out]},
        {"type": "apply_patch_call", "call_id": cid, "status": "completed",
         "operation": {"type": "delete_file", "path": "a.py"}},
        {"type": "apply_patch_call_output", "call_id": cid, "status": "completed"},
        {"type": "local_shell_call", "id": f"lsh_{n}", "call_id": cid, "status": "completed",
         "action": {"type": "exec", "command": ["ls"], "env": {}}},
        {"type": "local_shell_call_output", "call_id": cid, "output": "x"},
        {"type": "local_shell_call_output", "id": cid, "output": "x"},
        {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "tool_search_call", "call_id": cid, "execution": "client", "arguments": {}},
        {"type": "tool_search_output", "call_id": cid, "execution": "client", "tools": []},
        {"type": "tool_search_call", "call_id": cid, "execution": "server", "arguments": {}},
    ])  # fmt: skip


def _broken(body: dict[str, Any]) -> list[str]:
    held = bool(body.get("previous_response_id"))
    items = body["input"]
    called: dict[Any, int] = {}
    answered: set[Any] = set()
    found: list[str] = []
    for i, item in enumerate(items):
        k = item.get("type")
        if k in SEARCH and item.get("execution") == "client":
            k = "function_call" if k == SEARCH[0] else "function_call_output"
        if k in CALLS:
            called[item.get("call_id")] = i
        elif k in OUTPUTS:
            cid = item["call_id"] if "call_id" in item else item.get("id")
            answered.add(cid)
            if cid not in called and not held:
                found.append(f"input[{i}]: {k} without its call")
        elif k == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else {}
            if not nxt or str(nxt.get("type")).endswith("_output") or nxt.get("role") == "user":
                found.append(f"input[{i}]: reasoning cut from what it led to")
    found += [f"input[{i}]: {items[i]['type']} unanswered" for c, i in called.items()
              if c not in answered]  # fmt: skip
    return found


async def test_random_inputs_are_forwarded_paired(engine: Engine) -> None:  # noqa: F811
    for n, rng, ids in histories("call_"):
        items = [{"role": "user", "content": "the task"}]
        items += [_item(rng, rng.choice(ids), n * 100 + j) for j in range(rng.randint(1, 10))]
        body: dict[str, Any] = {"model": "gpt-5", "input": items}
        if rng.random() < 0.2:
            body["previous_response_id"] = "resp_stored"
        sent = copy.deepcopy(body)
        out = await engine.rewrite(body, {}, now=1000.0 + n, adapter=RESPONSES,
                                   session_id=f"s{n % 5}")  # fmt: skip
        assert body == sent, "the client's body was mutated"
        assert _broken(out.body) == [], (sent["input"], out.body["input"])
