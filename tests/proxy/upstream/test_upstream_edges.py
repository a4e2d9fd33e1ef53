"""Upstream edges: a full upstream pool queues rather than times out; the writer outlives
rows SQLite refuses; error answers complete their row even when sending fails; a root path still
routes chat; upstream header bytes are relayed as sent (or left out when unsendable); long
upstream headers are fine; socks proxies are not mistaken for HTTP ones; a deep captured answer
is stored; an outer cancel is never swallowed by the disconnect watch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
from yarl import URL

from proxy.app import create_app
from proxy.server.disconnect_watch import DisconnectWatch
from proxy.settings import SettingsError, UpstreamSettings, settings_from_mapping
from proxy.store.sqlite import Store
from proxy.upstream.openai import UpstreamClient, _env_proxy, relay_headers, upstream_api_key
from proxy.upstream.usage import usage_fields
from tests.conftest import in_process, proxy_settings
from tests.support.asgi import chat_scope
from tests.support.edge_upstream import Reply
from tests.support.factories import assistant, chat_completion, request, user


@pytest.fixture
async def one_connection() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient(max_connections=1)
    yield c
    await c.aclose()


async def test_a_full_pool_queues_requests_past_the_connect_timeout(edge, one_connection) -> None:
    edge.reply = Reply(header_delay_s=0.6)
    target = UpstreamSettings(name="edge", base_url=edge.base_url, connect_timeout_s=0.2)
    started = time.monotonic()
    results = await asyncio.gather(
        *(one_connection.chat(target, request(user("hi")), {}, None) for _ in range(2))
    )
    assert [r.status for r in results] == [200, 200]
    assert time.monotonic() - started >= 1.1  # the second waited for the one connection


async def test_the_writer_outlives_values_sqlite_refuses(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"), batch_window_s=0.0)
    await store.open()
    try:
        await store.insert_request({"id": "a", "created_at": 1.0, "prompt_tokens": 2**64})
        await store.flush()
        await store.insert_request({"id": "b", "created_at": 2.0, "cached_tokens": 1})
        await store.finish_request("b", {"status": 200})
        await asyncio.wait_for(store.flush(), 2)
        assert store.write_errors == 1
        assert (await store.get_request("b"))["status"] == 200
    finally:
        await store.close()


async def test_a_row_breaking_last_in_its_batch_is_the_only_one_counted(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"), batch_window_s=0.05)
    await store.open()
    try:
        await store.insert_request({"id": "dup", "created_at": 0.0})
        await store.flush()
        for rid in ("a", "b", "c", "dup"):
            await store.insert_request({"id": rid, "created_at": 1.0})
        await store.flush()
        assert store.write_errors == 1
        assert len(await store.list_requests()) == 4
    finally:
        await store.close()


def test_usage_counts_outside_an_integer_column_are_not_logged_as_counts() -> None:
    fields = usage_fields(
        {
            "prompt_tokens": 2**64,
            "completion_tokens": "7",
            "prompt_tokens_details": {"cached_tokens": [5]},
        }
    )
    assert (fields["prompt_tokens"], fields["completion_tokens"], fields["cached_tokens"]) == (
        None,
        None,
        0,
    )
    assert fields["usage"]["prompt_tokens"] == 2**64  # kept as sent, in the JSON column


async def test_an_error_answer_that_cannot_be_sent_still_completes_its_row(tmp_path: Path) -> None:
    settings = proxy_settings("http://127.0.0.1:9/v1")  # nothing listens: 502
    async with in_process(settings, str(tmp_path / "db")) as client:
        app = client.app  # type: ignore[attr-defined]
        body = orjson.dumps(request(user("hi")))
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop()
            await asyncio.sleep(3600)

        async def send(message):
            raise OSError("the client's socket broke")

        with pytest.raises(OSError):
            await app(chat_scope(app), receive, send)
        store = app.state.services.store
        await store.flush()
        (row,) = await store.list_requests()
        assert row["status"] == 502
        assert app.state.services.observers is not None


async def test_chat_routes_under_a_root_path(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json({"id": "c", "object": "chat.completion", "choices": []})
    app = create_app(proxy_settings(edge.base_url), db_path=str(tmp_path / "db"), strict=True)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, root_path="/llm")
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            r = await client.post(
                "/llm/v1/chat/completions",
                content=orjson.dumps(request(user("hi"))),
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 200 and r.json()["id"] == "c"


def test_upstream_header_bytes_are_relayed_as_sent_or_left_out() -> None:
    euro = "req-€42".encode()
    out = relay_headers(
        [
            (b"X-Request-Id", euro),
            (b"openai-model", b"caf\xe9"),
            (b"x-ratelimit-remaining", b"1\x7f"),
            (b"x-ratelimit-limit", b"a\x01b"),
            (b"set-cookie", b"s=1"),
        ]
    )
    assert out["x-request-id"].encode("latin-1") == euro
    assert out["openai-model"].encode("latin-1") == b"caf\xe9"
    assert set(out) == {"x-request-id", "openai-model"}


async def test_an_upstream_answer_with_a_utf8_header_reaches_the_client(
    tmp_path: Path, edge
) -> None:
    edge.reply = Reply(
        # UTF-8 bytes on the wire (the edge server writes header text as latin-1)
        headers=[
            ("content-type", "application/json"),
            ("x-request-id", "req-€42".encode().decode("latin-1")),
        ],
        body=b'{"id": "c"}',
    )
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi")))
        assert r.status_code == 200
        assert r.headers.raw[[k for k, _ in r.headers.raw].index(b"x-request-id")][1] == (
            "req-€42".encode()
        )


async def test_long_upstream_headers_are_accepted(edge, one_connection) -> None:
    edge.reply = Reply(
        headers=[("content-type", "application/json"), ("x-trace", "t" * 20_000)],
        body=b'{"id": "c"}',
    )
    target = UpstreamSettings(name="edge", base_url=edge.base_url)
    r = await one_connection.chat(target, request(user("hi")), {}, None)
    assert r.status == 200 and r.body == b'{"id": "c"}'


def test_a_socks_proxy_in_the_environment_is_not_used_as_an_http_one(monkeypatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert _env_proxy(URL("https://api.example.com/v1/chat/completions")) == (None, None)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    proxy, _ = _env_proxy(URL("https://api.example.com/v1/chat/completions"))
    assert proxy == URL("http://proxy.internal:3128")


def test_a_key_from_a_secret_file_loses_its_newline(monkeypatch) -> None:
    monkeypatch.setenv("UP_KEY", "sk-abc\n")
    target = UpstreamSettings(name="u", base_url="http://x/v1", api_key_env="UP_KEY")
    assert upstream_api_key(target, {}, "keys") == "sk-abc"


async def test_a_deep_answer_is_captured_and_its_row_completed(tmp_path: Path, edge) -> None:
    deep = b'{"id": "c", "x": ' + b"[" * 300 + b"]" * 300 + b"}"
    edge.reply = Reply(headers=[("content-type", "application/json")], body=deep)
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi")))
        assert r.status_code == 200 and r.content == deep
        store = client.app.state.services.store  # type: ignore[attr-defined]
        await store.flush()
        (row,) = await store.list_requests()
        assert row["status"] == 200 and row["response_body"]


async def test_an_outer_cancel_is_not_swallowed_by_the_disconnect_watch() -> None:
    disconnected = asyncio.Event()

    async def receive():
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def request_task() -> None:
        async with DisconnectWatch(receive):
            await asyncio.sleep(3600)

    task = asyncio.create_task(request_task())
    await asyncio.sleep(0.01)
    task.cancel()  # e.g. the server shutting down
    disconnected.set()  # and the client leaving at the same moment
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_watch_alone_ends_the_request_quietly() -> None:
    async def receive():
        return {"type": "http.disconnect"}

    async def request_task() -> str:
        async with DisconnectWatch(receive):
            await asyncio.sleep(3600)
        return "returned"

    assert await asyncio.wait_for(request_task(), 2) == "returned"


@pytest.mark.parametrize("hours", [0.0001, 1e9, float("inf")])
def test_ui_session_hours_must_allow_a_login(hours: float) -> None:
    with pytest.raises(SettingsError):
        settings_from_mapping({"auth": {"ui_session_hours": hours}})


async def test_every_response_carries_a_request_id_and_overhead(tmp_path: Path, edge) -> None:
    edge.reply = Reply(header_delay_s=0.3, body=b'{"object": "list", "data": []}')
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        seen = set()
        for method, path in [
            ("GET", "/healthz"),
            ("GET", "/v1/models"),
            ("GET", "/no/such/path"),
            ("GET", "/v1/chat/completions"),  # 405
            ("GET", "/metrics"),
        ]:
            r = await client.request(method, path)
            assert r.headers["x-ctxproxy-request-id"].startswith("req_"), path
            seen.add(r.headers["x-ctxproxy-request-id"])
            overhead = float(r.headers["x-ctxproxy-overhead-ms"])
            if path == "/v1/models":  # the time before the upstream call, not its 0.3 s wait
                assert overhead < 250
        assert len(seen) == 5


def test_routes_are_memoised_per_model_name_within_a_bound() -> None:
    settings = settings_from_mapping(
        {
            "upstreams": [
                {"name": "claude", "match": ["anthropic/*"], "kind": "litellm"},
                {"name": "local", "match": ["llama-*"], "base_url": "http://x/v1"},
            ]
        }
    )
    for i in range(3_000):
        assert settings.upstream_for(f"llama-{i}").name == "local"  # type: ignore[union-attr]
        assert settings.upstream_for(f"anthropic/m{i}").name == "claude"  # type: ignore[union-attr]
        assert settings.upstream_for(f"gpt-{i}") is None
    routes = settings.__pydantic_private__["_routes"]  # type: ignore[index]
    assert len(routes[1]) <= 1024


def test_a_copy_with_other_upstreams_routes_by_its_own() -> None:
    """A copy's private values are its original's (pydantic copies them shallowly): the routes
    the original found must not answer for the copy's other upstreams."""
    settings = settings_from_mapping(
        {"upstreams": [{"name": "first", "match": ["*"], "base_url": "http://a/v1"}]}
    )
    assert settings.upstream_for("gpt-4o").name == "first"  # type: ignore[union-attr]
    other = UpstreamSettings(name="other", match=["*"], kind="openai", base_url="http://b/v1")
    copy = settings.model_copy(update={"upstreams": [other]})
    assert copy.upstream_for("gpt-4o").name == "other"  # type: ignore[union-attr]
    assert settings.upstream_for("gpt-4o").name == "first"  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_captured_answer_is_kept_to_its_bound(tmp_path: Path, edge, stream: bool) -> None:
    """With ``capture_payloads`` a streamed answer was kept whole in memory for as long as it
    lasted (an hour at most), then redacted whole on the event loop: the log keeps its first
    ``CAPTURE_MAX_BYTES`` and says how many more there were."""
    from proxy.server.log_fields import CAPTURE_MAX_BYTES

    event = (
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"' + b"x" * 4000 + b'"}}]}\n\n'
    )
    chunks = [event] * (CAPTURE_MAX_BYTES // len(event) + 200)  # about 2.8 MB
    total = sum(map(len, chunks)) + len(b"data: [DONE]\n\n")
    if stream:
        edge.reply = Reply(headers=[("content-type", "text/event-stream")],
                           chunks=[*chunks, b"data: [DONE]\n\n"])  # fmt: skip
    else:
        edge.reply = Reply(headers=[("content-type", "application/json")],
                           body=b"".join([*chunks, b"data: [DONE]\n\n"]))  # fmt: skip
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=request(user("hi"), stream=stream))
        assert r.status_code == 200 and len(r.content) == total
        store = client.app.state.services.store  # type: ignore[attr-defined]
        await store.flush()
        (row,) = await store.list_requests()
    kept = row["response_body"]
    assert len(kept) < CAPTURE_MAX_BYTES + 200
    assert kept.endswith(f"[ctxproxy: {total - CAPTURE_MAX_BYTES} more bytes not captured]")


