"""A request no rule changed goes upstream as the client's own bytes, in every protocol (chat
completions too): not parsed and serialised again. A changed one is serialised from the result."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import in_process, proxy_settings
from tests.support.factories import request, user

JSON = {"content-type": "application/json"}


async def test_an_unchanged_chat_body_is_forwarded_byte_for_byte(tmp_path: Path, edge) -> None:
    settings = proxy_settings(edge.base_url, rules=[{"name": "measure"}])
    # spacing and key order of the client's own, which serialising again would not keep
    raw = orjson.dumps(request(user("hi")), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", content=raw, headers=JSON)
        assert r.status_code == 200
    assert edge.last.body == raw


async def test_a_changed_chat_body_is_serialised_from_the_rewrite(tmp_path: Path, edge) -> None:
    settings = proxy_settings(edge.base_url)
    # a tool result with no call before it: repair_tool_chain repairs it
    body = request(user("hi"))
    body["messages"].append({"role": "tool", "tool_call_id": "call_orphan", "content": "x"})
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", content=raw, headers=JSON)
        assert r.status_code == 200
    sent = edge.last.body
    assert orjson.loads(sent) != body  # repaired
    assert sent == orjson.dumps(orjson.loads(sent))  # serialised, not the client's spacing
