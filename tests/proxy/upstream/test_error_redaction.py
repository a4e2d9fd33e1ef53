"""An upstream's error may quote the key it was sent, and with ``api_key_env`` (always in
``auth.mode: keys``) that is the server's own key: what the client receives of an upstream error
is redacted as the log row is, the configured keys' exact values included (and a quote of part of
one, or one masked), on the native chat, Messages and Responses relays, the litellm paths and
``/v1/models``: error statuses, error events inside a stream, and a stream's break-off. Answers
(2xx) pass byte for byte, key-like text and all, but for the server's own keys' exact values
(``tests/proxy/upstream/test_server_key_in_answers.py``).

Against a socket-level loopback upstream (``tests/support/edge_upstream.py``) that answers with
the key it received."""

from __future__ import annotations

import gc
import gzip
import os
import random
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.errors import UpstreamFailed
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.error_redaction import ErrorRedactor
from proxy.upstream.error_scan import EventScanner
from rules.redact import REDACTED
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.anthropic_upstream import event, message_events, response_events, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import request, user

# litellm must use httpx (as the other litellm tests have it); set before it is imported.
os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)

# The server-side keys: one in OpenAI's shape, one the key patterns do not know.
OPENAI_KEY = "sk-proj-Zq7XbN4pR2tLm9Vc8Hs3Kd6Wf1Jy5Ga0Ue-wxyz"
CUSTOM_KEY = "corpgw7Hx2Qm9Rt4"
PROXY_KEY = "proxy-key-1"
CLIENT = {"authorization": f"Bearer {PROXY_KEY}"}
CHAT = request(user("hi"))
MESSAGES = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt-5", "input": "hi"}


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_SERVER_KEY", OPENAI_KEY)
    monkeypatch.setenv("CLAUDE_SERVER_KEY", CUSTOM_KEY)
    monkeypatch.setenv("CTXPROXY_KEYS", PROXY_KEY)


def keys_settings(edge: EdgeUpstream, openai_key: str = "OPENAI_SERVER_KEY") -> Any:
    """``auth.mode: keys``: Claude models natively to ``edge`` as Anthropic, the rest as OpenAI,
    each with the server's own key."""
    claude = {
        "name": "claude",
        "kind": "anthropic",
        "match": ["claude-*"],
        "base_url": edge.url,
        "api_key_env": "CLAUDE_SERVER_KEY",
    }
    openai = {
        "name": "openai",
        "match": ["*"],
        "base_url": edge.base_url,
        "api_key_env": openai_key,
    }
    return proxy_settings(edge.base_url, auth={"mode": "keys"}, upstreams=[claude, openai])


def sent_key(edge: EdgeUpstream) -> str:
    """The key the upstream received."""
    seen = edge.last
    return seen.header("x-api-key") or (seen.header("authorization") or "")[7:]


def assert_no_key(text: str, key: str) -> None:
    """Neither ``key`` nor 8 characters of it in a row, nor its last 4 after a mask."""
    for i in range(len(key) - 7):
        assert key[i : i + 8] not in text, f"{key[i : i + 8]!r} of the key reached the client"
    assert f"*{key[-4:]}" not in text and f".{key[-4:]}" not in text


