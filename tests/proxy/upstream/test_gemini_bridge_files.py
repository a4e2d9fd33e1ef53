"""A Gemini ``fileData`` part (a file by its URI: Google's Files API, a bucket, a URL) sent to a
model of another provider through the bridge. litellm made of it an ``image_url`` or a
``file_id`` of that URI, which the provider cannot read (Anthropic refuses a ``file_id`` that is
not one of its files, on every retry) or which litellm fetched itself, from the proxy's host,
and refused as a 400 in litellm's words. It goes as a text part naming the file, as a bridged
Anthropic document by URL does; the rest of the request is unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import in_process
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

URI = "https://generativelanguage.googleapis.com/v1beta/files/abc123"
ANSWERS = {"gpt-4o": chat_completion("ok"), "claude-x": anthropic_message("ok")}


@pytest.mark.parametrize("mime", ["application/pdf", "image/png"])
@pytest.mark.parametrize("model", ANSWERS)
async def test_a_file_by_uri_is_named_not_fetched(
    tmp_path: Path, edge: EdgeUpstream, model: str, mime: str
) -> None:
    edge.reply = Reply.json(ANSWERS[model])
    part = {"fileData": {"mimeType": mime, "fileUri": URI}}
    body = {"contents": [{"role": "user", "parts": [{"text": "sum it up"}, part]}]}
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as c:
        path = f"/v1beta/models/{model}:generateContent"
        r = await c.post(path, json=body, headers={"x-goog-api-key": "k"})
    assert r.status_code == 200, r.text
    sent = edge.last.json()["messages"][-1]["content"]
    texts = [b.get("text", "") for b in sent if isinstance(b, dict)]
    assert texts[0] == "sum it up" and any(URI in t and mime in t for t in texts[1:]), sent
    assert all(b.get("type") == "text" for b in sent), sent
