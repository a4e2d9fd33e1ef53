"""Tier 3: the real ``anthropic`` SDK → a live proxy (``POST /v1/messages``) → a scripted
Anthropic upstream (``kind: anthropic``). Answers arrive intact, streamed event by event, the
upstream gets the request with the client's headers, and the log row says the protocol, the
sections and the usage."""

from __future__ import annotations

import threading
import time

import anthropic
import httpx
import orjson
import pytest

from tests.support.agent_proxy import completed_rows, row_of, section
from tests.support.protocol_upstreams import Turn, text, thinking, tool

KEY = "sk-ant-test-secret-key-123456"
MODEL = "claude-opus-5-5"  # what Claude Code 2.1.330 asks for
BASH = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def client_for(proxy, sent: list | None = None, **kw):  # type: ignore[no-untyped-def]
    """An SDK client on the proxy; ``sent`` collects the requests it makes (its own httpx)."""
    hooks = {"request": [sent.append]} if sent is not None else {}
    http = anthropic.DefaultHttpxClient(event_hooks=hooks)
    return anthropic.Anthropic(
        base_url=proxy.url, api_key=KEY, max_retries=0, http_client=http, **kw
    )


def assert_headers_passed(seen, request, *names: str) -> None:  # type: ignore[no-untyped-def]
    for name in names:
        assert seen.header(name) == request.headers.get(name), name


def test_non_streaming_round_trip_and_log_row(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    anthropic_upstream.queue(Turn([text("Hello from the Anthropic fake.")]))
    sent: list = []
    raw = client_for(proxy, sent).messages.with_raw_response.create(
        model=MODEL,
        max_tokens=256,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "Hi"}],
    )
    message = raw.parse()
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Hello from the Anthropic fake."
    assert message.stop_reason == "end_turn"
    assert message.usage.cache_read_input_tokens == 13

    (seen,) = anthropic_upstream.messages
    assert seen.path == "/v1/messages"
    assert seen.header("authorization") == f"Bearer {KEY}" or seen.header("x-api-key") == KEY
    assert_headers_passed(seen, sent[-1], "authorization", "x-api-key", "anthropic-version")
    assert seen.json["messages"] == [{"role": "user", "content": "Hi"}]
    assert seen.json["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "stream" not in seen.json or seen.json["stream"] is False

    row = row_of(proxy, raw.headers)
    assert row["protocol"] == "anthropic"
    assert row["status"] == 200 and row["stream"] == 0
    assert row["model"] == MODEL
    assert section(row, "system") > 0 and section(row, "user") > 0
    assert row["completion_tokens"] == 9
    assert row["cached_tokens"] == 13
    assert row["prompt_tokens"] in (21, 21 + 13 + 4)  # with or without the cache's share
    assert KEY not in str(proxy.rows())


def test_streaming_relays_each_event_as_it_arrives(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    anthropic_upstream.queue(Turn([text("one two three four")], hold=True))
    client = client_for(proxy)
    pieces: list[str] = []
    got_first = threading.Event()
    final: list = []

    def consume() -> None:
        with client.messages.stream(
            model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "count"}]
        ) as stream:
            for piece in stream.text_stream:
                pieces.append(piece)
                got_first.set()
            final.append(stream.get_final_message())

    t = threading.Thread(target=consume)
    t.start()
    assert got_first.wait(10), "the first delta did not reach the client while upstream held back"
    assert len(pieces) == 1 and "one two three four".startswith(pieces[0])  # the rest is held
    assert pieces[0] != "one two three four"
    anthropic_upstream.release.set()
    t.join(10)
    assert "".join(pieces) == "one two three four"
    (message,) = final
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 9
    assert message.usage.cache_creation_input_tokens == 4

    (seen,) = anthropic_upstream.messages
    assert seen.json["stream"] is True
    (row,) = completed_rows(proxy, 1)
    assert row["protocol"] == "anthropic" and row["stream"] == 1
    assert row["status"] == 200 and row["ttfb_ms"] is not None
    assert row["completion_tokens"] == 9 and row["cached_tokens"] == 13  # read from the SSE