def openai_401(key: str) -> dict[str, Any]:
    return {
        "error": {
            "message": f"Incorrect API key provided: {key}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }


def anthropic_401(key: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid key {key} for this org"},
    }


# (path, body, the upstream's 401 for a key, its server key)
ENDPOINTS = {
    "chat": ("/v1/chat/completions", CHAT, openai_401, OPENAI_KEY),
    "messages": ("/v1/messages", MESSAGES, anthropic_401, CUSTOM_KEY),
    "responses": ("/v1/responses", RESPONSES, openai_401, OPENAI_KEY),
}


def masked(key: str) -> str:
    """How OpenAI quotes a wrong key: its start and its last 4 characters."""
    return key[:11] + "*" * 20 + key[-4:]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("quote", ["whole", "masked"])
async def test_an_error_status_quoting_the_server_key_is_redacted(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str, stream: bool, quote: str
) -> None:
    path, body, error, key = ENDPOINTS[endpoint]
    # a model's answer may hold any text, the server's key and key shapes included
    answer = b'{"id":  "x", "text": "' + key.encode() + b' sk-ant-api03-abcdefghijklmnop"}'
    edge.replies = [
        Reply(200, [("content-type", "application/json")], answer),
        Reply.json(error(key if quote == "whole" else masked(key)), status=401),
    ]
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        ok = await c.post(path, json=body, headers=CLIENT)
        r = await c.post(path, json={**body, "stream": stream}, headers=CLIENT)
        rows = await log_rows(c)
    # an answer is never edited but for the server's own key: key shapes pass
    assert ok.status_code == 200 and ok.content == answer.replace(key.encode(), REDACTED.encode())
    assert sent_key(edge) == key  # the upstream was sent the server's key, and quoted it
    assert r.status_code == 401
    assert_no_key(r.text, key)
    assert int(r.headers["content-length"]) == len(r.content)
    got = r.json()
    if endpoint == "messages":  # Anthropic's shape, as the upstream sent it
        assert got["type"] == "error" and got["error"]["type"] == "authentication_error"
        assert got["error"]["message"] == f"invalid key {REDACTED} for this org"
    else:  # OpenAI's
        assert set(got["error"]) == {"message", "type", "param", "code"}
        assert got["error"]["code"] == "invalid_api_key"
        assert got["error"]["message"].startswith(f"Incorrect API key provided: {REDACTED}.")
    assert all(key not in (row["error"] or "") for row in rows)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("status", [200, 429])
async def test_a_relayed_header_quoting_the_server_key_is_redacted(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str, status: int
) -> None:
    """A gateway echoing the credential it was sent in a header the proxy relays (``openai-*``,
    ``anthropic-*``, ``x-request-id``) had the server's key reach the client."""
    path, body, _, key = ENDPOINTS[endpoint]
    prefix = "anthropic" if endpoint == "messages" else "openai"
    echoed = [
        (f"{prefix}-debug-authorization", f"Bearer {key}"),
        ("x-request-id", f"req-{key}"),
        (f"{prefix}-processing-ms", "1234"),
        ("x-ratelimit-remaining-requests", "4999"),
    ]
    shape = "sk-proj-" + "Ab3" * 12
    answer = b'{"id": "x"}' if status == 200 else b'{"error": {"message": "slow down"}}'
    edge.reply = Reply(status, [("content-type", "application/json"), *echoed,
                                (f"{prefix}-x", shape)], answer)  # fmt: skip
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=CLIENT)
    assert r.status_code == status and sent_key(edge) == key
    relayed = "\n".join(f"{k}: {v}" for k, v in r.headers.items())
    assert_no_key(relayed, key)
    assert shape not in relayed
    assert "x-ratelimit-remaining-requests" not in r.headers  # the shared account's counter
    assert r.headers[f"{prefix}-processing-ms"] == "1234"  # the rest as it came


@pytest.mark.parametrize("endpoint", ["chat", "messages", "responses"])
async def test_the_gateways_account_is_not_told_to_its_tenants(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str
) -> None:
    """With the server's key the answer's account headers are the gateway's (its organization's
    id, its project): not relayed to a tenant; the rest is."""
    path, body, _, _ = ENDPOINTS[endpoint]
    account = [("openai-organization", "org-gateway-123"), ("openai-project", "proj_gw"),
               ("anthropic-organization-id", "0f1e2d3c-gateway")]  # fmt: skip
    edge.reply = Reply(200, [("content-type", "application/json"), *account,
                             ("x-request-id", "req_1")], b'{"id": "x"}')  # fmt: skip
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=CLIENT)
    assert r.status_code == 200
    assert all(name not in r.headers for name, _ in account)
    assert r.headers["x-request-id"] == "req_1"


