"""The server reads each session's next body through its body memory: a growing conversation,
sent compactly (reused) and indented (never reused, parsed whole each time), reaches the
upstream as the same request in every protocol, and the compact one was read from the kept one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process
from tests.proxy.protocols import test_anthropic_adapter as a
from tests.proxy.protocols import test_responses_adapter as r
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.factories import chat_completion

JSON = {"content-type": "application/json"}


def chat_turns(k: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "make folders"}]
    for i in range(k):
        command = orjson.dumps({"command": f"mkdir -p /w/d{i}"}).decode()
        function = {"name": "bash", "arguments": command}
        call = {"id": f"call_{i}", "type": "function", "function": function}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "made"},
        ]
    messages.append({"role": "user", "content": "delete the folder you just created"})
    return {"model": "gpt-5", "messages": messages, "stream": False}


def anthropic_turns(k: int) -> dict[str, Any]:
    messages = [a.user("make folders")]
    for i in range(k):
        last = {"cache_control": {"type": "ephemeral"}} if i == k - 1 else {}  # the moved mark
        messages += [
            a.assistant(a.thinking(), a.tool_use(f"toolu_{i}", f"mkdir -p /w/d{i}")),
            a.user(a.result(f"toolu_{i}", "made", **last)),
        ]
    messages.append(a.user(a.text("delete the folder you just created")))
    return a.body(*messages)


def responses_turns(k: int) -> dict[str, Any]:
    items: list[Any] = [r.msg("user", "make folders")]
    for i in range(k):
        items += [r.reasoning(i), r.call(f"call_{i}", f"mkdir -p /w/d{i}"), r.output(f"call_{i}")]
    items.append(r.msg("user", "delete the folder you just created"))
    return r.body(*items)


CASES: dict[str, tuple[str, Callable[[int], dict[str, Any]], Reply]] = {
    "chat": ("/v1/chat/completions", chat_turns, Reply.json(chat_completion())),
    "messages": ("/v1/messages", anthropic_turns, Reply.json({"type": "message", "content": []})),
    "responses": (
        "/v1/responses",
        responses_turns,
        Reply.json({"object": "response", "output": []}),
    ),
}


@pytest.mark.parametrize("protocol", sorted(CASES))
async def test_a_reused_body_reaches_the_upstream_as_one_parsed_whole(
    edge: EdgeUpstream, tmp_path: Path, protocol: str
) -> None:
    path, turns, reply = CASES[protocol]
    edge.reply = reply
    sent: dict[str, list[Any]] = {}
    for style in ("compact", "indented"):
        option = orjson.OPT_INDENT_2 if style == "indented" else 0
        async with in_process(protocol_settings(edge), str(tmp_path / style)) as client:
            start = len(edge.seen)
            for k in range(1, 7):
                raw = orjson.dumps(turns(k), option=option)
                headers = {**JSON, "x-session-id": "one"}
                answer = await client.post(path, content=raw, headers=headers)
                assert answer.status_code == 200, answer.text
            reused = client.app.state.handlers[protocol].bodies.reused  # type: ignore[attr-defined]
            assert reused == (5 if style == "compact" else 0)
            metrics = (await client.get("/metrics")).text  # what an operator sees of it
            assert f'ctxproxy_bodies_reused_total{{protocol="{protocol}"}} {reused}.0' in metrics
            held = f'ctxproxy_body_memory_bytes{{protocol="{protocol}"}} '
            assert (held + "0.0" in metrics) == (style == "indented")
            sent[style] = [orjson.loads(seen.body) for seen in edge.seen[start:]]
    assert sent["compact"] == sent["indented"]
    # the rules read the reused messages: the last request points at the last folder made
    assert "means the folder /w/d5 (created)" in orjson.dumps(sent["compact"][-1]).decode()
