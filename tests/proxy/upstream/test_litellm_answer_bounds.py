"""An answer read through litellm (a bridged protocol) is bounded as the native relays bound it
(``proxy/litellm_answers.py``): asked for uncompressed, inflated here a piece at a time when it
comes compressed all the same, a whole answer past its bound or an event stream's line past its
own a failed read (502), not memory taken and the loop held for every tenant. On litellm's
aiohttp transport, the one it uses in production, and on the httpx one it takes instead when
told to (``DISABLE_AIOHTTP_TRANSPORT``)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy import litellm_answers
from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
ASK = [{"role": "user", "content": "hi"}]
JSON = ("content-type", "application/json")


@pytest.fixture(autouse=True, params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's production transport or its httpx one, and clients made afresh for this test's
    loop."""
    from proxy.providers import load_litellm

    litellm = load_litellm()
    from litellm.caching.llm_caching_handler import LLMClientCache
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    if request.param == "httpx":
        monkeypatch.setenv("DISABLE_AIOHTTP_TRANSPORT", "True")
    else:
        monkeypatch.delenv("DISABLE_AIOHTTP_TRANSPORT", raising=False)
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", False, raising=False)
    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", LLMClientCache())
    monkeypatch.setattr(litellm, "module_level_aclient", AsyncHTTPHandler(), raising=False)
    monkeypatch.setattr(litellm_answers, "MAX_ANSWER_BYTES", 1 << 20)
    monkeypatch.setattr(litellm_answers, "MAX_LINE_BYTES", 1 << 20)


async def _ask(tmp_path: Path, edge: EdgeUpstream, stream: bool = False) -> Any:
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"model": "claude-sonnet-4-5", "messages": ASK, "stream": stream}
    async with in_process(settings, str(tmp_path / "db")) as c:
        return await c.post("/v1/chat/completions", json=body, headers={"x-api-key": "sk-ant-t"})


async def test_an_answer_is_asked_for_uncompressed_and_read_when_compressed(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    answer = orjson.dumps(anthropic_message())
    edge.reply = Reply(200, [JSON, ("content-encoding", "gzip")], gzip.compress(answer))
    r = await _ask(tmp_path, edge)
    assert edge.last.header("accept-encoding") == "identity"
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]


async def test_a_compressed_answer_past_the_bound_is_a_502(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    bomb = orjson.dumps(anthropic_message("a" * (8 << 20)))  # 8 MiB inflated from some 8 KB
    edge.reply = Reply(200, [JSON, ("content-encoding", "gzip")], gzip.compress(bomb))
    r = await _ask(tmp_path, edge)
    assert r.status_code == 502, r.text


async def test_a_whole_answer_past_the_bound_is_a_502(tmp_path: Path, edge: EdgeUpstream) -> None:
    edge.reply = Reply(200, [JSON], orjson.dumps(anthropic_message("a" * (2 << 20))))
    r = await _ask(tmp_path, edge)
    assert r.status_code == 502, r.text


async def test_a_stream_line_past_the_bound_breaks_the_stream(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    endless = b"event: message_start\ndata: {" + b"x" * (2 << 20)
    edge.reply = Reply(200, [("content-type", "text/event-stream")], endless)
    r = await _ask(tmp_path, edge, stream=True)
    assert r.status_code >= 500 or b"error" in r.content, r.text[:200]
    assert len(r.content) < 1 << 20  # the line was not relayed


async def test_an_answer_in_an_encoding_not_read_is_a_502(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    edge.reply = Reply(200, [JSON, ("content-encoding", "br")], b"\x8b\x02\x80hello\x03")
    r = await _ask(tmp_path, edge)
    assert r.status_code == 502, r.text


async def test_a_whole_answer_to_a_stream_is_no_empty_success(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    # litellm read no event of it and made an empty, finished answer: the upstream's fault
    edge.reply = Reply.json(anthropic_message("the whole answer"))
    r = await _ask(tmp_path, edge, stream=True)
    assert r.status_code >= 500 or b"error" in r.content, r.text[:300]
    assert b'"finish_reason":"stop"' not in r.content.replace(b" ", b"")


async def test_a_stream_within_the_bounds_is_relayed(tmp_path: Path, edge: EdgeUpstream) -> None:
    from tests.support.anthropic_upstream import message_events, sse_reply

    edge.reply = sse_reply(message_events("Hello there friend"))
    r = await _ask(tmp_path, edge, stream=True)
    assert r.status_code == 200, r.text
    assert b"friend" in r.content and b"[DONE]" in r.content


def test_an_environment_proxys_transports_are_bounded_too(
    monkeypatch: pytest.MonkeyPatch, transport: None
) -> None:
    """Behind ``HTTPS_PROXY`` every request goes through the transports litellm mounts for the
    proxy, not its own: bounded alike."""
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("DISABLE_AIOHTTP_TRANSPORT", "True")
    client: Any = AsyncHTTPHandler().client
    mounted = [t for t in client._mounts.values() if t is not None]
    assert mounted and all(type(t).__name__.startswith("Bounded") for t in mounted)


async def test_a_whole_answer_to_a_body_naming_stream_inside_is_read(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """A tool's schema with a property ``"stream": true`` (a boolean schema) is no request for a
    stream: its whole answer was refused as one to a stream (a 502 on every retry)."""
    edge.reply = Reply.json(anthropic_message("the whole answer"))
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    schema = {"type": "object", "properties": {"stream": True, "path": {"type": "string"}}}
    tool = {"type": "function", "function": {"name": "tail", "parameters": schema}}
    body = {"model": "claude-sonnet-4-5", "messages": ASK, "tools": [tool], "stream": False}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=body, headers={"x-api-key": "sk-ant-t"})
    assert r.status_code == 200, r.text[:300]
    assert b"the whole answer" in r.content
    assert b'"stream": true' in edge.last.body.replace(b'"stream":true', b'"stream": true')