@pytest.mark.parametrize("endpoint", ["chat", "messages", "responses"])
async def test_the_shared_accounts_rate_limit_counters_are_not_told_to_its_tenants(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str
) -> None:
    """With the server's key the rate-limit counters count every tenant's requests and tokens:
    one tenant read another's activity off them (a one-token probe before and after). Not
    relayed then; ``retry-after`` is. With the client's own key they are its own, relayed."""
    path, body, _, _ = ENDPOINTS[endpoint]
    counters = [("x-ratelimit-remaining-tokens", "1999984"), ("x-ratelimit-limit-requests", "1e4"),
                ("anthropic-ratelimit-input-tokens-remaining", "1999984"),
                ("anthropic-ratelimit-requests-reset", "2026-12-05T10:00:00Z"),
                # Anthropic's Priority Tier: the account's committed tokens left
                ("anthropic-priority-input-tokens-remaining", "1550000"),
                ("anthropic-priority-output-tokens-reset", "2026-12-05T10:00:00Z"),
                ("x-custom-usage-remaining", "12")]  # fmt: skip
    edge.reply = Reply(429, [("content-type", "application/json"), *counters,
                             ("retry-after", "3")], b'{"error": {"message": "slow"}}')  # fmt: skip
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=CLIENT)
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    assert all(name not in r.headers for name, _ in counters)
    async with in_process(passthrough_settings(edge), str(tmp_path / "db2")) as c:
        r = await c.post(path, json=body, headers={"authorization": f"Bearer {CLIENT_KEY}",
                                                   "x-api-key": CLIENT_KEY})  # fmt: skip
    assert r.status_code == 429
    assert r.headers["x-ratelimit-remaining-tokens"] == "1999984"


@pytest.mark.parametrize("endpoint", ["chat", "messages"])
async def test_an_upstreams_flood_of_long_headers_is_not_relayed(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str
) -> None:
    """100 headers of 60 KB of text dense in secrets' names: each was redacted on the loop (20 s
    in all, every tenant waiting) and relayed. A value past 1 KiB, and what passes 8 KiB in
    all, is not relayed; the short ones are, and the body's own headers."""
    path, body, _, _ = ENDPOINTS[endpoint]
    prefix = "anthropic" if endpoint == "messages" else "openai"
    flood = [(f"{prefix}-h{i}", "&pwd=" * 12_000) for i in range(100)]
    small = [(f"{prefix}-processing-ms", "87"), ("x-request-id", "req-49")]
    edge.reply = Reply(200, [("content-type", "application/json"), *small, *flood], b'{"id": "x"}')
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        began = time.perf_counter()
        r = await c.post(path, json=body, headers=CLIENT)
        took = time.perf_counter() - began
    assert r.status_code == 200
    assert took < 2.0, took
    assert r.headers["x-request-id"] == "req-49"
    assert r.headers[f"{prefix}-processing-ms"] == "87"
    assert r.headers["content-type"].startswith("application/json")
    assert sum(len(v) for k, v in r.headers.items() if k.startswith(f"{prefix}-h")) <= 8 * 1024


@pytest.mark.parametrize(
    "members", [["ab"] * 250_000, [{}] * 300_000, [{"password": "x"}] * 60_000]
)
def test_an_error_event_of_many_members_is_read_for_its_error_only(members: list[Any]) -> None:
    """A MiB of tiny strings or objects in one error event: each was visited, cut and redacted
    (half a second an event); the error's type and message are what a client is shown."""
    data = orjson.dumps({"type": "error", "error": {"type": "api_error", "message": "m",
                                                    "detail": members}})  # fmt: skip
    gc.disable()  # the collector's full pass over the test process's heap is not the event's
    try:
        began = time.process_time()
        out = REDACTOR.event(b"event: error\ndata: " + data, whole=True)
        spent = time.process_time() - began
    finally:
        gc.enable()
    assert spent < 0.1
    shown = orjson.loads(out.split(b"data: ", 1)[1])
    assert shown == {"type": "error", "error": {"type": "api_error", "message": "m"}}


