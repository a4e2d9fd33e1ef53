"""No request field chooses a URL the proxy contacts: through the litellm bridge, an image or
file named by URL goes to the provider as the provider's own URL source (or as text naming it),
or the request is refused with a 400 of ours naming the URL. litellm itself fetched such a URL
from the proxy's host (an ``http://`` image for Anthropic, a ``file_id`` URL for OpenAI …),
within litellm's own policy only, whose refusal told the user to set ``user_url_allowed_hosts``.
Here that policy lets the loopback host through, so only the proxy's own refusal keeps it
unreached."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import in_process, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply

SERVER_KEY = "sk-ant-server-own-key-0123456789"
_ANTHROPIC_ANSWER = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
    "content": [{"type": "text", "text": "a cat"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 2},
}  # fmt: skip
_CHAT_ANSWER = {
    "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "a cat"}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}  # fmt: skip

_GEMINI_ANSWER = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "a cat"}]},
                    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
}  # fmt: skip


@pytest.fixture
def elsewhere() -> Iterator[EdgeUpstream]:
    """The host the client's URL names, serving a small PNG."""
    server = EdgeUpstream().start()
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")
    server.reply = Reply(200, [("content-type", "image/png")], png)
    yield server
    server.stop()


@pytest.fixture
def loose_policy(elsewhere: EdgeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's own URL policy lets the loopback host through (as it would a public one)."""
    from proxy.providers import load_litellm

    litellm = load_litellm()
    host = elsewhere.url.removeprefix("http://")
    monkeypatch.setattr(litellm, "user_url_allowed_hosts", [host, "127.0.0.1"], raising=False)
    from litellm.litellm_core_utils.prompt_templates.image_handling import in_memory_cache

    in_memory_cache.flush_cache()


def _cases(url: str) -> dict[str, tuple[str, str, dict[str, Any], str, Any]]:
    """(route, upstream kind, body, base_url suffix, upstream answer) per bridged direction."""
    image = {"type": "image_url", "image_url": {"url": url}}
    file = {"type": "file", "file": {"file_id": url, "format": "application/pdf"}}
    return {
        "chat image to anthropic": (
            "/v1/chat/completions", "anthropic",
            {"model": "claude-x",
             "messages": [{"role": "user", "content": [{"type": "text", "text": "what?"},
                                                       image]}]},
            "", _ANTHROPIC_ANSWER),
        "chat file to anthropic": (
            "/v1/chat/completions", "anthropic",
            {"model": "claude-x",
             "messages": [{"role": "user", "content": [{"type": "text", "text": "what?"},
                                                       file]}]},
            "", _ANTHROPIC_ANSWER),
        "responses image to anthropic": (
            "/v1/responses", "anthropic",
            {"model": "claude-x",
             "input": [{"role": "user", "content": [
                 {"type": "input_text", "text": "what?"},
                 {"type": "input_image", "image_url": url}]}]},
            "", _ANTHROPIC_ANSWER),
        "responses file to anthropic": (
            "/v1/responses", "anthropic",
            {"model": "claude-x",
             "input": [{"role": "user", "content": [
                 {"type": "input_text", "text": "what?"},
                 {"type": "input_file", "file_url": url}]}]},
            "", _ANTHROPIC_ANSWER),
        "messages image to openai": (
            "/v1/messages", "openai",
            {"model": "gpt-4o", "max_tokens": 9,
             "messages": [{"role": "user", "content": [
                 {"type": "text", "text": "what?"},
                 {"type": "image", "source": {"type": "url", "url": url}}]}]},
            "/v1", _CHAT_ANSWER),
        "chat https image to gemini": (
            "/v1/chat/completions", "gemini",
            {"model": "gemini-2.5-flash",
             "messages": [{"role": "user", "content": [
                 {"type": "text", "text": "what?"},
                 {"type": "image_url",
                  "image_url": {"url": url.replace("http://", "https://")}}]}]},
            "", _GEMINI_ANSWER),
        "gemini file to anthropic": (
            "/v1beta/models/claude-x:generateContent", "anthropic",
            {"contents": [{"role": "user", "parts": [
                {"text": "what?"}, {"fileData": {"mimeType": "image/png", "fileUri": url}}]}]},
            "", _ANTHROPIC_ANSWER),
    }  # fmt: skip


_NAMES = list(_cases("http://x"))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("case", _NAMES)
async def test_a_client_url_is_never_fetched_by_the_proxy(
    tmp_path: Path,
    edge: EdgeUpstream,
    elsewhere: EdgeUpstream,
    loose_policy: None,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    stream: bool,
) -> None:
    monkeypatch.setenv("SERVER_KEY_FOR_TEST", SERVER_KEY)
    url = elsewhere.url + "/cat.png"
    route, kind, body, suffix, answer = _cases(url)[case]
    if "https" in case:  # litellm would download it (Gemini takes no image by URL)
        url = url.replace("http://", "https://")
    if stream:  # refused before the call, or the call's answer is not read: no stream needed
        body = {**body, "stream": True}
        if route.startswith("/v1beta"):
            route = route.replace(":generateContent", ":streamGenerateContent")
    edge.reply = Reply.json(answer)
    upstream = {"name": "up", "kind": kind, "match": ["*"], "base_url": edge.url + suffix,
                "api_key_env": "SERVER_KEY_FOR_TEST"}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(route, json=body)
    assert elsewhere.connections == 0, f"the proxy fetched the client's URL ({r.status_code})"
    assert "user_url_allowed_hosts" not in r.text
    if r.status_code == 200 or edge.seen:  # the provider was given the URL (or a text naming it)
        assert url in edge.last.body.decode()
    else:  # refused before anything was sent: ours, naming the URL
        assert r.status_code == 400, r.text
        assert url in r.text
        assert not edge.seen


async def test_the_refusal_says_why(
    tmp_path: Path, edge: EdgeUpstream, elsewhere: EdgeUpstream, loose_policy: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SERVER_KEY_FOR_TEST", SERVER_KEY)
    url = elsewhere.url + "/cat.png"
    route, kind, body, suffix, _ = _cases(url)["chat image to anthropic"]
    upstream = {"name": "up", "kind": kind, "match": ["*"], "base_url": edge.url + suffix,
                "api_key_env": "SERVER_KEY_FOR_TEST"}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(route, json=body)
    assert r.status_code == 400, r.text
    assert "fetches no URL a request names" in r.json()["error"]["message"]
    assert elsewhere.connections == 0 and not edge.seen
