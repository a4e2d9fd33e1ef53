"""What a client learns when an upstream fails: the status, a stable code, the upstream's name
from config and, for a provider's own error, its message shortened; never a traceback, an install
path or the address the proxy calls. The whole detail goes to the server log (redacted).

Loopback servers only: a socket-level upstream (tests/support/edge_upstream.py) answering as
Anthropic's Messages API or OpenAI's, and ports nothing listens on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.upstream.litellm_errors import short_message as _short_message
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import request, user
from tests.support.live import free_port

MODEL = "anthropic/claude-3-5-sonnet-20241022"
KEY = "sk-ant-config-key-000000000000"
# Nothing a client may see of a failure: traceback text, install paths, internal addresses.
INTERNALS = ("Traceback", "site-packages", "/usr/", "10.0.0.5", 'File "', ".py")


def traceback_body(host: str) -> bytes:
    """A gateway in front of a provider that answers 500 with its Python traceback, naming our
    upstream's own address and a key it was given."""
    return (
        b"Traceback (most recent call last):\n"
        b'  File "/usr/lib/python3.11/site-packages/gateway/app.py", line 12, in handle\n'
        b"    raise ValueError(upstream)\n"
        b"ValueError: model overloaded behind http://10.0.0.5:8000/internal (via "
        + host.encode()
        + b", key sk-ant-api03-abcdefghijklmnopqrstuvwx)"
    )


def anthropic_events(*events: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-sonnet-20241022",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}
TEXT_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}
TEXT_DELTA = {
    "type": "content_block_delta",
    "index": 0,
    "delta": {"type": "text_delta", "text": "first words"},
}


@pytest.fixture
def real() -> Iterator[EdgeUpstream]:
    server = EdgeUpstream().start()
    yield server
    server.stop()


def litellm_settings(base_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ERR_TEST_KEY", KEY)
    spec = {
        "name": "claude",
        "match": ["anthropic/*"],
        "kind": "litellm",
        "base_url": base_url,
        "api_key_env": "ERR_TEST_KEY",
    }
    return proxy_settings(base_url, upstreams=[spec])


def openai_settings(base_url: str) -> Any:
    return proxy_settings(
        base_url, upstreams=[{"name": "gpt", "match": ["*"], "base_url": base_url}]
    )


def assert_no_internals(text: str, *addresses: str) -> None:
    for needle in (*INTERNALS, *addresses):
        assert needle not in text, f"{needle!r} reached the client: {text}"


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("ctxproxy"))


