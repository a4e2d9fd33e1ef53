"""``POST /v1/embeddings`` and ``/v1/moderations`` through a live proxy with the real ``openai`` SDK
(a client whose ``OPENAI_BASE_URL`` is the proxy): relayed to the catch-all ``kind: openai``
upstream under the chat relay's key rules; with none, a 404 in OpenAI's shape, nothing sent.
Each is logged as a model request is: its row, the JSON log line and ``/metrics``."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy.app import create_app
from tests.conftest import proxy_settings
from tests.proxy.telemetry.test_metrics import samples, value
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.live import serve_in_thread, stop
from tests.support.request_rows import completed_row

CLIENT_KEY = "sk-client-own-key-000000000001"
SERVER_KEY = "sk-server-key-00000000000000001"
EMBEDDING = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 2, "total_tokens": 2},
}
MODERATION = {
    "id": "modr-1",
    "model": "omni-moderation-latest",
    "results": [
        {
            "flagged": False,
            "categories": {"harassment": False},
            "category_scores": {"harassment": 0.001},
        }
    ],
}


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Callable[..., str]]:
    servers = []

    def start(**overrides: Any) -> str:
        settings = proxy_settings("http://unused.test/v1", **overrides)
        db = str(tmp_path / f"proxy{len(servers)}.db")
        server, url = serve_in_thread(create_app(settings, db_path=db, strict=True))
        servers.append(server)
        return url

    yield start
    for server in servers:
        stop(server)


def _client(url: str, key: str = CLIENT_KEY, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, **kwargs)


def _catch_all(edge: EdgeUpstream, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"name": "named", "match": ["local-model"], "base_url": edge.base_url, **extra},
        {"name": "all", "match": ["*"], "base_url": edge.base_url, **extra},
    ]


def test_embeddings_are_relayed_with_the_clients_key(proxy, edge: EdgeUpstream) -> None:
    edge.reply = Reply.json(EMBEDDING, x_request_id="req-up-1")
    url = proxy(upstreams=_catch_all(edge))
    client = _client(url, organization="org-own")
    got = client.embeddings.create(
        model="text-embedding-3-small", input="hello world", encoding_format="float", user="u-7"
    )
    assert got.data[0].embedding == [0.25, -0.5, 1.0]
    assert got.usage.prompt_tokens == 2
    seen = edge.last
    assert (seen.method, seen.target) == ("POST", "/v1/embeddings")
    assert seen.header("authorization") == f"Bearer {CLIENT_KEY}"
    assert seen.header("openai-organization") == "org-own"  # the client's own account
    assert seen.json() == {
        "model": "text-embedding-3-small",
        "input": "hello world",
        "encoding_format": "float",
        "user": "u-7",  # its own key: as sent
    }


def test_the_sdks_default_base64_embeddings(proxy, edge: EdgeUpstream) -> None:
    """The SDK asks for base64 by default and decodes it: the answer's bytes are relayed."""
    import base64
    import struct

    packed = base64.b64encode(struct.pack("<3f", 0.25, -0.5, 1.0)).decode()
    edge.reply = Reply.json({**EMBEDDING, "data": [{**EMBEDDING["data"][0], "embedding": packed}]})
    url = proxy(upstreams=_catch_all(edge))
    got = _client(url).embeddings.create(model="text-embedding-3-small", input=["a"])
    assert got.data[0].embedding == [0.25, -0.5, 1.0]
    assert edge.last.json()["encoding_format"] == "base64"


def test_moderations_are_relayed(proxy, edge: EdgeUpstream) -> None:
    edge.reply = Reply.json(MODERATION)
    url = proxy(upstreams=_catch_all(edge))
    got = _client(url).moderations.create(input="is this fine?")
    assert got.results[0].flagged is False
    assert edge.last.target == "/v1/moderations"
    assert edge.last.json()["input"] == "is this fine?"


def test_upstream_errors_come_back_in_their_shape(proxy, edge: EdgeUpstream) -> None:
    error = {"error": {"message": "bad input", "type": "invalid_request_error", "code": None}}
    edge.reply = Reply.json(error, 400)
    url = proxy(upstreams=_catch_all(edge))
    with pytest.raises(openai.BadRequestError) as raised:
        _client(url).embeddings.create(model="text-embedding-3-small", input="")
    assert raised.value.status_code == 400 and "bad input" in str(raised.value)


