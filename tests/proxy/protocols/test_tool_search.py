"""Claude Code's tool search: deferred tools (``defer_loading``) are loaded by the
``tool_reference`` blocks a ToolSearch result holds (or the server's ``tool_search_tool_result``).
Gone, the model loses the tools it loaded, and a later call of one stands without its definition:
pruning keeps such messages whatever the budget, and drops the turns around them."""

from __future__ import annotations

import json
from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.rewrite.engine import Engine
from rules.messages import LOADS_TOOLS

TOOLS = [
    {"name": "Bash", "input_schema": {"type": "object"}},
    {"name": "ToolSearch", "input_schema": {"type": "object"}},
    {"name": "NotebookEdit", "input_schema": {"type": "object"}, "defer_loading": True},
]
REFERENCES = [
    {"type": "tool_reference", "tool_name": "NotebookEdit"},
    {"type": "tool_reference", "tool_name": "WebFetch"},
]


def use(tid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": name,
                                              "input": args}]}  # fmt: skip


def answer(tid: str, content: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                         "content": content}]}  # fmt: skip


def conversation(server_search: bool = False) -> dict[str, Any]:
    """A task, a tool search early on, 30 runs of ~700 tokens, then a call of a loaded tool."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the notebook's imports"}]
    if server_search:
        result = {"type": "tool_search_tool_search_result", "tool_references": REFERENCES}
        messages += [
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_regex",
                 "input": {"query": "notebook"}},
                {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": result},
                {"type": "text", "text": "Found the notebook tools."},
                {"type": "tool_use", "id": "t_ls", "name": "Bash", "input": {"command": "ls"}},
            ]},
            answer("t_ls", "a.ipynb"),
        ]  # fmt: skip
    else:
        messages += [use("t_search", "ToolSearch", query="select:NotebookEdit,WebFetch"),
                     answer("t_search", REFERENCES)]  # fmt: skip
    for i in range(30):
        out = "\n".join(f"line {i}.{k}: collected test_module_{k} ok" for k in range(60))
        messages += [use(f"t{i}", "Bash", command=f"pytest -k case_{i}"), answer(f"t{i}", out)]
    messages += [use("t_edit", "NotebookEdit", notebook_path="a.ipynb"), answer("t_edit", "ok")]
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": TOOLS, "messages": messages}


async def test_a_tool_searchs_references_outlive_a_forced_compaction(engine: Engine) -> None:
    body = conversation()
    out = await engine.rewrite(body, {}, now=1000.0, session_id="ts", adapter=ANTHROPIC,
                               model="claude-sonnet-4-5", budget=1_200)  # fmt: skip
    pruned = out.report["prune"]
    assert pruned["compacted"] is True and pruned["tokens_after"] <= 1_200
    sent = out.body["messages"]
    assert len(sent) < len(body["messages"])  # whole turns went
    assert body["messages"][1] in sent and body["messages"][2] in sent  # as sent, to the byte
    assert LOADS_TOOLS not in json.dumps(out.body)


async def test_the_servers_tool_search_outlives_a_forced_compaction(engine: Engine) -> None:
    body = conversation(server_search=True)
    out = await engine.rewrite(body, {}, now=1000.0, session_id="ts2", adapter=ANTHROPIC,
                               model="claude-sonnet-4-5", budget=1_200)  # fmt: skip
    assert out.report["prune"]["compacted"] is True
    sent = out.body["messages"]
    assert len(sent) < len(body["messages"])
    assert body["messages"][1] in sent and body["messages"][2] in sent  # the search's turn
    assert LOADS_TOOLS not in json.dumps(out.body)
