"""Anthropic documents through litellm's Messages bridge to an OpenAI upstream on loopback
(``proxy/upstream/bridge_documents.py``): a text or content document reaches the model as text
(litellm dropped it, the answer made without it), and a PDF a tool returned goes as a file after
the tool results (litellm sent it as an ``image_url`` of ``application/pdf``, which OpenAI
refuses on every retry)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import orjson
import pytest

from proxy.upstream.bridge_documents import bridged_documents
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()


@pytest.mark.parametrize("stream", [False, True])
async def test_documents_reach_an_openai_upstream(
    tmp_path: Path, edge: EdgeUpstream, stream: bool
) -> None:
    edge.reply = Reply.json(chat_completion("read"))
    upstream = {"name": "oai", "kind": "openai", "match": ["gpt-*"], "base_url": edge.base_url}
    plain = {"type": "text", "media_type": "text/plain", "data": "ALPHA-LINE"}
    text_doc = {"type": "document", "title": "notes.txt", "source": plain}
    own = {"type": "content", "content": [{"type": "text", "text": "BETA"}]}
    content_doc = {"type": "document", "source": own}
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                          "data": PDF}}  # fmt: skip
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.pdf"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [pdf]}
    messages = [
        {"role": "user", "content": [text_doc, content_doc, {"type": "text", "text": "sum up"}]},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    body = {"model": "gpt-4o", "max_tokens": 64, "messages": messages, "stream": stream}
    if stream:
        edge.reply = Reply.json(
            chat_completion("read")
        )  # answered whole: the request is what counts
    async with in_process(
        proxy_settings(edge.base_url, upstreams=[upstream]), str(tmp_path / "db")
    ) as c:
        await c.post("/v1/messages", json=body, headers={"x-api-key": "sk-test"})
    sent = edge.last.json()["messages"]
    flat = orjson.dumps(sent).decode()
    assert "ALPHA-LINE" in flat and 'title=\\"notes.txt\\"' in flat and "BETA" in flat
    assert "application/pdf" in flat and "image_url" not in flat
    tool = next(m for m in sent if m["role"] == "tool")
    assert "attached after the tool results" in orjson.dumps(tool).decode()


async def test_a_document_by_url_reaches_an_openai_upstream_as_text(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """litellm sent a document whose source is a URL as an ``image_url`` of the PDF's URL, which
    OpenAI refuses on every retry; its chat takes no document by URL: the model is told of it."""
    edge.reply = Reply.json(chat_completion("read"))
    upstream = {"name": "oai", "kind": "openai", "match": ["gpt-*"], "base_url": edge.base_url}
    url = {"type": "url", "url": "https://example.com/spec.pdf"}
    doc = {"type": "document", "title": "spec", "source": url}
    call = {"type": "tool_use", "id": "toolu_1", "name": "Fetch", "input": {"u": "x"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [doc]}
    messages = [
        {"role": "user", "content": [doc, {"type": "text", "text": "sum up"}]},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    body = {"model": "gpt-4o", "max_tokens": 64, "messages": messages}
    async with in_process(
        proxy_settings(edge.base_url, upstreams=[upstream]), str(tmp_path / "db")
    ) as c:
        response = await c.post("/v1/messages", json=body, headers={"x-api-key": "sk-test"})
    assert response.status_code == 200, response.text
    sent = edge.last.json()["messages"]
    flat = orjson.dumps(sent).decode()
    assert "image_url" not in flat
    assert flat.count("https://example.com/spec.pdf") == 2
    tool = next(m for m in sent if m["role"] == "tool")
    assert "https://example.com/spec.pdf" in orjson.dumps(tool).decode()
    assert body["messages"][0]["content"][0] is doc and doc["source"] is url  # not changed


def test_a_document_by_url_stays_for_gemini() -> None:
    """litellm gives Gemini a PDF's URL as ``file_data``, which it reads."""
    doc = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    messages = [{"role": "user", "content": [doc]}]
    assert bridged_documents(messages, urls=True) == messages
    assert bridged_documents(messages)[0]["content"][0]["type"] == "text"
