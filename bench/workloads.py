"""Benchmark workloads built from the shared trace corpus (real agent messages)."""

from __future__ import annotations

from typing import Any

from tests.support.traces import iter_conversations


def _turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The assistant/tool part of a conversation (after its first user message)."""
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            turns = messages[i + 1 :]
            # the run's final submit call has no result: leave it out, the workload stays valid
            while turns and turns[-1].get("role") == "assistant" and turns[-1].get("tool_calls"):
                turns = turns[:-1]
            return turns
    return []


def _with_prefixed_ids(message: dict[str, Any], prefix: str) -> dict[str, Any]:
    m = dict(message)
    if m.get("tool_calls"):
        m["tool_calls"] = [{**c, "id": f"{prefix}{c.get('id')}"} for c in m["tool_calls"]]
    if m.get("role") == "tool":
        m["tool_call_id"] = f"{prefix}{m.get('tool_call_id')}"
    m.pop("reasoning_content", None)
    return m


def agent_conversation(n_messages: int) -> list[dict[str, Any]]:
    """A real-looking agent conversation of exactly ``n_messages`` messages ending on a tool result:
    system + task of one mini-swe-agent run, then the tool turns of several runs in a row."""
    convs = [
        c
        for c in iter_conversations()
        if c["id"].startswith("mswea-pr816") and not c["meta"].get("synthesized_tool_calls")
    ]
    convs.sort(key=lambda c: -sum(len(str(m.get("content") or "")) for m in c["messages"]))
    head = [m for m in convs[0]["messages"] if m.get("role") in ("system", "user")][:2]
    out = list(head)
    for k, conv in enumerate(convs):
        for m in _turns(conv["messages"]):
            if m.get("role") not in ("assistant", "tool"):
                continue
            out.append(_with_prefixed_ids(m, f"c{k}_"))
        if len(out) >= n_messages + 20:
            break
    out = out[:n_messages]
    while out[-1].get("role") != "tool":  # end where an agent would send: after a result
        out.pop()
    return out
