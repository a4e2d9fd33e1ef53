"""Gemini ``generateContent`` to an upstream that does not speak it, through litellm's
``google_genai`` bridge (``proxy.upstream.gemini_bridge``), against a scripted OpenAI chat
upstream on loopback: the answer in Gemini's shape (JSON, or SSE ``data:`` events), the system
instruction and the generation config carried, the key as configured or the client's, a
provider's error with its status; ``countTokens`` estimated here."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from proxy.errors import Unauthorized
from proxy.settings import UpstreamSettings
from proxy.upstream.gemini import generate
from proxy.upstream.gemini_route import parse_route
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.sse_usage import UsageTap
from tests.support.anthropic_upstream import sse_reply
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import chat_completion

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "AIzaSyDummyBridgeKey000000000000000000"
BODY = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "systemInstruction": {"parts": [{"text": "Be brief."}], "role": "user"},
    "generationConfig": {"temperature": 0.5, "thinkingConfig": {"includeThoughts": True}},
}
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o"}


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


def openai_upstream(edge) -> UpstreamSettings:  # type: ignore[no-untyped-def]
    return UpstreamSettings(name="oai", base_url=edge.base_url)


def route(method: str = "generateContent"):  # type: ignore[no-untyped-def]
    found = parse_route(f"/v1beta/models/gpt-4o:{method}")
    assert found is not None
    return found


async def test_generate_content_to_an_openai_upstream(edge, client) -> None:  # type: ignore[no-untyped-def]
    edge.reply = Reply.json(chat_completion("Bonjour"))
    r = await generate(client, openai_upstream(edge), route(), orjson.dumps(BODY), {}, "", KEY)
    assert r.status == 200, r.body
    answer = orjson.loads(r.body or b"")
    assert answer["candidates"][0]["content"]["parts"] == [{"text": "Bonjour"}]
    assert answer["usageMetadata"]["promptTokenCount"] == 3
    seen = edge.last
    assert seen.target == "/v1/chat/completions"
    assert seen.header("authorization") == f"Bearer {KEY}"
    sent = seen.json()
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert sent["temperature"] == 0.5 and "thinkingConfig" not in orjson.dumps(sent).decode()


def _hello_stream() -> Any:
    """An OpenAI upstream streaming "Hello" in two chunks, then its usage."""
    return sse_reply(
        sse(
            {**CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
            {**CHUNK, "choices": [{"index": 0, "delta": {"content": "lo"},
                                   "finish_reason": "stop"}]},
            {**CHUNK, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
        )
    )  # fmt: skip


async def test_stream_to_an_openai_upstream_is_gemini_sse(edge, client) -> None:  # type: ignore[no-untyped-def]
    edge.reply = _hello_stream()
    r = await generate(
        client, openai_upstream(edge), route("streamGenerateContent"), orjson.dumps(BODY), {},
        "alt=sse", KEY,
    )  # fmt: skip
    assert r.chunks is not None and r.headers["content-type"] == "text/event-stream"
    data = b"".join([c async for c in r.chunks])
    events = [orjson.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]
    text = "".join(
        p.get("text", "") for e in events for c in e.get("candidates", [])
        for p in c["content"]["parts"]
    )  # fmt: skip
    assert text == "Hello"
    tap = UsageTap()
    tap.feed(data)
    assert tap.usage is not None and tap.usage["promptTokenCount"] == 9
    assert edge.last.json()["stream"] is True


async def test_no_key_no_call(edge, client) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Unauthorized):
        await generate(client, openai_upstream(edge), route(), orjson.dumps(BODY), {}, "", None)
    assert edge.seen == []


async def test_count_tokens_is_estimated_here(edge, client) -> None:  # type: ignore[no-untyped-def]
    r = await generate(
        client, openai_upstream(edge), route("countTokens"), orjson.dumps(BODY), {}, "", None
    )
    assert r.status == 200 and orjson.loads(r.body or b"")["totalTokens"] > 3
    assert edge.seen == []


async def test_json_array_stream_to_an_openai_upstream_by_element(edge, client) -> None:  # type: ignore[no-untyped-def]
    edge.reply = _hello_stream()
    r = await generate(
        client, openai_upstream(edge), route("streamGenerateContent"), orjson.dumps(BODY), {},
        "", KEY,
    )  # fmt: skip
    assert r.chunks is not None and r.json_array and r.tap is not None
    assert r.headers["content-type"] == "application/json"
    pieces = [c async for c in r.chunks]
    elements = orjson.loads(b"".join(pieces))
    assert len(pieces) >= len(elements) >= 2  # one piece an element, then the closing bracket
    for piece, element in zip(pieces, elements, strict=False):
        assert orjson.loads(piece.lstrip(b"[,\r\n")) == element
    text = "".join(
        p.get("text", "") for e in elements for c in e.get("candidates", [])
        for p in c["content"]["parts"]
    )  # fmt: skip
    assert text == "Hello"
    tap = r.tap()
    for piece in pieces:
        tap.feed(piece)
    assert tap.usage is not None and tap.usage["promptTokenCount"] == 9


@pytest.mark.parametrize(
    ("base", "wanted"),
    [("", "/v1beta/models"), ("/", "/v1beta/models")],  # (the settings refuse a version)
)  # fmt: skip
async def test_chat_to_a_gemini_upstream_goes_to_its_versioned_path(
    tmp_path: Any, edge: Any, base: str, wanted: str
) -> None:
    """Chat Completions for a ``gemini-*`` model, through litellm to a Gemini upstream given as
    the shipped config gives Google's (no version in it): litellm wrote ``{base}/models/…``, a
    path Google has not (the native relay takes the version from the client's path)."""
    from tests.conftest import in_process, proxy_settings

    answer = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hello"}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
    }  # fmt: skip
    edge.reply = Reply.json(answer)
    upstream = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url + base}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "hi"}]}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}
        )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "hello"
    sent = edge.last.target
    assert sent.startswith(f"{wanted}/gemini-2.5-flash:generateContent"), sent
