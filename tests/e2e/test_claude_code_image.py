"""Tier 3, a real agent: Claude Code reads a picture with its ``Read`` tool through a live proxy.
The picture goes back as an ``image`` block inside the ``tool_result``, which the proxy forwards
as sent and counts at an image's estimate in the request's tool results.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import base64

import orjson

from rules.media import IMAGE_TOKENS
from tests.support.agent_clis import Claude
from tests.support.agent_proxy import completed_rows, section
from tests.support.pictures import PNG, picture
from tests.support.protocol_upstreams import tool, tool_then_text


def test_a_read_image_is_forwarded_and_counted(agent_proxy, anthropic_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    shot = picture(tmp_path / "work")
    anthropic_upstream.responder = tool_then_text(
        tool("Read", file_path=str(shot)), "A red square.", preface="Let me look."
    )
    claude = Claude(proxy.url, tmp_path / "home", tmp_path / "work")
    run = claude.run("what is in shot.png?")
    assert run.returncode == 0, run.explain()
    assert orjson.loads(run.stdout)["result"] == "A red square.", run.explain()
    _, second = anthropic_upstream.messages
    (result,) = second.json["messages"][-1]["content"][:1]
    assert result["type"] == "tool_result", result
    images = [b for b in result["content"] if b.get("type") == "image"]
    assert len(images) == 1, result
    assert base64.b64decode(images[0]["source"]["data"]) == PNG
    rows = completed_rows(proxy, 2)
    assert IMAGE_TOKENS <= section(rows[1], "tool_results") < IMAGE_TOKENS + 100, rows[1]