def test_an_error_event_of_a_stream_is_cut_before_it_is_redacted() -> None:
    """A stream of error events each of 60 KB dense in secrets' names held the loop 0.5 s an
    event: each is cut to a few KiB first (its start redacted as before)."""
    message = "&pwd=" * 12_000
    data = orjson.dumps({"error": {"type": "server_error", "message": message}})
    REDACTOR.event(b'event: error\ndata: {"error": {"message": "&pwd=x"}}', whole=True)  # warm
    began = time.process_time()  # an event's cost, not the patterns' first compilation
    out = REDACTOR.event(b"event: error\ndata: " + data, whole=True)
    tail = REDACTOR.event(b"&pwd=" * 12_000, whole=False)
    assert time.process_time() - began < 0.1
    assert len(out) < 6 * 1024 and len(tail) < 6 * 1024
    assert orjson.loads(out.split(b"data: ", 1)[1])["error"]["type"] == "server_error"


async def test_a_key_of_no_known_shape_is_redacted_by_its_value(
    tmp_path: Path, edge: EdgeUpstream, keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A custom key ("mysecretkey123"-like) is no key shape: only its configured value tells."""
    monkeypatch.setenv("OPENAI_CUSTOM_KEY", "mysecretkey123")
    edge.reply = Reply(
        401, [("content-type", "text/plain")], b"bad key mysecretkey123 (or mysec...y123)"
    )
    async with in_process(keys_settings(edge, "OPENAI_CUSTOM_KEY"), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=CHAT, headers=CLIENT)
        models = await c.get("/v1/models", headers=CLIENT)
    assert sent_key(edge) == "mysecretkey123"
    said = r.json()["error"]["message"]  # in OpenAI's shape, the text inside
    assert r.status_code == 401 and said == f"bad key {REDACTED} (or {REDACTED})"
    assert models.status_code == 401 and "mysec" not in models.text


# a gateway's or a virtual key: no shape the redactor knows
CLIENT_KEY = "team-7f3a9c2e41d84b6f9a0c5e7d3b1f2a68"


def passthrough_settings(edge: EdgeUpstream) -> Any:
    """Passthrough: the client's own key goes upstream; Claude natively, Gemini through
    litellm's bridge (a Chat request), the rest as OpenAI."""
    claude = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    gemini = {"name": "g", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url}
    openai = {"name": "openai", "match": ["*"], "base_url": edge.base_url}
    return proxy_settings(edge.base_url, upstreams=[claude, gemini, openai])


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        ("/v1/chat/completions", CHAT, {"authorization": f"Bearer {CLIENT_KEY}"}),
        ("/v1/responses", RESPONSES, {"authorization": f"Bearer {CLIENT_KEY}"}),
        ("/v1/messages", MESSAGES, {"x-api-key": CLIENT_KEY}),
        ("/v1/chat/completions", {**CHAT, "model": "gemini-2.5-flash"},
         {"authorization": f"Bearer {CLIENT_KEY}"}),
    ],
    ids=["chat", "responses", "messages", "chat-to-gemini-through-litellm"],
)  # fmt: skip
async def test_an_error_quoting_the_clients_own_key_is_redacted(
    tmp_path: Path, edge: EdgeUpstream, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    """In passthrough the key sent upstream is the client's. An upstream quoting it back
    ("Authentication failed for <key>") had it relayed and written to the request log, where
    the server's own key was redacted by its value."""
    said = {
        "error": {
            "message": f"Authentication failed for {CLIENT_KEY}: key expired",
            "type": "invalid_request_error",
            "code": 401,
            "status": "UNAUTHENTICATED",
        }
    }
    edge.reply = Reply.json(said, status=401)
    async with in_process(passthrough_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=headers)
        rows = await log_rows(c)
    assert any(CLIENT_KEY in value for _, value in edge.last.headers)  # the key went upstream
    assert r.status_code == 401
    assert_no_key(r.text, CLIENT_KEY)
    assert all(CLIENT_KEY[:12] not in orjson.dumps(row).decode() for row in rows)


def chat_chunk(content: str) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": None}
    return (
        b"data: "
        + orjson.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]})
        + b"\n\n"
    )


