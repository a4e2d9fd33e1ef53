"""Random Anthropic histories of every block a client sends (text, empty text, thinking,
redacted thinking, tool_use with and without input, server tools and their results, tool
results of every shape, some with a cache breakpoint), with ids shared at random and turns of one
role in a row: what is forwarded answers each tool_use at the start of the next user message,
holds no result without its call, no empty text and no tool_use without input, and does not end
on the model's turn. The check is written here, apart from the adapter's own
(``proxy/protocols/checks.py``), so a blind spot in one is not in both."""

from __future__ import annotations

import copy
import random
from typing import Any

from proxy.protocols.anthropic import ANTHROPIC
from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_responses_adapter import engine  # noqa: F401
from tests.support.random_histories import histories, turn_roles

MARK = {"type": "ephemeral"}


def _assistant_block(rng: random.Random, cid: str, n: int) -> dict[str, Any]:
    server = f"srvtoolu_{n}"
    return rng.choice([
        {"type": "text", "text": "ok"},
        {"type": "text", "text": ""},
        {"type": "thinking", "thinking": "hmm", "signature": f"sig{n}"},
        {"type": "redacted_thinking", "data": "xx"},
        {"type": "tool_use", "id": cid, "name": "bash", "input": {"command": "ls"}},
        {"type": "tool_use", "id": cid, "name": "bash"},
        {"type": "server_tool_use", "id": server, "name": "web_search", "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": server, "content": []},
    ])  # fmt: skip


def _user_block(rng: random.Random, cid: str) -> dict[str, Any]:
    return rng.choice([
        {"type": "text", "text": "go"},
        {"type": "text", "text": " "},
        {"type": "tool_result", "tool_use_id": cid, "content": "a.txt"},
        {"type": "tool_result", "tool_use_id": cid, "is_error": True,
         "content": [{"type": "text", "text": "x"}]},
        {"type": "tool_result", "tool_use_id": cid,
         "content": [{"type": "text", "text": "y", "cache_control": MARK}]},
        {"type": "tool_result", "tool_use_id": cid},
    ])  # fmt: skip


def _blocks(m: dict[str, Any]) -> list[Any]:
    c = m["content"]
    return c if isinstance(c, list) else [{"type": "text", "text": c}]


def _broken(messages: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for i, m in enumerate(messages):
        blocks = _blocks(m)
        found += [f"messages[{i}]: empty text" for b in blocks
                  if b.get("type") == "text" and not b.get("text", "").strip()]  # fmt: skip
        found += [f"messages[{i}]: tool_use without input" for b in blocks
                  if b.get("type") == "tool_use" and "input" not in b]  # fmt: skip
        if m["role"] == "assistant":
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if len(uses) != len(set(uses)):
                found.append(f"messages[{i}]: a tool_use id twice")
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            leading: list[Any] = []
            for b in _blocks(nxt) if nxt is not None and nxt["role"] == "user" else []:
                if b.get("type") != "tool_result":
                    break
                leading.append(b["tool_use_id"])
            found += [f"messages[{i}]: {u} unanswered" for u in uses if u not in leading]
        else:
            prev = messages[i - 1] if i else None
            called = [b["id"] for b in _blocks(prev) if b.get("type") == "tool_use"] if (
                prev is not None and prev["role"] == "assistant") else []  # fmt: skip
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            found += [f"messages[{i}]: {r} without its call" for r in results if r not in called]
    if messages and messages[-1]["role"] == "assistant":
        found.append("ends on the model's turn")
    return found


async def test_random_histories_are_forwarded_valid(engine: Engine) -> None:  # noqa: F811
    for n, rng, ids in histories("toolu_"):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
        for t, role in enumerate(turn_roles(rng, "assistant", "user")):
            blocks = [
                _assistant_block(rng, rng.choice(ids), n * 100 + t * 10 + j)
                if role == "assistant"
                else _user_block(rng, rng.choice(ids))
                for j in range(rng.randint(1, 3))
            ]
            messages.append({"role": role, "content": blocks})
        if messages[-1]["role"] == "assistant":
            messages.append({"role": "user", "content": "continue"})
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
        sent = copy.deepcopy(body)
        out = await engine.rewrite(body, {}, now=1000.0 + n, adapter=ANTHROPIC,
                                   session_id=f"s{n % 5}")  # fmt: skip
        assert body == sent, "the client's body was mutated"
        assert _broken(out.body["messages"]) == [], (sent["messages"], out.body["messages"])
