"""A ``kind: litellm`` upstream (provider anthropic) on the locked litellm, end to end: a live
proxy in front of the scripted Anthropic upstream (tests/support/protocol_upstreams.py), every
inbound protocol streamed and not: Anthropic Messages (a tool round trip with a signed thinking
block, as Claude Code makes it), Chat Completions and the Responses API. Through litellm's own
aiohttp transport (its default) and through httpx.

litellm 1.110's streamed Messages path imports its proxy server (fastapi, soundfile …): every
streamed /v1/messages failed with 502 ``ModuleNotFoundError`` until
``proxy.upstream.litellm_messages``. The next litellm upgrade (bin/lock) that breaks any of
these fails here, not in front of a user."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import LiveProxy
from tests.support.agent_proxy import completed_rows
from tests.support.live import stop
from tests.support.protocol_upstreams import (
    AnthropicUpstream,
    Turn,
    text,
    thinking,
    tool,
    tool_then_text,
)

# litellm's stream handler reads a pydantic attribute deprecated in 2.11 (a warning, not an
# error, outside the tests), as in tests/proxy/upstream/test_bridge.py
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

KEY = "sk-ant-litellm-client-key-0001"
MODEL = "claude-sonnet-4-5"
SIGNATURE = "EqQBCkYIBxgCKkDsig-through-litellm=="
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request, monkeypatch) -> str:  # type: ignore[no-untyped-def]
    """litellm's HTTP transport, with a fresh client cache (its clients belong to an event loop,
    and each live proxy runs its own)."""
    from proxy.providers import load_litellm

    litellm = load_litellm()
    from litellm.caching.llm_caching_handler import LLMClientCache

    monkeypatch.setenv("DISABLE_AIOHTTP_TRANSPORT", "True" if request.param == "httpx" else "False")
    monkeypatch.setattr(litellm, "in_memory_llm_clients_cache", LLMClientCache())
    return str(request.param)


@pytest.fixture
def litellm_proxy(
    anthropic_upstream: AnthropicUpstream, transport: str, tmp_path: Path
) -> Iterator[LiveProxy]:
    """A live proxy (served as ``ctxproxy serve`` serves it) whose only upstream is a litellm
    one calling the scripted Anthropic upstream, with the client's own key."""
    from proxy.settings import settings_from_mapping
    from tests.support.served import serve_like_cli

    settings = settings_from_mapping(
        {
            "upstreams": [
                {
                    "name": "claude-litellm",
                    "kind": "litellm",
                    "provider": "anthropic",
                    "match": ["claude-*"],
                    "base_url": anthropic_upstream.url,
                }
            ],
            "pipeline": {"on_rule_error": "fail", "context_windows": {"claude-*": 200_000}},
        }
    )
    db = str(tmp_path / "litellm-proxy.db")
    server, url = serve_like_cli(settings, db)
    yield LiveProxy(url, db)
    stop(server)


def _events(raw: bytes) -> list[tuple[str, Any]]:
    """(event name, data) of each SSE event; data parsed as JSON unless it is ``[DONE]``."""
    out = []
    for block in raw.decode().split("\n\n"):
        name, data = "", ""
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        if data:
            out.append((name, data if data == "[DONE]" else orjson.loads(data)))
    return out


def _post(
    proxy: LiveProxy, path: str, body: dict[str, Any], headers: dict[str, str]
) -> httpx.Response:
    return httpx.post(proxy.url + path, json=body, headers=headers, timeout=30)


def _seen_key(upstream: AnthropicUpstream) -> str | None:
    (seen,) = upstream.messages[-1:]
    assert seen.path == "/v1/messages" and seen.json["model"] == MODEL, seen.raw[:300]
    return seen.header("x-api-key")


MESSAGES_HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
BEARER = {"authorization": f"Bearer {KEY}"}


# ---------------------------------------------------------------------------------------------
# Anthropic Messages