async def test_captured_request_bodies_are_kept_to_their_bound(tmp_path: Path, edge) -> None:
    """The request and forwarded bodies were captured whole: a 30 MB body dense in secrets'
    names held a worker three minutes being redacted for the log (two tenants, both workers),
    and the log grew by every body. Their strings now hold ``CAPTURE_MAX_BYTES`` in all, the
    JSON shape kept (the page's diff reads the messages), what was cut noted."""
    from proxy.server.capture_bound import CAPTURE_MAX_BYTES

    edge.reply = Reply.json(chat_completion("ok"))
    dense = "password " * (CAPTURE_MAX_BYTES // 3)  # 6 MiB
    body = request(user("first words"), assistant("noted"), user(dense), user("last words"))
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=body)
        assert r.status_code == 200
        store = client.app.state.services.store  # type: ignore[attr-defined]
        await store.flush()
        (row,) = await store.list_requests()
    assert len(row["forwarded_body"]) < CAPTURE_MAX_BYTES + 4096  # (the dense turn pruned)
    kept = orjson.loads(row["request_body"])
    assert len(row["request_body"]) < CAPTURE_MAX_BYTES + 4096
    texts = [m["content"] for m in kept["messages"]]
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant", "user", "user"]
    assert texts[0] == "first words" and texts[1] == "noted" and texts[3] == "last words"
    shown = CAPTURE_MAX_BYTES - len("first words") - len("noted") - len("gpt-4o") - 2 * len("user")
    shown -= len("assistant")  # the roles and the model are strings before it
    left = len(dense) - shown
    assert texts[2] == dense[:shown] + f"[ctxproxy: {left} more characters not captured]"