def stream_events(endpoint: str, key: str) -> tuple[list[bytes], bytes]:
    """A stream's answer so far (key-like text and the word "error" in the model's own text)
    and the error event that breaks it off, quoting ``key``."""
    said = f"the error said: {key}"
    if endpoint == "chat":
        error = openai_401(key)
        error["error"]["type"] = "server_error"
        return [chat_chunk("Hel"), chat_chunk(said)], b"data: " + orjson.dumps(error) + b"\n\n"
    if endpoint == "messages":
        answer = message_events(said)[:-3]  # cut before content_block_stop
        return answer, event("error", error={"type": "overloaded_error", "message": f"{key} x"})
    answer = response_events(said)[:2]  # created, a text delta
    return answer, event("error", code="invalid_api_key", message=f"{key} x", param=None)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_an_error_event_inside_a_stream_is_redacted(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str, split: bool
) -> None:
    path, body, _, key = ENDPOINTS[endpoint]
    answer, error = stream_events(endpoint, key)
    tail = [error, b"data: [DONE]\n\n"] if endpoint == "chat" else [error]
    if split:  # cut inside the word "error" and inside the key
        joined = b"".join(tail)
        at, inside = joined.index(b"error") + 3, joined.index(key.encode()) + 5
        tail = [joined[:at], joined[at:inside], joined[inside:]]
    edge.reply = sse_reply([*answer, *tail])
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json={**body, "stream": True}, headers=CLIENT)
        (row,) = await log_rows(c)
    assert r.status_code == 200
    # the log row is the failure the provider reported, not a success, and redacted too
    assert row["status"] == 200 and row["error_type"] == "upstream_stream_error"
    assert REDACTED in row["error"] and key not in row["error"]
    # the answer so far byte for byte, key shapes and all, but for the server's own key
    relayed = b"".join(answer).replace(key.encode(), REDACTED.encode())
    assert r.content.startswith(relayed)
    rest = r.content[len(relayed) :]
    assert_no_key(rest.decode(), key)
    data = orjson.loads(rest.split(b"data: ", 1)[1].split(b"\n", 1)[0])
    if endpoint == "chat":
        assert data["error"]["code"] == "invalid_api_key" and rest.endswith(b"data: [DONE]\n\n")
    elif endpoint == "messages":
        assert rest.startswith(b"event: error\n") and data["error"]["type"] == "overloaded_error"
        assert data["error"]["message"] == f"{REDACTED} x"
    else:
        assert rest.startswith(b"event: error\n") and data["code"] == "invalid_api_key"
        assert data["message"] == f"{REDACTED} x"


async def test_a_success_stream_passes_byte_for_byte_but_for_the_server_key(
    tmp_path: Path, edge: EdgeUpstream, keys: None
) -> None:
    """Key-like text and the word "error" in an answer, cut anywhere: relayed as it came, the
    server's key itself replaced (alongside, an error event of the same stream is redacted)."""
    events = [
        chat_chunk(f"error {OPENAI_KEY} error"),
        chat_chunk('{"error": "x"}'),
        chat_chunk("ok"),
    ]
    error = b"data: " + orjson.dumps(openai_401(OPENAI_KEY)) + b"\n\n"
    joined = b"".join(events)
    cuts = sorted(random.Random(7).sample(range(1, len(joined)), 12))
    chunks = [joined[a:b] for a, b in zip([0, *cuts], [*cuts, len(joined)], strict=True)]
    edge.reply = sse_reply([*chunks, error])
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers=CLIENT)
        (row,) = await log_rows(c)
    joined = joined.replace(OPENAI_KEY.encode(), REDACTED.encode())
    assert r.content.startswith(joined)
    # the word "error" in the answer's text is no error event; the event after it is
    assert row["error_type"] == "upstream_stream_error" and OPENAI_KEY not in row["error"]
    assert_no_key(r.content[len(joined) :].decode(), OPENAI_KEY)


