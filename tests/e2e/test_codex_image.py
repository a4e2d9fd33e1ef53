"""Tier 3, a real agent: Codex looks at a picture with its ``view_image`` tool through a live
proxy. The picture goes back inside the ``function_call_output`` as an ``input_image`` part,
which the proxy forwards as sent and counts at an image's estimate in the tool results.

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import base64
from typing import Any

from rules.media import IMAGE_TOKENS
from tests.support.agent_clis import Codex
from tests.support.agent_proxy import completed_rows, section
from tests.support.pictures import PNG, picture
from tests.support.protocol_upstreams import tool, tool_then_text


def test_a_viewed_image_is_forwarded_and_counted(agent_proxy, responses_upstream, tmp_path) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    shot = picture(tmp_path / "work")
    responses_upstream.responder = tool_then_text(
        tool("view_image", path=str(shot)), "A red square."
    )
    codex = Codex(proxy.base_url, tmp_path / "home", tmp_path / "work")
    run = codex.run("what is in shot.png?")
    assert run.returncode == 0, run.explain()
    assert run.stdout.strip().endswith("A red square."), run.explain()
    _, second = responses_upstream.responses
    items: list[Any] = second.json["input"]
    (output,) = [i for i in items if i.get("type") == "function_call_output"]
    (image,) = [p for p in output["output"] if p.get("type") == "input_image"]
    assert base64.b64decode(image["image_url"].removeprefix("data:image/png;base64,")) == PNG
    rows = completed_rows(proxy, 2)
    assert IMAGE_TOKENS <= section(rows[1], "tool_results") < IMAGE_TOKENS + 100, rows[1]
