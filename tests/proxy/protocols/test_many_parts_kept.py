"""A Messages request whose one user message holds thousands of tool results lowers to thousands
of parts of that one message: its lifting's key held the message's bytes once a part (4,000
results of a 259 KB message took the proxy from 200 MB to 3 GB in three requests, held), and an
entry larger than a whole generation was kept past the bound."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import orjson

from proxy.generations import Generations
from proxy.protocols.anthropic import ANTHROPIC
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.factories import anthropic_message


def _body(n: int, size: int, tag: str) -> dict[str, Any]:
    calls = [{"type": "tool_use", "id": f"toolu_{tag}{i}", "name": "Bash",
              "input": {"command": "ls"}} for i in range(n)]  # fmt: skip
    results = [{"type": "tool_result", "tool_use_id": f"toolu_{tag}{i}", "content": tag * size}
               for i in range(n)]  # fmt: skip
    messages = [{"role": "user", "content": f"go {tag}"}, {"role": "assistant", "content": calls},
                {"role": "user", "content": results}]  # fmt: skip
    return {"model": "claude-x", "max_tokens": 5, "messages": messages}


async def test_a_message_of_many_parts_is_kept_once(tmp_path: Path, edge: EdgeUpstream) -> None:
    edge.reply = Reply.json(anthropic_message())
    n, size = 1500, 40
    async with in_process(protocol_settings(edge), str(tmp_path / "db")) as c:
        body = _body(n, size, "a")
        message_bytes = len(orjson.dumps(body["messages"][2]))
        tracemalloc.start()
        try:
            r = await c.post("/v1/messages", json=body, headers={"x-session-id": "many"})
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert r.status_code == 200, r.text
    # the message's bytes a few times over (lowerings, liftings, state), never once per part
    assert held < 40 * message_bytes + 8_000_000, (held, message_bytes)
    assert ANTHROPIC.lifts.held_bytes < 20 * message_bytes + 1_000_000


def test_an_entry_larger_than_a_generation_is_not_kept() -> None:
    kept: Generations[str] = Generations(max_bytes=1000)
    kept._keep("small", "a", 100)
    kept._keep("huge", "b", 600)  # past a generation's 500 bytes
    assert "huge" not in kept._young and "huge" not in kept._old
    assert kept._young == {"small": "a"} and kept.held_bytes == 100
