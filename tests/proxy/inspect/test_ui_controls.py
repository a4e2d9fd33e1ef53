"""/ui shows what clients chose (models, bodies, commands): a character that reorders or hides
what follows it (a right-to-left override, a bidi isolate, a C1 control) is shown made visible
(``\\u202e``), as the terminal views show it, never raw."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from tests.conftest import in_process, proxy_settings

UPSTREAM = "http://upstream.test/v1"
RAW = ("\u202e", "\u2066", "\u2069", "\x9b")


async def test_ui_shows_bidi_and_control_characters_made_visible(tmp_path: Path) -> None:
    body = {
        "model": "gpt-4o\u202egpj.exe",
        "messages": [{"role": "user", "content": "open notes\u202egpj.exe\u2066x\u2069\x9b"}],
    }
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        headers = {"content-type": "application/json"}
        answer = await client.post(
            "/v1/chat/completions", content=orjson.dumps(body), headers=headers
        )
        request_id = answer.headers["x-ctxproxy-request-id"]
        for _ in range(100):  # the log's writer stores the row meanwhile
            index = (await client.get("/ui")).text
            if request_id in index:
                break
            await asyncio.sleep(0.05)
        page = (await client.get(f"/ui/requests/{request_id}")).text
        assert "gpt-4o\\u202egpj.exe" in index  # the model, made visible
        assert "notes\\u202egpj.exe\\u2066x\\u2069\\x9b" in page  # the body as captured
        for shown in (index, page):
            assert not any(raw in shown for raw in RAW)
