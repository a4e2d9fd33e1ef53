"""Client-controlled values that used to break the handler: session ids that are no valid header
value, headers that cannot be sent, bodies nested deeper than the JSON encoder allows, upstream
error bodies carrying keys. Each leaves a finished log row and the in-flight gauge back at 0."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from urllib.parse import unquote

import httpx
import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.asgi import chat_scope
from tests.support.edge_upstream import Reply
from tests.support.factories import request, user

UPSTREAM = "http://upstream.test/v1"  # for requests that never reach an upstream
JSON = {"content-type": "application/json"}
SSE = (
    b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    b"data: [DONE]\n\n"
)


def in_flight(client: httpx.AsyncClient) -> float:
    value = client.app.state.metrics.registry.get_sample_value(  # type: ignore[attr-defined]
        "ctxproxy_in_flight_requests"
    )
    assert value is not None
    return float(value)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("extra", "sid"),
    [
        ({"user": "张三"}, "user:张三"),
        # a name holding a control character is hashed (``session_key``): still one session
        ({"metadata": {"session_id": "a\nb"}}, None),
        ({"metadata": {"session_id": "ctl\x01\x7f%20x"}}, None),
        ({"metadata": {"session_id": "50%-off"}}, "50%-off"),
        ({"user": "plain-ascii_1"}, "user:plain-ascii_1"),
    ],
)
async def test_session_id_header_is_percent_encoded(
    tmp_path: Path, edge, extra, sid, stream
) -> None:
    if stream:
        edge.reply = Reply.event_stream(SSE)
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        body = request(user("hi"), stream=stream, **extra)
        r = await client.post("/v1/chat/completions", content=orjson.dumps(body), headers=JSON)
        assert r.status_code == 200
        value = r.headers["x-ctxproxy-session-id"]
        assert all(0x21 <= ord(c) <= 0x7E for c in value)
        served = unquote(value)
        assert served == sid if sid is not None else served.startswith("hashed:")
        row = (await log_rows(client))[0]
        assert row["status"] == 200 and row["session_id"] == "anonymous/" + served
        assert in_flight(client) == 0


async def test_unsendable_streaming_response_still_finishes_the_row(
    tmp_path: Path, edge, monkeypatch
) -> None:
    """If sending the response start fails (a server rejecting a header), the relay generator
    never runs: the upstream response must still be closed and the row finished."""
    from proxy.upstream import transport as upstream

    closed = []
    make_close = upstream.closer

    def tracked(response):  # type: ignore[no-untyped-def]
        close = make_close(response)

        async def tracked_close() -> None:
            await close()
            closed.append(response.closed)

        return tracked_close

    monkeypatch.setattr(upstream, "closer", tracked)
    edge.reply = Reply(
        headers=[("content-type", "text/event-stream")], chunks=[SSE], after_first_chunk="stall"
    )
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        body = orjson.dumps(request(user("hi"), stream=True))
        sent = False

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client stays: only sending to it fails

        async def send(message):
            if message["type"] == "http.response.start":
                raise RuntimeError("server refused a header")

        scope = chat_scope(app)
        with pytest.raises(RuntimeError):
            await app(scope, receive, send)
        row = (await log_rows(client))[0]
        assert row["status"] is not None
        assert closed == [True] and in_flight(client) == 0
    assert await asyncio.to_thread(edge.hung_up_mid_stream.wait, 5)


def nested_json(body: dict, place: str, depth: int) -> bytes:
    """``body`` as JSON with an array nested ``depth`` deep in ``place`` (built as text: orjson
    itself will not serialise it)."""
    return orjson.dumps(body).replace(orjson.dumps(place), b"[" * depth + b'"leaf"' + b"]" * depth)


@pytest.mark.parametrize("capture", [False, True])
@pytest.mark.parametrize(
    ("where", "depth", "status"),
    [
        ("top", 150, 200),
        ("top", 300, 400),
        ("message", 300, 400),
        ("message", 1000, 400),
        ("message", 150, 200),
    ],
)
async def test_deeply_nested_bodies_are_rejected_not_500(
    tmp_path: Path, edge, where, depth, status, capture
) -> None:
    body = request(user("hi"))
    if where == "top":
        body["extra"] = "PLACE"
    else:
        body["messages"][0]["x"] = "PLACE"
    settings = proxy_settings(edge.base_url, store={"capture_payloads": capture})
    async with in_process(settings, str(tmp_path / "db")) as client:
        content = nested_json(body, "PLACE", depth)
        r = await client.post("/v1/chat/completions", content=content, headers=JSON)
        assert r.status_code == status
        if status == 400:
            assert r.json()["error"]["type"] == "invalid_request_error"
            assert "nested" in r.json()["error"]["message"]
        rows = await log_rows(client)
        assert [row["status"] for row in rows] == [status]
        assert in_flight(client) == 0


async def test_a_failure_while_capturing_the_answer_still_relays_it(
    tmp_path: Path, edge, monkeypatch, caplog
) -> None:
    """A bug of ours in capturing the answer for the log costs the log its copy, not the client
    its answer: the row completes without it, and the failure is logged."""
    from proxy.server import log_fields

    def broken(body, total):
        raise RecursionError("boom")

    monkeypatch.setattr(log_fields, "captured_text", broken)
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, str(tmp_path / "db")) as client:
        body = orjson.dumps(request(user("hi")))
        r = await client.post("/v1/chat/completions", content=body, headers=JSON)
        assert r.status_code == 200 and r.json()["choices"]
        (row,) = await log_rows(client)
        assert row["status"] == 200 and row["response_body"] is None
        assert row["request_body"] is not None  # the request's copy is not the answer's
        assert in_flight(client) == 0
    assert "capturing the answer failed" in caplog.text


@pytest.mark.parametrize("capture", [False, True])
async def test_upstream_error_bodies_are_stored_redacted(tmp_path: Path, edge, capture) -> None:
    echo = {"error": {"message": "Incorrect API key provided: sk-proj-ABCDEFGH12345678xyz."}}
    edge.reply = Reply.json(echo, 401)
    settings = proxy_settings(edge.base_url, store={"capture_payloads": capture})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1/chat/completions",
            content=orjson.dumps(request(user("hi"))),
            headers={**JSON, "authorization": "Bearer sk-proj-ABCDEFGH12345678xyz"},
        )
        assert r.status_code == 401  # the client's answer is redacted too (test_error_redaction)
        assert r.json() == {"error": {"message": "Incorrect API key provided: [REDACTED]."}}
        row = (await log_rows(client))[0]
        assert row["error_type"] == "upstream_status" and "Incorrect API key" in row["error"]
        assert "ABCDEFGH12345678" not in orjson.dumps(row).decode()


async def test_usage_of_a_crlf_stream_is_logged(tmp_path: Path, edge) -> None:
    edge.reply = Reply.event_stream(SSE.replace(b"\n", b"\r\n"))
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        body = orjson.dumps(request(user("hi"), stream=True))
        r = await client.post("/v1/chat/completions", content=body, headers=JSON)
        assert r.status_code == 200
        row = (await log_rows(client))[0]
        assert (row["prompt_tokens"], row["completion_tokens"]) == (3, 1)


async def test_client_gone_mid_body_is_logged_as_499(tmp_path: Path) -> None:
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        messages = [
            {"type": "http.request", "body": b'{"model": "m", "mess', "more_body": True},
            {"type": "http.disconnect"},
        ]

        async def receive():
            return messages.pop(0)

        async def send(message):
            pass

        scope = chat_scope(app)
        await app(scope, receive, send)
        (row,) = await log_rows(client)
        assert row["status"] == 499 and row["error_type"] == "client_disconnected"
        assert row["client_disconnected"] == 1
        assert in_flight(client) == 0


ACCEPTED_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON ;charset=UTF-8",
    "application/vnd.api+json",
]
REFUSED_TYPES = [
    None,  # a browser fetch() with an ArrayBuffer body sends none, and needs no preflight
    "",
    "text/plain",  # the cross-site "simple request" a web page may send to a sidecar
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "json",
    "text/json+x",
]


@pytest.mark.parametrize("content_type", ACCEPTED_TYPES)
async def test_json_content_types_are_accepted(tmp_path: Path, edge, content_type) -> None:
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        body = orjson.dumps(request(user("hi")))
        headers = {"content-type": content_type}
        r = await client.post("/v1/chat/completions", content=body, headers=headers)
        assert r.status_code == 200
    assert len(edge.seen) == 1


@pytest.mark.parametrize("content_type", REFUSED_TYPES)
async def test_other_content_types_are_415_unread(tmp_path: Path, edge, content_type) -> None:
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        scope = chat_scope(app)
        scope["headers"] = (
            [] if content_type is None else [(b"content-type", content_type.encode())]
        )
        read: list[bool] = []

        async def receive():
            read.append(True)
            return {"type": "http.request", "body": orjson.dumps(request(user("hi")))}

        sent: list[dict] = []

        async def send(message):
            sent.append(message)

        await app(scope, receive, send)
        assert sent[0]["status"] == 415 and read == []  # answered without reading the body
        # the unread body cannot be skipped over: the connection closes after the answer
        assert (b"connection", b"close") in sent[0]["headers"]
        error = orjson.loads(sent[1]["body"])["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["code"] == "unsupported_media_type" and error["param"] == "content-type"
        assert error["type"] == "invalid_request_error"
        (row,) = await log_rows(client)
        assert row["status"] == 415 and row["error_type"] == "unsupported_media_type"
        assert in_flight(client) == 0
    assert edge.seen == []


async def test_authentication_comes_before_the_content_type(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CTXPROXY_KEYS", "proxy-key-1")
    monkeypatch.setenv("UP_KEY", "sk-up")
    settings = proxy_settings(
        UPSTREAM,
        auth={"mode": "keys"},
        upstreams=[{"name": "u", "base_url": UPSTREAM, "api_key_env": "UP_KEY"}],
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        body = orjson.dumps(request(user("hi")))
        headers = {"content-type": "text/plain"}
        r = await client.post("/v1/chat/completions", content=body, headers=headers)
        assert r.status_code == 401
        headers["authorization"] = "Bearer proxy-key-1"
        r = await client.post("/v1/chat/completions", content=body, headers=headers)
        assert r.status_code == 415


def test_a_live_415_closes_the_connection_without_reading_the_body(live_proxy) -> None:
    """Through uvicorn: a cross-site form POST announcing a large body gets its 415 at once, and
    the connection is closed rather than kept with the rest of the body unread."""
    proxy = live_proxy()
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\n"
            f"host: {host}\r\n"
            "content-type: text/plain\r\n"
            "content-length: 10000000\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"model": "gpt-4o", "messages": [')
        received = b""
        while chunk := sock.recv(65536):  # until the server closes
            received += chunk
    status, _, rest = received.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 415")
    assert b"\r\nconnection: close\r\n" in rest.lower()
    assert b'"code":"unsupported_media_type"' in rest
    request_id = next(
        line.split(b":", 1)[1].strip().decode()
        for line in rest.split(b"\r\n")
        if line.lower().startswith(b"x-ctxproxy-request-id:")
    )
    assert proxy.row(request_id)["status"] == 415
