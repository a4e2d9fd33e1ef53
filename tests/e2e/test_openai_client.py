"""Tier 3: the real openai SDK → a live uvicorn proxy → a fake upstream on 127.0.0.1."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest

from tests.support.factories import call


def client_for(proxy, **kw) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    return openai.OpenAI(base_url=proxy.base_url, api_key="sk-test-secret-key-123456", **kw)


def test_non_streaming_round_trip_and_log_row(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    client = client_for(proxy)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from the fake upstream."
    request_id = raw.headers["x-ctxproxy-request-id"]
    assert float(raw.headers["x-ctxproxy-overhead-ms"]) >= 0
    # The client's key reaches the upstream (passthrough), and the body is what was sent.
    assert fake_upstream.headers[-1]["authorization"] == "Bearer sk-test-secret-key-123456"
    assert fake_upstream.last["messages"][-1] == {"role": "user", "content": "Hi"}
    row = proxy.row(request_id)
    assert row["status"] == 200
    assert row["model"] == "gpt-4o"
    assert row["sections"]["system"]["before"] > 0
    assert row["sections"]["user"]["after"] > 0
    assert row["prompt_tokens"] == 11 and row["cached_tokens"] == 5
    assert row["latency_ms"] >= row["overhead_ms"]
    # Keys never reach the log, even the parts of it that are JSON.
    assert "sk-test-secret" not in str(proxy.rows())


def test_streaming_first_chunk_arrives_while_upstream_holds_back(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.content = "one two three four"
    fake_upstream.script.hold_after_first_chunk = True
    client = client_for(proxy)
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "count"}], stream=True
    )
    got_first = threading.Event()
    pieces: list[str] = []

    def consume() -> None:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
                got_first.set()

    t = threading.Thread(target=consume)
    t.start()
    assert got_first.wait(10), "first chunk did not reach the client while upstream held back"
    assert pieces == ["one"]  # the rest is still held back upstream
    fake_upstream.release.set()
    t.join(10)
    assert "".join(pieces) == "one two three four"
    rows = proxy.rows()
    deadline = time.time() + 5
    while (not rows or rows[-1]["status"] is None) and time.time() < deadline:
        time.sleep(0.02)
        rows = proxy.rows()
    assert rows[-1]["stream"] == 1
    assert rows[-1]["status"] == 200
    assert rows[-1]["ttfb_ms"] is not None
    assert rows[-1]["completion_tokens"] == 7  # usage read out of the relayed SSE


def test_tool_call_round_trip(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.tool_calls = [call("call_1", "bash", command="ls")]
    client = client_for(proxy)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    first = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "list files"}], tools=tools
    )
    tc = first.choices[0].message.tool_calls[0]
    assert tc.function.name == "bash"
    fake_upstream.script.tool_calls = None
    second = client.chat.completions.create(
        model="gpt-4o",
        tools=tools,
        messages=[
            {"role": "user", "content": "list files"},
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tc.id, "content": "a.py\nb.py"},
        ],
    )
    assert second.choices[0].message.content
    sent = fake_upstream.last
    assert sent["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "a.py\nb.py",
    }
    assert sent["tools"] == tools


def test_upstream_500_raises_internal_server_error(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.status = 500
    client = client_for(proxy, max_retries=0)
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    request_id = info.value.response.headers["x-ctxproxy-request-id"]
    row = proxy.row(request_id)
    assert row["status"] == 500
    assert row["error_type"] == "upstream_status"


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b"{not json", 400, None),
        (b'{"model": "gpt-4o"}', 400, "messages"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "model"),
        (
            b'{"model": "gpt-4o", "messages": [{"role": "wizard", "content": "x"}]}',
            400,
            "messages[0].role",
        ),
    ],
)
def test_bad_input_gets_openai_error_and_a_log_row(live_proxy, body, status, param) -> None:
    proxy = live_proxy()
    r = httpx.post(
        proxy.base_url + "/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == status
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    row = proxy.row(r.headers["x-ctxproxy-request-id"])
    assert row["status"] == status and row["error"]


def test_bad_input_through_the_sdk(live_proxy) -> None:
    proxy = live_proxy()
    client = client_for(proxy, max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "wizard", "content": "x"}]
        )


def test_upstream_unreachable_is_502(live_proxy) -> None:
    from tests.conftest import proxy_settings
    from tests.support.live import free_port

    proxy = live_proxy(proxy_settings(f"http://127.0.0.1:{free_port()}/v1"))
    client = client_for(proxy, max_retries=0)
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 502
    row = proxy.row(info.value.response.headers["x-ctxproxy-request-id"])
    assert row["error_type"] == "upstream_connection_error"
