"""The aiohttp upstream client against a real socket-level upstream: one pooled connection for
sequential requests, an abandoned stream closes its connection, timeouts and refusals map to
504/502 (also mid-stream, as an OpenAI-shaped error event), no cookie is replayed, no header of
aiohttp's own reaches the upstream, nothing is decompressed or redirected, env proxies apply."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from proxy.errors import UpstreamFailed, UpstreamTimeout, UpstreamUnreachable
from proxy.settings import UpstreamSettings
from proxy.upstream.openai import UpstreamClient
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import Reply, sse
from tests.support.factories import request, user
from tests.support.live import free_port

EVENT_STREAM = [("content-type", "text/event-stream")]
CHUNK = {"choices": [{"index": 0, "delta": {"content": "first"}}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
KEY = "sk-test-secret-key-0123456789"


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    c = UpstreamClient()
    yield c
    await c.aclose()


def upstream(base_url: str, **extra: float) -> UpstreamSettings:
    return UpstreamSettings(name="edge", base_url=base_url, **extra)


def settings_for(base_url: str, **extra: float):  # type: ignore[no-untyped-def]
    spec = {"name": "edge", "match": ["*"], "base_url": base_url, **extra}
    return proxy_settings(base_url, upstreams=[spec])


def body(stream: bool = False) -> dict:
    return request(user("hi"), stream=stream)


async def test_sequential_requests_share_one_connection(edge, client) -> None:
    for _ in range(10):
        r = await client.chat(upstream(edge.base_url), body(), {}, None)
        assert r.status == 200 and r.body == edge.reply.body
    edge.reply = Reply(headers=EVENT_STREAM, chunks=sse(CHUNK, USAGE))
    for _ in range(10):
        r = await client.chat(upstream(edge.base_url), body(stream=True), {}, None)
        assert r.chunks is not None
        got = b"".join([c async for c in r.chunks])
        await r.close()
        assert got == b"".join(edge.reply.chunks or [])
    status, _ = await client.models(upstream(edge.base_url), None)
    assert status == 200
    assert len(edge.seen) == 21
    assert edge.connections == 1


async def test_an_abandoned_stream_closes_its_connection(edge, client) -> None:
    edge.reply = Reply(headers=EVENT_STREAM, chunks=sse(CHUNK, USAGE), after_first_chunk="stall")
    r = await client.chat(upstream(edge.base_url), body(stream=True), {}, None)
    assert r.chunks is not None
    assert b"first" in await anext(aiter(r.chunks))
    await r.close()
    assert await asyncio.to_thread(edge.hung_up_mid_stream.wait, 5)  # the loop must run
    edge.reply = Reply()
    await client.chat(upstream(edge.base_url), body(), {}, None)
    assert edge.connections == 2  # the abandoned connection was not put back in the pool


def test_client_gone_mid_stream_stops_the_upstream(edge, live_proxy) -> None:
    edge.reply = Reply(headers=EVENT_STREAM, chunks=sse(CHUNK, USAGE), after_first_chunk="stall")
    proxy = live_proxy(settings_for(edge.base_url))
    with (
        httpx.Client(timeout=10) as c,
        c.stream("POST", proxy.base_url + "/chat/completions", json=body(stream=True)) as r,
    ):
        request_id = r.headers["x-ctxproxy-request-id"]
        assert b"first" in next(r.iter_raw())
    assert edge.hung_up_mid_stream.wait(10)
    row = proxy.row(request_id, timeout=10)
    assert row["client_disconnected"] == 1 and row["status"] == 200


async def test_read_timeout_mid_stream_ends_with_an_error_event(edge, tmp_path: Path) -> None:
    edge.reply = Reply(headers=EVENT_STREAM, chunks=sse(CHUNK, USAGE), after_first_chunk="stall")
    async with in_process(settings_for(edge.base_url, timeout_s=0.3), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=body(stream=True))
        assert r.status_code == 200
        events = [e for e in r.content.split(b"\n\n") if e]
        assert b"first" in events[0]
        error = orjson.loads(events[-1].removeprefix(b"data: "))["error"]
        assert error["code"] == "upstream_timeout" and error["type"]
        (row,) = await log_rows(c)
        assert row["status"] == 200 and row["error_type"] == "upstream_timeout"
        assert row["ttfb_ms"] is not None and row["client_disconnected"] == 0
    assert await asyncio.to_thread(
        edge.hung_up_mid_stream.wait, 5
    )  # the timed-out connection is closed, not pooled


async def test_upstream_breaking_off_mid_stream(edge, client) -> None:
    edge.reply = Reply(headers=EVENT_STREAM, chunks=sse(CHUNK, USAGE), after_first_chunk="break")
    r = await client.chat(upstream(edge.base_url), body(stream=True), {}, KEY)
    assert r.chunks is not None
    received = []
    with pytest.raises(UpstreamUnreachable) as info:
        async for chunk in r.chunks:
            received.append(chunk)
    await r.close()
    assert b"first" in b"".join(received)
    assert "mid-stream" in info.value.message and KEY not in info.value.message


async def test_connection_refused_is_502(tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    async with in_process(settings_for(base), str(tmp_path / "db")) as c:
        r = await c.post(
            "/v1/chat/completions", json=body(), headers={"authorization": f"Bearer {KEY}"}
        )
        assert r.status_code == 502
        assert r.json()["error"]["code"] == "upstream_connection_error"
        assert KEY not in r.text
        (row,) = await log_rows(c)
        assert row["status"] == 502 and row["error_type"] == "upstream_connection_error"


async def test_slow_response_headers_are_504(edge, tmp_path: Path) -> None:
    edge.reply = Reply(header_delay_s=3)
    async with in_process(settings_for(edge.base_url, timeout_s=0.3), str(tmp_path / "db")) as c:
        started = time.perf_counter()
        r = await c.post("/v1/chat/completions", json=body())
        assert time.perf_counter() - started < 2.5
        assert r.status_code == 504 and r.json()["error"]["code"] == "upstream_timeout"
        (row,) = await log_rows(c)
        assert row["status"] == 504 and row["error_type"] == "upstream_timeout"


async def test_slow_body_is_504(edge, client) -> None:
    edge.reply = Reply(chunks=[b'{"partial": ', b"1}"], after_first_chunk="stall")
    with pytest.raises(UpstreamTimeout):
        await client.chat(upstream(edge.base_url, timeout_s=0.3), body(), {}, None)


async def test_upstream_cookies_are_never_replayed(edge, client) -> None:
    edge.reply = Reply(
        headers=[("content-type", "application/json"), ("set-cookie", "sid=client-a; Path=/")]
    )
    base = edge.base_url.replace("127.0.0.1", "localhost")  # a cookie jar ignores IP hosts
    await client.chat(upstream(base), body(), {}, "key-a")
    await client.chat(upstream(base), body(), {}, "key-b")
    await client.models(upstream(base), "key-b")
    assert [s.header("cookie") for s in edge.seen] == [None, None, None]
    assert edge.seen[2].header("authorization") == "Bearer key-b"


async def test_the_upstream_sees_only_the_headers_we_send(edge, client) -> None:
    await client.chat(upstream(edge.base_url), body(), {}, None)
    await client.chat(
        upstream(edge.base_url),
        body(),
        {"user-agent": "my-agent/1.0", "openai-beta": "assistants=v2", "cookie": "x=1"},
        KEY,
    )
    await client.models(upstream(edge.base_url), KEY)
    bare, forwarded, models = edge.seen
    assert bare.names == {"host", "content-type", "accept-encoding", "content-length"}
    assert bare.header("accept-encoding") == "identity"
    assert bare.header("content-type") == "application/json"
    assert orjson.loads(bare.body) == body()
    assert forwarded.names == bare.names | {"user-agent", "openai-beta", "authorization"}
    assert forwarded.header("user-agent") == "my-agent/1.0"
    assert forwarded.header("authorization") == f"Bearer {KEY}"
    assert "user-agent" not in models.names and "accept" not in models.names


async def test_a_client_user_agent_passes_through_the_app(edge, tmp_path: Path) -> None:
    async with in_process(settings_for(edge.base_url), str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=body(), headers={"user-agent": "agent/2"})
        assert r.status_code == 200
    (seen,) = edge.seen
    assert seen.header("user-agent") == "agent/2"
    assert seen.header("accept-encoding") == "identity" and "accept" not in seen.names


async def test_redirects_are_not_followed(edge, client) -> None:
    """Nor relayed: the request carries the client's key, and a client of these APIs has no use
    for a redirect it cannot follow (its ``location`` is not relayed)."""
    edge.reply = Reply(status=307, headers=[("location", edge.base_url + "/elsewhere")], body=b"")
    with pytest.raises(UpstreamFailed, match="answered HTTP 307") as raised:
        await client.chat(upstream(edge.base_url), body(), {}, KEY)
    assert raised.value.status == 502
    assert len(edge.seen) == 1


async def test_compressed_bodies_are_relayed_decoded(edge, client) -> None:
    """Asked for identity, an upstream may compress anyway: the proxy reads the answer (usage,
    error events), so it decodes it, and the client gets it without ``content-encoding``."""
    plain = b'{"id": "c1"}'
    raw = gzip.compress(plain)
    edge.reply = Reply(
        headers=[("content-type", "application/json"), ("content-encoding", "gzip")], body=raw
    )
    r = await client.chat(upstream(edge.base_url), body(), {}, None)
    assert r.body == plain
    assert "content-encoding" not in r.headers
    edge.reply = Reply(
        headers=[*EVENT_STREAM, ("content-encoding", "gzip")], chunks=[raw[:5], raw[5:]]
    )
    r = await client.chat(upstream(edge.base_url), body(stream=True), {}, None)
    assert r.chunks is not None
    assert b"".join([c async for c in r.chunks]) == plain  # de-chunked and decompressed
    assert "content-encoding" not in r.headers
    await r.close()


async def test_upstream_error_status_is_read_whole(edge, client) -> None:
    err = b'{"error": {"message": "slow down"}}'
    edge.reply = Reply(
        status=429,
        headers=[
            *EVENT_STREAM,
            ("retry-after", "3"),
            ("x-ratelimit-remaining", "0"),
            ("x-should-retry", "false"),  # the SDKs obey it over their own rule
        ],
        body=err,
    )
    r = await client.chat(upstream(edge.base_url), body(stream=True), {}, None)
    assert (r.status, r.body, r.chunks) == (429, err, None)
    assert r.headers == {
        "content-type": "text/event-stream",
        "retry-after": "3",
        "x-ratelimit-remaining": "0",
        "x-should-retry": "false",
    }


@pytest.fixture
def no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


async def test_http_proxy_from_the_environment_is_used(edge, client, no_env_proxy) -> None:
    no_env_proxy.setenv("HTTP_PROXY", edge.url)
    await client.chat(upstream("http://upstream.example/v1"), body(), {}, None)
    (seen,) = edge.seen
    assert seen.target == "http://upstream.example/v1/chat/completions"
    assert seen.header("host") == "upstream.example"


async def test_no_proxy_exempts_a_host(edge, client, no_env_proxy) -> None:
    no_env_proxy.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # would refuse
    no_env_proxy.setenv("NO_PROXY", "127.0.0.1")
    r = await client.chat(upstream(edge.base_url), body(), {}, None)
    assert r.status == 200 and edge.seen[0].target == "/v1/chat/completions"


async def test_aclose_without_a_request() -> None:
    await UpstreamClient().aclose()