# litellm: a provider's 401 through each path litellm serves (its message is shortened and
# redacted by litellm_errors.failure; the configured key must go too).
LITELLM = {
    # chat completions to a litellm upstream (anthropic)
    "chat": ("/v1/chat/completions", request(user("hi"), model="anthropic/claude-x"), "litellm"),
    # Messages bridged to an OpenAI upstream
    "messages": ("/v1/messages", MESSAGES | {"model": "gpt-4o"}, "openai"),
    # Responses bridged to an Anthropic upstream
    "responses": ("/v1/responses", RESPONSES | {"model": "claude-x"}, "anthropic"),
}


@pytest.mark.parametrize("endpoint", LITELLM)
async def test_litellm_paths_redact_the_server_key(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str
) -> None:
    path, body, kind = LITELLM[endpoint]
    spec: dict[str, Any] = {
        "name": "up",
        "kind": kind,
        "match": ["*"],
        "api_key_env": "CLAUDE_SERVER_KEY",
    }
    spec["base_url"] = edge.base_url if kind == "openai" else edge.url
    if kind == "litellm":
        spec["provider"] = "anthropic"
    settings = proxy_settings(edge.base_url, auth={"mode": "keys"}, upstreams=[spec])
    error = anthropic_401 if kind != "openai" else openai_401
    edge.reply = Reply.json(error(CUSTOM_KEY), status=401)
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=CLIENT)
    assert sent_key(edge) == CUSTOM_KEY
    assert r.status_code == 401, r.text
    assert REDACTED in r.text
    assert_no_key(r.text, CUSTOM_KEY)


@pytest.mark.parametrize("endpoint", LITELLM)
async def test_litellm_paths_relay_the_providers_retry_headers(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str
) -> None:
    """A provider's 429 through each path litellm serves goes back at once (the provider's SDK
    under litellm retried it twice, waiting 17 s each time, before the client saw it), with
    ``retry-after`` (the client's SDK waits that long), and only that: the rate-limit counters
    are the shared account's, every tenant's activity (relayed only with the client's own key)."""
    path, body, kind = LITELLM[endpoint]
    spec: dict[str, Any] = {"name": "up", "kind": kind, "match": ["*"]}
    spec["api_key_env"] = "CLAUDE_SERVER_KEY"
    spec["base_url"] = edge.base_url if kind == "openai" else edge.url
    if kind == "litellm":
        spec["provider"] = "anthropic"
    settings = proxy_settings(edge.base_url, auth={"mode": "keys"}, upstreams=[spec])
    error = anthropic_401 if kind != "openai" else openai_401
    limits = {"x_ratelimit_remaining_requests": "0", "anthropic_ratelimit_tokens_remaining": "0"}
    edge.reply = Reply.json(error("x"), status=429, retry_after="17", x_route="internal", **limits)
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=CLIENT)
    assert r.status_code == 429, r.text
    assert len(edge.seen) == 1  # no retry of the proxy's own: the client waits as told, once
    assert r.headers["retry-after"] == "17" and "x-route" not in r.headers
    limit = (
        "anthropic-ratelimit-tokens-remaining"
        if kind != "openai"
        else "x-ratelimit-remaining-requests"
    )
    assert limit not in r.headers


