"""A broken Anthropic history and a broken Responses input, sent to the app, reach the scripted
upstream valid in the protocol's own terms, with every untouched message or item there byte for
byte (its serialised bytes are a slice of the body the upstream received)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from proxy.protocols.checks import anthropic_violations, responses_violations
from tests.conftest import in_process
from tests.proxy.protocols import test_anthropic_adapter as a
from tests.proxy.protocols import test_responses_adapter as r
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings

JSON = {"content-type": "application/json"}


async def send(edge: EdgeUpstream, tmp_path: Path, path: str, body: dict[str, Any]) -> bytes:
    async with in_process(protocol_settings(edge), str(tmp_path / "db")) as client:
        answer = await client.post(path, content=orjson.dumps(body), headers=JSON)
        assert answer.status_code == 200, answer.text
    return edge.last.body


async def test_broken_anthropic_history_reaches_the_upstream_valid(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    edge.reply = Reply.json({"type": "message", "content": []})
    untouched = [
        a.user("make a folder"),
        a.assistant(a.thinking(), a.text("On it."), a.tool_use("toolu_1", "mkdir -p demo")),
        a.user(a.result("toolu_1", [a.text("made", cache_control={"type": "ephemeral"})])),
    ]
    broken = [
        a.assistant(a.thinking("Then list it.")),  # the thinking block, cut from its tool_use
        a.assistant(a.tool_use("toolu_2", "ls demo")),  # never answered
        a.user(a.text("and?")),
        a.assistant(a.text("Listed.")),
        a.user(a.result("toolu_ghost", "stale"), a.text("go on")),  # answers no call
    ]
    raw = await send(edge, tmp_path, "/v1/messages", a.body(*untouched, *broken))
    forwarded = orjson.loads(raw)
    assert anthropic_violations(forwarded) == []
    for message in untouched:
        assert orjson.dumps(message) in raw
    assert orjson.dumps(a.thinking("Then list it.")) in raw  # the signature's block, as sent


async def test_broken_responses_input_reaches_the_upstream_valid(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    edge.reply = Reply.json({"object": "response", "output": []})
    untouched = [
        r.msg("developer", "You are Codex."),
        r.msg("user", "make a folder"),
        r.reasoning(1),
        r.call("call_1", "mkdir -p /w/demo"),
        r.output("call_1"),
    ]
    broken = [
        r.call("call_2", "ls /w/demo"),  # never answered
        r.msg("user", "and then?", 2),
        r.output("call_ghost", "stale"),  # answers no call
        r.reasoning(3),  # cut from the item it led to
        r.msg("user", "go on", 3),
    ]
    raw = await send(edge, tmp_path, "/v1/responses", r.body(*untouched, *broken))
    forwarded = orjson.loads(raw)
    assert responses_violations(forwarded) == []
    for item in untouched:
        assert orjson.dumps(item) in raw
    assert orjson.dumps(r.reasoning(3)) not in raw
