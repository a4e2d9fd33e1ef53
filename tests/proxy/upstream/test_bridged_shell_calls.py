"""A Responses client's shell, local shell and patch calls, and their outputs, through the
litellm bridge to another provider: litellm's Responses-to-chat conversion dropped every one
without a word (the model saw neither the command it ran nor what came of it). Each now goes as
a function call of the tool's name, its action as arguments, and its output as that call's
result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.upstream.bridge_calls import bridged_calls
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

SERVER_KEY = "sk-ant-server-own-key-0123456789"
ANSWER = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 2},
}  # fmt: skip
LOCAL = {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", "status": "completed",
         "action": {"type": "exec", "command": ["ls", "-la"], "env": {}}}  # fmt: skip
SHELL = {"type": "shell_call", "id": "sh_2", "call_id": "call_2", "status": "completed",
         "action": {"commands": ["cat a.txt"]}}  # fmt: skip
PATCH = {"type": "apply_patch_call", "id": "ap_3", "call_id": "call_3", "status": "completed",
         "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"}}  # fmt: skip
INPUT = [
    {"role": "user", "content": "list the files"},
    LOCAL,
    {"type": "local_shell_call_output", "id": "call_1", "output": "a.txt\n"},
    SHELL,
    {"type": "shell_call_output", "call_id": "call_2",
     "output": [{"stdout": "hello\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
    PATCH,
    {"type": "apply_patch_call_output", "call_id": "call_3", "status": "completed",
     "output": "patched a.py"},
    {"role": "user", "content": "and now?"},
]  # fmt: skip


async def test_shell_and_patch_calls_reach_anthropic_as_tool_calls(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVER_KEY_FOR_TEST", SERVER_KEY)
    edge.reply = Reply.json(ANSWER)
    upstream = {"name": "up", "kind": "anthropic", "match": ["*"], "base_url": edge.url,
                "api_key_env": "SERVER_KEY_FOR_TEST"}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/responses", json={"model": "claude-x", "input": INPUT})
    assert r.status_code == 200, r.text
    sent = edge.last.json()
    blocks = [b for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"]]
    uses = {b["id"]: (b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"}
    assert uses == {
        "call_1": ("local_shell", LOCAL["action"]),
        "call_2": ("shell", SHELL["action"]),
        "call_3": ("apply_patch", PATCH["operation"]),
    }
    results = {b["tool_use_id"]: orjson.dumps(b["content"]).decode() for b in blocks
               if b["type"] == "tool_result"}  # fmt: skip
    assert set(results) == {"call_1", "call_2", "call_3"}
    assert "a.txt" in results["call_1"]
    assert "hello" in results["call_2"] and "exit_code" in results["call_2"]
    assert "patched a.py" in results["call_3"]


def test_the_clients_items_are_not_changed_and_others_are_the_same_objects() -> None:
    items: list[Any] = orjson.loads(orjson.dumps(INPUT))
    before = orjson.dumps(items)
    out = bridged_calls(items)
    assert orjson.dumps(items) == before
    assert out[0] is items[0] and out[-1] is items[-1]
    assert [i["type"] for i in out[1:-1]] == ["function_call", "function_call_output"] * 3
    plain = [{"role": "user", "content": "hi"}]
    assert bridged_calls(plain) is plain and bridged_calls("hi") == "hi"