# The redactor itself


REDACTOR = ErrorRedactor([CUSTOM_KEY, OPENAI_KEY, "none"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {CUSTOM_KEY}.", f"key {REDACTED}."),
        (f"key {CUSTOM_KEY[:9]}", f"key {REDACTED}"),  # 8 characters of it in a row
        (f"key {CUSTOM_KEY[:5]}***{CUSTOM_KEY[-4:]}", f"key {REDACTED}"),
        (f"key {OPENAI_KEY[:3]}...{OPENAI_KEY[-4:]}.", f"key {REDACTED}."),
        (f"key {OPENAI_KEY[:6]}\u2026", f"key {REDACTED}"),
        # "none" is configured too, but as a placeholder: too short to be a secret
        ("none of it: the usual text... stays", "none of it: the usual text... stays"),
        ("an sk-ant-api03-abcdefghijklmnop key", f"an {REDACTED} key"),  # the key shapes too
    ],
)
def test_text(text: str, expected: str) -> None:
    assert REDACTOR.text(text) == expected


def test_an_error_body_keeps_its_bytes_unless_something_goes() -> None:
    clean = b'{ "error": {"message": "model overloaded", "code": null} }'
    assert REDACTOR.body(clean) is clean
    quoted = b'{ "error": {"message": "key ' + CUSTOM_KEY.encode() + b'", "api_key": "k"} }'
    assert orjson.loads(REDACTOR.body(quoted)) == {
        "error": {"message": f"key {REDACTED}", "api_key": REDACTED}
    }
    assert (
        REDACTOR.body(b"\xff not json " + CUSTOM_KEY.encode())
        == b"\xff not json " + REDACTED.encode()
    )


def test_an_encoded_error_body_is_decoded_and_redacted() -> None:
    body = orjson.dumps(openai_401(CUSTOM_KEY))
    response = UpstreamResponse(401, {"content-encoding": "gzip"}, body=gzip.compress(body))
    REDACTOR.response(response)
    assert response.headers == {} and response.body is not None
    assert orjson.loads(response.body)["error"]["message"].startswith(
        f"Incorrect API key provided: {REDACTED}"
    )
    unknown = UpstreamResponse(401, {"content-encoding": "br"}, body=b"\x00" + body)
    REDACTOR.response(unknown)
    assert unknown.headers == {} and CUSTOM_KEY.encode() not in (unknown.body or b"")


async def test_a_break_off_message_is_redacted() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield chat_chunk("Hel")
        raise UpstreamFailed(f"Upstream up: bad key {CUSTOM_KEY}")

    got: list[bytes] = []
    with pytest.raises(UpstreamFailed) as raised:
        async for chunk in REDACTOR.stream(chunks()):
            got.append(chunk)
    assert got == [chat_chunk("Hel")]
    assert raised.value.message == f"Upstream up: bad key {REDACTED}"
    assert orjson.loads(raised.value.body_bytes())["error"]["message"].endswith(REDACTED)


EVENT_END = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)")