def _messages_body(messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "stream": stream,
        "system": [
            {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
        ],
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "tools": TOOLS,
        "messages": messages,
    }


def _content_of(events: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The content blocks an Anthropic SSE stream builds, deltas applied."""
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"], _json="")
        elif name == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            kind = delta["type"]
            if kind == "text_delta":
                block["text"] += delta["text"]
            elif kind == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif kind == "signature_delta":
                block["signature"] += delta["signature"]
            elif kind == "input_json_delta":
                block["_json"] += delta["partial_json"]
    out = []
    for _, block in sorted(blocks.items()):
        partial = block.pop("_json")
        if block["type"] == "tool_use":
            block["input"] = orjson.loads(partial or "{}")
        out.append(block)
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_messages_tool_round_trip_through_litellm(
    litellm_proxy: LiveProxy, anthropic_upstream: AnthropicUpstream, stream: bool
) -> None:
    anthropic_upstream.responder = tool_then_text(
        tool("Bash", command="mkdir -p build && echo made"),
        "Created the folder.",
        preface="I'll create it.",
        lead=[thinking("The user wants a folder.", SIGNATURE)],
    )
    ask = [{"role": "user", "content": "make a folder for the build output"}]
    r = _post(litellm_proxy, "/v1/messages", _messages_body(ask, stream), MESSAGES_HEADERS)
    assert r.status_code == 200, r.text
    if stream:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _events(r.content)
        names = [name for name, _ in events]
        assert names[0] == "message_start" and names[-1] == "message_stop", names
        (stop_reason,) = [d["delta"]["stop_reason"] for n, d in events if n == "message_delta"]
        content = _content_of(events)
    else:
        answer = r.json()
        stop_reason, content = answer["stop_reason"], answer["content"]
    assert stop_reason == "tool_use"
    think, said, call = content
    assert think == {
        "type": "thinking",
        "thinking": "The user wants a folder.",
        "signature": SIGNATURE,
    }
    assert said == {"type": "text", "text": "I'll create it."}
    assert call["type"] == "tool_use" and call["name"] == "Bash"
    assert call["input"] == {"command": "mkdir -p build && echo made"}
    assert _seen_key(anthropic_upstream) == KEY  # the client's own key

    # The tool's result goes back with the signed thinking block, as Claude Code sends it.
    turn = [
        *ask,
        {"role": "assistant", "content": content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "made"}],
        },
    ]
    r = _post(litellm_proxy, "/v1/messages", _messages_body(turn, stream), MESSAGES_HEADERS)
    assert r.status_code == 200, r.text
    final = _content_of(_events(r.content)) if stream else r.json()["content"]
    assert [b.get("text") for b in final if b["type"] == "text"] == ["Created the folder."]
    sent = anthropic_upstream.messages[-1].json["messages"]
    assert sent[1]["content"][0] == think  # the signature reached the provider unaltered
    assert sent[2]["content"][0]["tool_use_id"] == call["id"]

    rows = completed_rows(litellm_proxy, 2)
    assert [(r["protocol"], r["status"], r["upstream"]) for r in rows] == [
        ("anthropic", 200, "claude-litellm")
    ] * 2
    assert rows[1]["completion_tokens"] == 9  # the fake's usage, read from the answer


def test_a_streamed_messages_error_keeps_its_status(
    litellm_proxy: LiveProxy, anthropic_upstream: AnthropicUpstream
) -> None:
    anthropic_upstream.queue(Turn(status=429))
    ask = [{"role": "user", "content": "hi"}]
    r = _post(litellm_proxy, "/v1/messages", _messages_body(ask, True), MESSAGES_HEADERS)
    assert r.status_code == 429, r.text
    assert r.json()["type"] == "error"


# ---------------------------------------------------------------------------------------------
# Chat Completions and the Responses API


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_completions_through_litellm(
    litellm_proxy: LiveProxy, anthropic_upstream: AnthropicUpstream, stream: bool
) -> None:
    anthropic_upstream.queue(Turn([text("Bonjour from Claude")]))
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": stream,
        "messages": [
            {"role": "system", "content": "Be French."},
            {"role": "user", "content": "hi"},
        ],
    }
    r = _post(litellm_proxy, "/v1/chat/completions", body, BEARER)
    assert r.status_code == 200, r.text
    if stream:
        events = _events(r.content)
        assert events[-1] == ("", "[DONE]")
        said = "".join(
            d["choices"][0]["delta"].get("content") or ""
            for _, d in events[:-1]
            if d.get("choices")
        )
    else:
        said = r.json()["choices"][0]["message"]["content"]
    assert said == "Bonjour from Claude"
    assert _seen_key(anthropic_upstream) == KEY
    seen = anthropic_upstream.messages[-1].json
    assert "Be French." in orjson.dumps(seen["system"]).decode()
    (row,) = completed_rows(litellm_proxy, 1)
    assert (row["protocol"], row["status"]) == ("chat", 200)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_through_litellm(
    litellm_proxy: LiveProxy, anthropic_upstream: AnthropicUpstream, stream: bool
) -> None:
    anthropic_upstream.queue(Turn([text("Hello from Claude")]))
    body = {
        "model": MODEL,
        "max_output_tokens": 64,
        "stream": stream,
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    }
    r = _post(litellm_proxy, "/v1/responses", body, BEARER)
    assert r.status_code == 200, r.text
    if stream:
        events = _events(r.content)
        names = [name for name, _ in events]
        assert names[0] == "response.created" and "response.completed" in names, names
        response = next(d["response"] for n, d in events if n == "response.completed")
    else:
        response = r.json()
    texts = [
        part["text"]
        for item in response["output"]
        if item.get("type") == "message"
        for part in item["content"]
        if part.get("type") == "output_text"
    ]
    assert texts == ["Hello from Claude"]
    assert _seen_key(anthropic_upstream) == KEY
    assert "Be brief." in orjson.dumps(anthropic_upstream.messages[-1].json["system"]).decode()
    (row,) = completed_rows(litellm_proxy, 1)
    assert (row["protocol"], row["status"]) == ("responses", 200)


def test_no_litellm_proxy_server_package_is_installed() -> None:
    """The stream path above must not need litellm's proxy server; the lock keeps it out, so a
    path that starts needing it fails the tests above instead of passing here by accident."""
    import importlib.util

    find: Callable[[str], object] = importlib.util.find_spec
    assert find("fastapi") is None and find("soundfile") is None


def test_litellm_fetches_nothing_on_its_own(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """litellm 1.110 fetches its Anthropic beta-header table from GitHub on the first streamed
    Messages request, synchronously; the proxy runs it offline (``proxy.providers``)."""
    from proxy.providers import load_litellm

    load_litellm()
    from litellm import anthropic_beta_headers_manager as beta

    fetched: list[str] = []

    def fetch(url: str) -> dict:  # type: ignore[type-arg]
        fetched.append(url)
        raise OSError("no network in this test")

    monkeypatch.setattr(
        beta.GetAnthropicBetaHeadersConfig, "fetch_remote_beta_headers_config", fetch
    )
    assert beta.get_beta_headers_config("https://raw.githubusercontent.com/x.json")  # bundled
    assert fetched == []