def test_a_gateways_html_error_comes_back_in_openais_shape(proxy, edge: EdgeUpstream) -> None:
    """A 502 page from a gateway in front of the upstream: an ``error`` object the SDK reads, as
    on chat, its text redacted."""
    page = f"<html><body>bad gateway for {CLIENT_KEY}</body></html>".encode()
    edge.reply = Reply(502, [("content-type", "text/html")], page)
    url = proxy(upstreams=_catch_all(edge))
    with pytest.raises(openai.APIStatusError) as raised:
        _client(url).embeddings.create(model="text-embedding-3-small", input="x")
    answer = raised.value.response
    assert answer.status_code == 502 and answer.headers["content-type"] == "application/json"
    message = answer.json()["error"]["message"]
    assert "bad gateway" in message and CLIENT_KEY not in message


def test_an_answer_past_the_whole_answer_bound_streams_through(proxy, edge: EdgeUpstream) -> None:
    """An embeddings batch's answer is relayed as it comes, not read whole: 70 MiB (past the
    64 MiB a whole answer may be) arrives complete, where it was a 502."""
    numbers = b"0.1234567," * (7 * 1024 * 1024)
    body = b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[' + numbers
    body += b'0]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}'
    edge.reply = Reply(200, [("content-type", "application/json")], body)
    url = proxy(upstreams=_catch_all(edge))
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    received = 0
    with httpx.stream(
        "POST", url + "/v1/embeddings", json={"model": "m", "input": "x"}, headers=headers,
        timeout=60,
    ) as answer:  # fmt: skip
        assert answer.status_code == 200
        for piece in answer.iter_raw():
            received += len(piece)
    assert received == len(body)


def test_an_answer_broken_off_fails_for_the_client(proxy, edge: EdgeUpstream) -> None:
    """Its head relayed, an answer the upstream breaks off is cut: the client's read fails."""
    edge.reply = Reply(
        200, [("content-type", "application/json")], chunks=[b'{"object":"list","data":['],
        after_first_chunk="break",
    )  # fmt: skip
    url = proxy(upstreams=_catch_all(edge))
    with pytest.raises(httpx.HTTPError):
        httpx.post(
            url + "/v1/embeddings", json={"model": "m", "input": "x"},
            headers={"authorization": f"Bearer {CLIENT_KEY}"}, timeout=30,
        ).json()  # fmt: skip


def test_nothing_in_the_request_chooses_the_upstream(proxy, edge: EdgeUpstream) -> None:
    """The model another upstream matches, a query string: it goes to the catch-all, no query."""
    edge.reply = Reply.json(EMBEDDING)
    other = EdgeUpstream().start()
    try:
        upstreams = [
            {"name": "named", "match": ["local-model"], "base_url": other.base_url},
            {"name": "all", "match": ["*"], "base_url": edge.base_url},
        ]
        url = proxy(upstreams=upstreams)
        r = httpx.post(
            url + "/v1/embeddings?api-version=x&base_url=http://elsewhere",
            json={"model": "local-model", "input": "x"},
            headers={"authorization": f"Bearer {CLIENT_KEY}"},
        )
        assert r.status_code == 200
        assert edge.last.target == "/v1/embeddings"
        assert other.seen == []
    finally:
        other.stop()


def test_the_server_key_goes_with_scoped_ids(
    proxy, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVER_KEY", SERVER_KEY)
    monkeypatch.setenv("KEY_ALICE", "ka-alice-0000000001")
    edge.reply = Reply.json(EMBEDDING)
    url = proxy(
        auth={"mode": "keys", "principals": {"alice": ["KEY_ALICE"]}},
        upstreams=_catch_all(edge, api_key_env="SERVER_KEY"),
    )
    client = _client(url, "ka-alice-0000000001", organization="org-own")
    client.embeddings.create(
        model="text-embedding-3-small", input="hi", encoding_format="float", user="end-user-7"
    )
    seen = edge.last
    assert seen.header("authorization") == f"Bearer {SERVER_KEY}"
    assert seen.header("openai-organization") is None  # the gateway's account, not a tenant's
    sent = seen.json()
    assert sent["user"].startswith("u-") and sent["user"] != "end-user-7"
    # a member given twice goes as it was read (its last), never the bytes as sent
    twice = b'{"model":"m","input":"a","user":"victim-end-user-7","user":null}'
    headers = {"authorization": "Bearer ka-alice-0000000001", "content-type": "application/json"}
    assert httpx.post(url + "/v1/embeddings", content=twice, headers=headers).status_code == 200
    assert b"victim-end-user-7" not in edge.last.body and edge.last.json()["user"] is None
    # without a proxy key: refused in OpenAI's shape, nothing sent
    count = len(edge.seen)
    with pytest.raises(openai.AuthenticationError) as raised:
        _client(url, "not-a-proxy-key").embeddings.create(model="m", input="hi")
    assert raised.value.status_code == 401
    assert len(edge.seen) == count


def test_with_no_catch_all_openai_upstream_it_says_so(proxy, edge: EdgeUpstream) -> None:
    url = proxy(upstreams=[{"name": "named", "match": ["gpt-*"], "base_url": edge.base_url}])
    with pytest.raises(openai.NotFoundError) as raised:
        _client(url).embeddings.create(model="text-embedding-3-small", input="hi")
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "no_upstream"
    assert "none is configured" in body["message"]
    assert edge.seen == []


def test_the_body_limit_holds(proxy, edge: EdgeUpstream) -> None:
    url = proxy(upstreams=_catch_all(edge), limits={"max_body_bytes": 2048})
    r = httpx.post(
        url + "/v1/embeddings",
        json={"model": "m", "input": "x" * 4096},
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    assert edge.seen == []


def test_a_get_is_not_allowed(proxy, edge: EdgeUpstream) -> None:
    url = proxy(upstreams=_catch_all(edge))
    r = httpx.get(url + "/v1/embeddings")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json()["error"]["code"] == "method_not_allowed"


def test_another_providers_key_is_not_sent(proxy, edge: EdgeUpstream) -> None:
    """An Anthropic key on a relay to OpenAI's own API: refused, nothing sent, the refusal
    naming the request (no model was read), not a model ''."""
    url = proxy(
        upstreams=[{"name": "all", "match": ["*"], "base_url": "https://api.openai.com/v1"}]
    )
    answer = httpx.post(
        url + "/v1/embeddings", json={"model": "m", "input": "x"},
        headers={"authorization": "Bearer sk-ant-api03-" + "a" * 40}, timeout=30,
    )  # fmt: skip
    message = answer.json()["error"]["message"]
    assert answer.status_code == 404 and message.startswith("This request goes to upstream all")
    assert "''" not in message and not edge.seen


def test_an_embeddings_request_has_its_row(
    proxy, edge: EdgeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edge.reply = Reply.json(EMBEDDING)
    url = proxy(upstreams=_catch_all(edge))
    answer = _client(url).embeddings.with_raw_response.create(
        model="text-embedding-3-small", input="hello world", encoding_format="float"
    )
    assert answer.parse().data[0].embedding == [0.25, -0.5, 1.0]
    request_id = answer.headers["x-ctxproxy-request-id"]
    assert float(answer.headers["x-ctxproxy-overhead-ms"]) >= 0
    row = completed_row(tmp_path / "proxy0.db", request_id)
    assert row["path"] == "/v1/embeddings" and row["protocol"] == "embeddings"
    assert row["principal"] not in ("-", "legacy")
    assert (row["model"], row["upstream"], row["status"]) == ("text-embedding-3-small", "all", 200)
    assert row["prompt_tokens"] == 2  # read from the answer streamed through
    assert orjson.loads(row["usage"]) == EMBEDDING["usage"]
    assert row["overhead_ms"] >= 0 and row["latency_ms"] >= row["overhead_ms"]
    assert row["ttfb_ms"] is not None and row["session_id"] is None
    m = samples(httpx.get(url + "/metrics").text)
    assert value(m, "ctxproxy_requests_total", status="200", model="text-embedding-3-small") == 1
    assert value(m, "ctxproxy_in_flight_requests") == 0
    assert value(m, "ctxproxy_upstream_latency_seconds_count") == 1
    lines = [
        orjson.loads(line) for line in capsys.readouterr().err.splitlines() if '"request"' in line
    ]
    (line,) = [line for line in lines if line.get("request_id") == request_id]
    assert (line["status"], line["model"], line["prompt_tokens"]) == (
        200,
        "text-embedding-3-small",
        2,
    )


def test_a_moderation_has_its_row(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    edge.reply = Reply.json(MODERATION)
    url = proxy(upstreams=_catch_all(edge))
    answer = _client(url).moderations.with_raw_response.create(
        model="omni-moderation-latest", input="is this fine?"
    )
    row = completed_row(tmp_path / "proxy0.db", answer.headers["x-ctxproxy-request-id"])
    assert (row["path"], row["protocol"], row["status"]) == ("/v1/moderations", "moderations", 200)
    assert row["model"] == "omni-moderation-latest" and row["prompt_tokens"] is None


def test_an_upstream_error_is_logged_redacted(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    error = {"error": {"message": f"Incorrect API key provided: {CLIENT_KEY}", "code": "bad_key"}}
    edge.reply = Reply.json(error, 401)
    url = proxy(upstreams=_catch_all(edge))
    with pytest.raises(openai.AuthenticationError) as raised:
        _client(url).embeddings.create(model="text-embedding-3-small", input="x")
    row = completed_row(
        tmp_path / "proxy0.db", raised.value.response.headers["x-ctxproxy-request-id"]
    )
    assert (row["status"], row["error_type"]) == (401, "upstream_status")
    assert "Incorrect API key" in row["error"] and CLIENT_KEY not in row["error"]
    m = samples(httpx.get(url + "/metrics").text)
    assert value(m, "ctxproxy_in_flight_requests") == 0


def test_a_body_that_is_not_a_json_object_is_refused(
    proxy, edge: EdgeUpstream, tmp_path: Path
) -> None:
    """A 400 in OpenAI's shape, nothing sent upstream, the refusal logged (it was relayed)."""
    edge.reply = Reply.json(EMBEDDING)
    url = proxy(upstreams=_catch_all(edge))
    headers = {"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json"}
    for content in (b'{"model": "m", "input": ', b'["m", "x"]'):
        answer = httpx.post(url + "/v1/embeddings", content=content, headers=headers)
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_json"
        row = completed_row(tmp_path / "proxy0.db", answer.headers["x-ctxproxy-request-id"])
        assert (row["status"], row["error_type"], row["upstream"]) == (400, "invalid_json", None)
    assert edge.seen == []


def test_an_answer_broken_off_is_logged_as_such(proxy, edge: EdgeUpstream, tmp_path: Path) -> None:
    edge.reply = Reply(
        200, [("content-type", "application/json")], chunks=[b'{"object":"list","data":['],
        after_first_chunk="break",
    )  # fmt: skip
    url = proxy(upstreams=_catch_all(edge))
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    with httpx.stream(
        "POST", url + "/v1/embeddings", json={"model": "m", "input": "x"}, headers=headers
    ) as answer:
        request_id = answer.headers["x-ctxproxy-request-id"]
        with pytest.raises(httpx.HTTPError):
            answer.read()
    row = completed_row(tmp_path / "proxy0.db", request_id)
    assert row["status"] == 200 and row["error_type"] is not None


# the relayed calls that are no model request: each path and a body it takes
RELAYED = {
    "/v1/embeddings": {"model": "m", "input": "x"},
    "/v1/moderations": {"model": "m", "input": "x"},
    "/v1/messages/count_tokens": {"model": "claude-x", "messages": [{"role": "user",
                                                                     "content": "hi"}]},
    "/v1beta/models/gemini-x:countTokens": {"contents": [{"role": "user",
                                                          "parts": [{"text": "hi"}]}]},
}  # fmt: skip


@pytest.mark.parametrize("served", ["thread", "cli"])
@pytest.mark.parametrize("path", RELAYED)
def test_a_client_gone_while_the_upstream_is_slow_is_let_go_at_once(
    tmp_path: Path, edge: EdgeUpstream, path: str, served: str
) -> None:
    """A relayed call whose client hangs up while the upstream has not answered is abandoned
    then (its row 499, its slot in flight given back), not held until the upstream answers: a
    tenant's abandoned calls held slots and pooled connections for the upstream's timeout."""
    import dataclasses

    from tests.support.served import serve_like_cli

    edge.reply = dataclasses.replace(Reply.json(EMBEDDING), header_delay_s=4.0)
    upstreams = [
        {"name": "claude", "match": ["claude-*"], "kind": "anthropic", "base_url": edge.url},
        {"name": "gemini", "match": ["gemini-*"], "kind": "gemini", "base_url": edge.url},
        *_catch_all(edge),
    ]
    settings = proxy_settings("http://unused.test/v1", upstreams=upstreams)
    db = tmp_path / "proxy.db"
    app_server, url = (
        serve_like_cli(settings, str(db)) if served == "cli"
        else serve_in_thread(create_app(settings, db_path=str(db), strict=True))
    )  # fmt: skip
    try:
        started = time.monotonic()
        with httpx.Client(timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
            client.post(url + path, json=RELAYED[path])  # the client gives up
        deadline = time.monotonic() + 3.0
        rows: list[dict[str, Any]] = []
        while not rows and time.monotonic() < deadline:
            with sqlite3.connect(db) as conn:
                conn.row_factory = sqlite3.Row
                query = "SELECT * FROM requests WHERE status IS NOT NULL"
                rows = [dict(r) for r in conn.execute(query)]
            time.sleep(0.05)
        assert rows, "the row waited for the upstream's answer"
        (row,) = rows
        assert row["status"] == 499 and row["client_disconnected"] == 1
        assert time.monotonic() - started < 3.5  # before the upstream would have answered
    finally:
        stop(app_server)