def test_a_stream_cut_anywhere() -> None:
    """Answer events pass as they came, error events (each protocol's) are redacted, however
    the bytes are cut and with LF or CRLF line ends."""
    answers = [
        chat_chunk(f"error: {CUSTOM_KEY}"),
        event("response.created", response={"error": None, "text": "y" * 600}),
        b": keep-alive error\n\n",
    ]
    errors = [
        event("error", error={"type": "api_error", "message": CUSTOM_KEY}),
        b"data: " + orjson.dumps(openai_401(CUSTOM_KEY)) + b"\n\n",
        event(
            "response.failed",
            response={"status": "failed", "error": {"code": "x", "message": CUSTOM_KEY}},
        ),
        b'data: {"object": "error", "message": "' + CUSTOM_KEY.encode() + b'"}\n\n',
    ]
    rng = random.Random(3)
    for crlf in (False, True):
        for _ in range(400):
            parts = [rng.choice(answers if rng.random() < 0.6 else errors) for _ in range(6)]
            if crlf:
                parts = [p.replace(b"\n", b"\r\n") for p in parts]
            joined = b"".join(parts)
            cuts = sorted(rng.sample(range(1, len(joined)), rng.randint(1, 40)))
            scanner = EventScanner(REDACTOR)
            out = b"".join(
                scanner.feed(joined[a:b])
                for a, b in zip([0, *cuts], [*cuts, len(joined)], strict=True)
            )
            got = EVENT_END.split(out + scanner.finish())[:-1]
            assert len(got) == len(parts)
            for part, relayed in zip(parts, got, strict=True):
                if part.replace(b"\r\n", b"\n") in answers:
                    assert relayed == part
                else:  # whole, its JSON written back; or, its start relayed already, as text
                    assert relayed in (REDACTOR.event(part, True), REDACTOR.event(part, False))


def test_the_keys_are_read_once_from_the_upstreams_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("K1", f"{CUSTOM_KEY}\n")  # as mounted from a file
    monkeypatch.setenv("K2", "none")  # a placeholder, not a secret
    ups = [
        UpstreamSettings(name=n, api_key_env=e) for n, e in (("a", "K1"), ("b", "K2"), ("c", None))
    ]
    redactor = ErrorRedactor.for_upstreams(ups)
    monkeypatch.setenv("K1", "changed-later-0000")
    assert redactor.keys == (CUSTOM_KEY,)


def test_a_stream_that_breaks_off_keeps_its_unfinished_event_redacted() -> None:
    scanner = EventScanner(REDACTOR)
    first = scanner.feed(
        b'event: error\ndata: {"type": "error", "message": "' + CUSTOM_KEY.encode()
    )
    assert first == b"" and CUSTOM_KEY.encode() not in scanner.finish()


@pytest.mark.parametrize("blank", [b"\n\n", b"\r\n\r\n"])
def test_a_read_of_many_events_holding_error_is_scanned_in_linear_time(blank: bytes) -> None:
    """A gateway's ``"error":null`` in every chunk, 13,000 events in one 1 MiB read: each event
    held back copied the rest of the read, and each search for its end looked for the ways of
    ending one the stream does not use through all of it (11 s on the event loop). Relayed as it
    came, and the time each event costs does not grow with the read."""
    import time

    event = b'data: {"id":"c1","choices":[{"delta":{"content":"a"}}],"error":null}' + blank

    def seconds(events: int) -> float:
        read = event * events
        scanner = EventScanner(ErrorRedactor())
        started = time.perf_counter()
        assert scanner.feed(read) + scanner.finish() == read
        return time.perf_counter() - started

    small, large = seconds(1_600), seconds(12_800)  # 8 times as many
    assert large < 3.0 and large < 24 * max(small, 1e-4), (small, large)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
async def test_a_stream_answering_a_request_for_none_has_its_error_event_redacted(
    tmp_path: Path, edge: EdgeUpstream, keys: None, endpoint: str
) -> None:
    """An upstream that answers a request asking for no stream with an event stream, whole:
    relayed as it came (the proxy reads it whole) but for its error event, redacted as a relayed
    stream's is (on chat the server's key quoted there went to the client as it came)."""
    path, body, _, key = ENDPOINTS[endpoint]
    answer, error = stream_events(endpoint, key)
    edge.reply = sse_reply([*answer, error])
    async with in_process(keys_settings(edge), str(tmp_path / "db")) as c:
        r = await c.post(path, json={**body, "stream": False}, headers=CLIENT)
    assert r.status_code == 200
    relayed = b"".join(answer).replace(key.encode(), REDACTED.encode())
    assert r.content.startswith(relayed)
    assert REDACTED.encode() in r.content[len(relayed) :]
    assert_no_key(r.content[len(relayed) :].decode(), key)
