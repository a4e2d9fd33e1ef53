"""A chat client's content part that litellm's Anthropic conversion does not carry (audio,
video, a part of no type it knows) was dropped in silence: a message of such parts only went as
no message (``messages: []``, which Anthropic refuses in its own words), and beside text the model
answered without it. Now refused before anything is sent: 400 in the chat protocol, naming the
part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

SERVER_KEY = "sk-ant-server-own-key-0123456789"
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
VIDEO = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}
ANSWER = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 2},
}  # fmt: skip


async def _post(tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch,
                content: Any) -> Any:  # fmt: skip
    monkeypatch.setenv("SERVER_KEY_FOR_TEST", SERVER_KEY)
    edge.reply = Reply.json(ANSWER)
    upstream = {"name": "up", "kind": "anthropic", "match": ["*"], "base_url": edge.url,
                "api_key_env": "SERVER_KEY_FOR_TEST"}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"model": "claude-x", "messages": [{"role": "user", "content": content}]}
    async with in_process(settings, str(tmp_path / "db")) as c:
        return await c.post("/v1/chat/completions", json=body)


@pytest.mark.parametrize(
    "content",
    [[AUDIO], [{"type": "text", "text": "what is said?"}, AUDIO], [VIDEO]],
    ids=["audio only", "audio beside text", "video"],
)
async def test_a_part_anthropic_is_not_given_is_refused_by_name(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, content: Any
) -> None:
    r = await _post(tmp_path, edge, monkeypatch, content)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    kind = content[-1]["type"]
    assert kind in error["message"]
    assert error["param"] == f"messages[0].content[{len(content) - 1}]"
    assert not edge.seen


async def test_text_and_images_still_go(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    r = await _post(tmp_path, edge, monkeypatch, [{"type": "text", "text": "what?"}, image])
    assert r.status_code == 200, r.text
    assert edge.seen
