"""A client's ``cache_control`` marks on a request bridged to Gemini: litellm made each marked
prefix a paid context-cache object (``POST /cachedContents``, stored an hour), called the cache
API before every request, and failed the request when Google refused the cache. No bridge makes
one (``proxy.providers.load_litellm``); Gemini caches prefixes by itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, proxy_settings
from tests.proxy.upstream.test_bridge_stream_open import KEY, fresh_clients  # noqa: F401
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
MARK = {"type": "ephemeral"}
LONG = "You are a careful coding agent. " * 400  # past any minimum a cache would need
ANSWER = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", {
            "model": "gemini-2.5-flash", "max_tokens": 64,
            "system": [{"type": "text", "text": LONG, "cache_control": MARK}],
            "tools": [{"name": "bash", "input_schema": {"type": "object"},
                       "cache_control": MARK}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": MARK}]}]}),
        ("/v1/responses", {
            "model": "gemini-2.5-flash",
            "input": [{"role": "system", "content": [
                {"type": "input_text", "text": LONG, "cache_control": MARK}]},
                {"role": "user", "content": "hi"}]}),
        ("/v1/chat/completions", {
            "model": "gemini-2.5-flash",
            "messages": [{"role": "system", "content": [
                {"type": "text", "text": LONG, "cache_control": MARK}]},
                {"role": "user", "content": "hi"}]}),
    ],
)  # fmt: skip
async def test_no_context_cache_is_made_of_a_clients_marks(
    tmp_path: Path, edge: EdgeUpstream, fresh_clients: None, path: str, body: dict[str, Any]  # noqa: F811
) -> None:
    edge.reply = Reply.json(ANSWER)
    upstream = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    headers = {"x-api-key": KEY, "authorization": f"Bearer {KEY}"}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=headers)
    assert r.status_code == 200, r.text
    targets = [s.target for s in edge.seen]
    assert all("cachedContents" not in t for t in targets), targets
    assert len(targets) == 1 and ":generateContent" in targets[0]
    sent = orjson.loads(edge.seen[0].body)
    assert "cachedContent" not in sent and LONG.strip() in orjson.dumps(sent).decode()