def test_stream_bytes_are_relayed_unchanged(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    """Thinking with its signature, text and a tool_use with input_json_delta: the client gets
    exactly the bytes the upstream sent."""
    proxy = agent_proxy()
    anthropic_upstream.queue(
        Turn([thinking("Plan: use Bash.", "sig-abc"), text("On it."), tool("Bash", command="ls")])
    )
    body = {
        "model": MODEL,
        "max_tokens": 256,
        "stream": True,
        "tools": [BASH],
        "messages": [{"role": "user", "content": "list files"}],
    }
    with httpx.stream(
        "POST",
        proxy.url + "/v1/messages",
        content=orjson.dumps(body),
        headers={
            "x-api-key": KEY,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
        timeout=10,
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        received = b"".join(r.iter_raw())
    assert received == bytes(anthropic_upstream.streamed[-1])
    assert b'"signature_delta"' in received and b'"input_json_delta"' in received
    (seen,) = anthropic_upstream.messages
    assert seen.header("x-api-key") == KEY and seen.header("anthropic-version") == "2023-06-01"
    assert seen.raw == orjson.dumps(body)  # nothing to change: forwarded byte for byte


def test_tool_round_trip_keeps_thinking_and_ids(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    client = client_for(proxy)
    anthropic_upstream.queue(
        Turn([thinking("Plan: use Bash.", "sig-keep-me"), tool("Bash", command="ls")]),
        Turn([text("Two files.")]),
    )
    history: list[dict] = [{"role": "user", "content": "list files"}]
    first = client.messages.create(model=MODEL, max_tokens=256, tools=[BASH], messages=history)
    assert first.stop_reason == "tool_use"
    use = first.content[-1]
    history.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    history.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "a.py\nb.py"}],
        }
    )
    second = client.messages.create(model=MODEL, max_tokens=256, tools=[BASH], messages=history)
    assert second.content[0].text == "Two files."
    sent = anthropic_upstream.messages[-1].json
    assert sent["tools"] == [BASH]
    think, call = sent["messages"][1]["content"]
    assert think["type"] == "thinking" and think["signature"] == "sig-keep-me"
    assert think["thinking"] == "Plan: use Bash."
    assert call["id"] == use.id and call["input"] == {"command": "ls"}
    assert sent["messages"][2]["content"][0]["tool_use_id"] == use.id
    rows = completed_rows(proxy, 2)
    assert section(rows[1], "tool_calls") > 0 and section(rows[1], "tool_results") > 0


def test_beta_query_and_headers_pass_through(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    """Claude Code's request line and headers (``samples/claude-code.jsonl``) reach the
    upstream as sent: ``?beta=true``, the whole ``anthropic-beta`` list, ``x-api-key``."""
    proxy = agent_proxy()
    headers = {
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
        "context-management-2025-06-27,advanced-tool-use-2025-11-20,effort-2025-11-24",
        "anthropic-dangerous-direct-browser-access": "true",
        "user-agent": "claude-cli/2.1.330 (external, sdk-cli)",
        "x-app": "cli",
        "x-claude-code-session-id": "8d0b5e51-c917-4d89-b1e6-430e557329e6",
        "x-stainless-retry-count": "0",
        "content-type": "application/json",
    }
    user_id = (
        '{"device_id":"d1","account_uuid":"","session_id":"8d0b5e51-c917-4d89-b1e6-430e557329e6"}'
    )
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "metadata": {"user_id": user_id},
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
    }
    r = httpx.post(
        proxy.url + "/v1/messages?beta=true", content=orjson.dumps(body), headers=headers
    )
    assert r.status_code == 200, r.text
    (seen,) = anthropic_upstream.messages
    assert seen.query == "beta=true"
    for name, value in headers.items():
        assert seen.header(name) == value, name
    assert seen.json == body
    row = row_of(proxy, r.headers)
    assert row["protocol"] == "anthropic"
    assert row["session_id"]


def test_bearer_auth_passes_through(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    client = anthropic.Anthropic(base_url=proxy.url, auth_token="tok-bearer-123", max_retries=0)
    client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "x"}])
    (seen,) = anthropic_upstream.messages
    assert seen.header("authorization") == "Bearer tok-bearer-123"
    assert seen.header("x-api-key") is None


def test_count_tokens_is_passed_through(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    sent: list = []
    counted = client_for(proxy, sent).messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "how many tokens is this"}]
    )
    (seen,) = anthropic_upstream.posts("/v1/messages/count_tokens")
    assert counted.input_tokens == max(1, len(seen.raw) // 4)  # the upstream's count
    assert_headers_passed(seen, sent[-1], "authorization", "x-api-key", "anthropic-version")


def test_hello_probe_answers_at_once(agent_proxy) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    start = time.monotonic()
    r = httpx.head(proxy.url + "/api/hello", timeout=5)
    assert r.status_code < 500
    assert time.monotonic() - start < 1.0


def test_upstream_error_keeps_anthropic_shape(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    anthropic_upstream.queue(Turn(status=529))
    with pytest.raises(anthropic.APIStatusError) as info:
        client_for(proxy).messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.status_code == 529
    body = info.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"


def test_bad_request_gets_anthropic_error(agent_proxy, anthropic_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    r = httpx.post(
        proxy.url + "/v1/messages",
        content=b"{not json",
        headers={"x-api-key": KEY, "content-type": "application/json"},
    )
    assert r.status_code == 400
    body = r.json()
    assert body["type"] == "error"
    assert set(body["error"]) >= {"type", "message"}
    assert body["error"]["type"] == "invalid_request_error"
    assert anthropic_upstream.messages == []
    row = row_of(proxy, r.headers)
    assert row["status"] == 400 and row["protocol"] == "anthropic"
