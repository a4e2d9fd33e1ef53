"""A stream through litellm is opened before its status is chosen, and bounded between reads
(``proxy.upstream.litellm_streams``): Gemini's provider in litellm makes its HTTP call on the
stream's first read, so an upstream 429 reached a streaming client as a 200 with an error event
and no ``retry-after``; and litellm's ``google_genai`` calls apply no timeout, so a silent
upstream held a Gemini-protocol request until ``stream_max_s``. Each through the app, against a
scripted upstream on loopback."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from proxy.errors import UpstreamTimeout
from proxy.settings import UpstreamSettings
from proxy.upstream.litellm_streams import close, opened
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "AIzaSyDummyBridgeKey000000000000000000"
EXHAUSTED = {"error": {"code": 429, "message": "Resource has been exhausted",
                       "status": "RESOURCE_EXHAUSTED"}}  # fmt: skip
GEMINI = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "timeout_s": 1.5}
OPENAI = {"name": "oai", "kind": "openai", "match": ["gpt-*"], "timeout_s": 1.5}
ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's clients belong to an event loop, and each test's app runs its own (its
    streams' lazily made one, ``module_level_aclient``, too)."""
    from proxy.providers import load_litellm

    litellm = load_litellm()
    from litellm.caching.llm_caching_handler import LLMClientCache
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", LLMClientCache())
    monkeypatch.setattr(litellm, "module_level_aclient", AsyncHTTPHandler(), raising=False)


def _bodies(model: str) -> dict[str, dict[str, Any]]:
    return {
        "/v1/chat/completions": {"model": model, "messages": ASK, "stream": True},
        "/v1/messages": {"model": model, "messages": ASK, "max_tokens": 64, "stream": True},
        "/v1/responses": {"model": model, "input": "hi", "stream": True},
    }


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
async def test_a_streamed_request_bridged_to_gemini_gets_the_upstreams_429(
    tmp_path: Path, edge: EdgeUpstream, path: str
) -> None:
    edge.reply = Reply.json(EXHAUSTED, 429, retry_after="7")
    upstream = {**GEMINI, "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    headers = {"authorization": f"Bearer {KEY}", "x-api-key": KEY}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=_bodies("gemini-2.5-flash")[path], headers=headers)
    assert r.status_code == 429, r.text
    assert "Resource has been exhausted" in r.text
    assert not r.headers.get("content-type", "").startswith("text/event-stream")
    if path != "/v1/messages":  # litellm's Messages adapter keeps the headers to itself
        assert r.headers.get("retry-after") == "7"


@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent?alt=sse"])
async def test_a_gemini_request_bridged_to_a_silent_upstream_times_out(
    tmp_path: Path, edge: EdgeUpstream, method: str
) -> None:
    edge.reply = Reply(header_delay_s=8.0)
    upstream = {**OPENAI, "base_url": edge.base_url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with in_process(settings, str(tmp_path / "db")) as c:
        began = time.monotonic()
        r = await c.post(
            f"/v1beta/models/gpt-4o:{method}", json=body, headers={"x-goog-api-key": "sk-test"}
        )
        took = time.monotonic() - began
    assert r.status_code == 504, r.text
    assert r.json()["error"]["status"] == "DEADLINE_EXCEEDED"
    assert took < 6.0


class _Stream:
    """A stand-in for litellm's stream: ``aclose`` lets its HTTP response go."""

    def __init__(self, mode: str) -> None:
        self.mode, self.closed = mode, False

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> bytes:
        if self.mode == "raise":
            raise RuntimeError("429 from the provider")
        if self.mode == "hang":
            await asyncio.sleep(10)
        return b"chunk"

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("mode", ["raise", "hang"])
async def test_a_stream_that_fails_to_open_is_closed(mode: str) -> None:
    stream = _Stream(mode)
    with pytest.raises((RuntimeError, UpstreamTimeout)):
        await opened(stream, UpstreamSettings(name="gem", timeout_s=0.2))
    assert stream.closed


@pytest.mark.parametrize("read", [0, 1])
async def test_closing_an_opened_stream_closes_litellms(read: int) -> None:
    stream = _Stream("ok")
    body = await opened(stream, UpstreamSettings(name="gem", timeout_s=0.2))
    for _ in range(read):
        await body.__anext__()
    await close(body)  # as the relay does, the answer read or not
    assert stream.closed