async def test_litellm_provider_traceback_is_shortened(
    tmp_path: Path, real: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    host = real.url.removeprefix("http://")
    real.reply = Reply(500, [("content-type", "text/plain")], traceback_body(host))
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    async with in_process(litellm_settings(real.url, monkeypatch), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi"), model=MODEL))
        (row,) = await log_rows(c)
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["code"] == "InternalServerError" and error["type"] == "upstream_error"
    # the upstream by its configured name, and the provider's own words (its last line)
    assert error["message"].startswith("Upstream claude: ValueError: model overloaded")
    assert len(error["message"]) <= 320
    assert_no_internals(r.text, host, "abcdefghijklmnop")
    assert row["status"] == 500 and "abcdefghijklmnop" not in (row["error"] or "")
    detail = logged(caplog)
    assert "Traceback" in detail and "site-packages" in detail and host in detail
    assert "abcdefghijklmnop" not in detail  # the log gets the detail, redacted


async def test_litellm_unreadable_answer_hides_litellm_traceback(
    tmp_path: Path, real: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """An answer litellm cannot parse: its exception message is a traceback through its own
    install path."""
    real.reply = Reply.json({"id": "x", "choices": []})
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    async with in_process(litellm_settings(real.url, monkeypatch), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi"), model=MODEL))
    assert r.status_code == 502
    assert r.json()["error"]["message"] == "Upstream claude sent an answer that could not be read."
    assert_no_internals(r.text, real.url.removeprefix("http://"))
    assert "site-packages/litellm" in logged(caplog)


@pytest.mark.parametrize("stream", [False, True])
async def test_litellm_unreachable_base_url_is_502_without_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog, stream: bool
) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    settings = litellm_settings(f"http://{address}", monkeypatch)
    async with in_process(settings, str(tmp_path / "db")) as c:
        body = request(user("hi"), model=MODEL, stream=stream)
        r = await c.post("/v1/chat/completions", json=body)
        (row,) = await log_rows(c)
    assert r.status_code == 502
    assert r.json()["error"] == {
        "message": "Upstream claude could not be reached.",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_connection_error",
    }
    assert_no_internals(r.text, address)
    assert row["error_type"] == "upstream_connection_error" and address not in row["error"]
    assert address in logged(caplog)


async def test_litellm_stream_breaking_off_is_an_error_event_without_detail(
    tmp_path: Path, real: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """Told in the stream as on the native path (no ``[DONE]`` after it: the answer did not
    end), and logged as the failure it is, not as a success."""
    first = anthropic_events(MESSAGE_START, TEXT_START, TEXT_DELTA)
    real.reply = Reply(
        headers=[("content-type", "text/event-stream")],
        chunks=[first, b"event: content_block_delta\ndata: {"],
        after_first_chunk="break",
    )
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    async with in_process(litellm_settings(real.url, monkeypatch), str(tmp_path / "db")) as c:
        body = request(user("hi"), model=MODEL, stream=True)
        r = await c.post("/v1/chat/completions", json=body)
        (row,) = await log_rows(c)
    assert r.status_code == 200
    events = [e.removeprefix(b"data: ") for e in r.content.split(b"\n\n") if e]
    assert b"first words" in b"".join(events) and b"[DONE]" not in r.content
    error = orjson.loads(events[-1])["error"]
    assert error["code"] in ("upstream_connection_error", "upstream_error")
    assert error["message"].startswith("Upstream claude")
    assert_no_internals(r.text, real.url.removeprefix("http://"))
    assert "Traceback" in logged(caplog)
    assert row["status"] == 200 and row["error_type"] == error["code"]


async def test_openai_unreachable_base_url_hides_the_address(tmp_path: Path, caplog) -> None:
    address = f"127.0.0.1:{free_port()}"
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    async with in_process(openai_settings(f"http://{address}/v1"), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi")))
        models = await c.get("/v1/models")
        (row,) = await log_rows(c)
    assert r.status_code == 502
    error = r.json()["error"]
    assert error["code"] == "upstream_connection_error"
    assert error["message"].startswith("Upstream gpt could not be reached (")
    assert_no_internals(r.text, address)
    assert address not in row["error"] and models.status_code == 200
    assert address in logged(caplog)


async def test_openai_stream_breaking_off_hides_the_address(
    tmp_path: Path, real: EdgeUpstream, caplog
) -> None:
    first = b'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n'
    real.reply = Reply(
        headers=[("content-type", "text/event-stream")],
        chunks=[first, b"data: {"],
        after_first_chunk="break",
    )
    caplog.set_level(logging.WARNING, logger="ctxproxy")
    async with in_process(openai_settings(real.base_url), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=request(user("hi"), stream=True))
    error = orjson.loads(r.content.split(b"\n\n")[-2].removeprefix(b"data: "))["error"]
    assert error["code"] == "upstream_connection_error"
    assert error["message"].startswith("Upstream gpt broke off mid-stream (")
    assert_no_internals(r.text, real.url.removeprefix("http://"))
    assert "broke off mid-stream" in logged(caplog)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'litellm.BadRequestError: AnthropicException - {"type":"error","error":'
            '{"type":"invalid_request_error","message":"max_tokens: too large\\nmore"}}',
            "max_tokens: too large",
        ),
        (
            "litellm.RateLimitError: VertexAIException - quota exceeded for "
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p. Handle with "
            "`litellm.RateLimitError`.",
            "quota exceeded for <url>",
        ),
        (  # a bridged stream's failure: litellm's chain of exceptions before the words
            "litellm.MidStreamFallbackError: litellm.APIConnectionError: APIConnectionError: "
            "OpenAIException - Stream ended before a finish_reason was received",
            "Stream ended before a finish_reason was received",
        ),
        ("error opening /srv/app/secrets/config.yaml", "error opening <path>"),
        ("gateway 192.168.1.20:8080 refused", "gateway <host> refused"),
        ("bad key sk-ant-api03-abcdefghijklmnopqrstuvwx", "bad key [REDACTED]"),
        ("anthropic/claude-3-5 is not a model", "anthropic/claude-3-5 is not a model"),
        ("x" * 1000, "x" * 299 + "…"),
    ],
)
def test_short_message(text: str, expected: str) -> None:
    upstream = UpstreamSettings(name="up", base_url="http://127.0.0.1:9/v1")
    assert _short_message(text, upstream) == expected


def test_short_message_names_our_upstream_not_its_host() -> None:
    upstream = UpstreamSettings(name="up", base_url="https://llm.internal.example:8443/v1")
    text = "upstream llm.internal.example:8443 overloaded"
    assert _short_message(text, upstream) == "upstream up overloaded"


def test_a_long_run_of_blanks_is_read_once() -> None:
    """litellm's closing advice was looked for at every blank of the error: a provider's 400
    holding 64 KiB of spaces held the event loop 6.8 s (quadratic), 1 MiB about half an hour."""
    import time

    upstream = UpstreamSettings(name="up", base_url="http://127.0.0.1:9/v1")
    text = "bad" + " " * 100_000 + "x. Handle with `litellm.BadRequestError`."
    started = time.perf_counter()
    assert _short_message(text, upstream).startswith("bad")
    assert time.perf_counter() - started < 0.5


async def test_a_bridged_messages_stream_breaking_off_says_so_in_the_proxys_words(
    tmp_path: Path, real: EdgeUpstream
) -> None:
    """A Messages stream bridged through litellm to an OpenAI upstream that breaks off after its
    first chunk: litellm's adapter writes its own ``error`` event ("litellm.MidStreamFallbackError:
    litellm.APIConnectionError: … OpenAIException - Connection error."), which reached the
    client as it was; it is the proxy's own now, as on every other path."""
    first = b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"first"}}]}\n\n'
    real.reply = Reply(
        headers=[("content-type", "text/event-stream")],
        chunks=[first, b"data: {"],
        after_first_chunk="break",
    )
    body = {"model": "gpt-4o", "max_tokens": 9, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    async with in_process(openai_settings(real.base_url), str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": "sk-test-key-01"})
    events = [e for e in r.content.split(b"\n\n") if e.startswith(b"event: error")]
    assert events, r.text
    error = orjson.loads(events[-1].partition(b"data:")[2])["error"]
    assert error["message"] == "Upstream gpt broke off mid-stream.", error
    assert_no_internals(r.text, real.url.removeprefix("http://"))
    assert "litellm" not in r.text and "OpenAIException" not in r.text
