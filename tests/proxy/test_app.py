"""Tier 2: the app in-process (ASGITransport) in front of a scripted upstream on loopback (the
network edge itself: the proxy's aiohttp client really connects, sends and reads)."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import Reply
from tests.support.factories import chat_completion, request, user

UPSTREAM = "http://upstream.test/v1"  # for requests that never reach an upstream


async def post(client: httpx.AsyncClient, body: object, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"content-type": "application/json", **headers}
    return await client.post("/v1/chat/completions", content=content, headers=headers)


async def test_healthz_and_models(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json({"object": "list", "data": [{"id": "m1"}]})
    settings = proxy_settings(edge.base_url)
    async with in_process(settings, str(tmp_path / "db")) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        models = (await client.get("/v1/models")).json()
        assert [m["id"] for m in models["data"]] == ["m1"]


async def test_models_lists_configured_names_without_catch_all(tmp_path: Path) -> None:
    settings = proxy_settings(
        UPSTREAM, upstreams=[{"name": "a", "match": ["gpt-4o", "claude-*"], "base_url": UPSTREAM}]
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        models = (await client.get("/v1/models")).json()
        assert [m["id"] for m in models["data"]] == ["gpt-4o"]


async def test_model_not_served_is_404(tmp_path: Path) -> None:
    settings = proxy_settings(
        UPSTREAM, upstreams=[{"name": "a", "match": ["gpt-*"], "base_url": UPSTREAM}]
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await post(client, request(user("hi"), model="llama-3"))
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "model_not_found"
        rows = await log_rows(client)
        assert rows[0]["status"] == 404 and rows[0]["model"] == "llama-3"


async def test_body_over_limit_is_413(tmp_path: Path) -> None:
    settings = proxy_settings(UPSTREAM, limits={"max_body_bytes": 1000})
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await post(client, request(user("x" * 2000)))
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "request_too_large"
        assert (await log_rows(client))[0]["status"] == 413


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"null",
        b'{"model": 5, "messages": []}',
        b'{"model": "m", "messages": {}}',
        b'{"model": "m", "messages": [5]}',
        b'{"model": "m", "messages": [{"role": "user", "content": 5}]}',
        b'{"model": "m", "messages": [{"role": "user"}], "tools": "x"}',
        b"\xff\xfe",
        b'{"model": "m", "messages": [{"role": "assistant", "tool_calls": "x"}]}',
    ],
)
async def test_malformed_bodies_never_500(tmp_path: Path, body: bytes) -> None:
    async with in_process(proxy_settings(UPSTREAM), str(tmp_path / "db")) as client:
        r = await post(client, body)
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "invalid_request_error"


async def test_upstream_status_and_body_pass_through(tmp_path: Path, edge) -> None:
    err = {"error": {"message": "rate limited", "type": "requests", "code": "rate_limit"}}
    edge.reply = Reply.json(err, 429, retry_after="3", x_ratelimit_remaining_requests="0")
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await post(client, request(user("hi")))
        assert r.status_code == 429
        assert r.json() == err
        assert r.headers["retry-after"] == "3"
        assert r.headers["x-ratelimit-remaining-requests"] == "0"


async def test_upstream_timeout_is_504(tmp_path: Path, edge) -> None:
    edge.reply.header_delay_s = 3  # no answer within the upstream's timeout
    spec = {"name": "slow", "match": ["*"], "base_url": edge.base_url, "timeout_s": 0.2}
    settings = proxy_settings(edge.base_url, upstreams=[spec])
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await post(client, request(user("hi")))
        assert r.status_code == 504
        assert r.json()["error"]["code"] == "upstream_timeout"
        assert (await log_rows(client))[0]["error_type"] == "upstream_timeout"


async def test_keys_mode_requires_a_proxy_key_and_uses_upstream_key(
    tmp_path: Path, edge, monkeypatch
) -> None:
    monkeypatch.setenv("CTXPROXY_KEYS", "proxy-key-1,proxy-key-2")
    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream-secret-999999")
    base = edge.base_url
    settings = proxy_settings(
        base,
        auth={"mode": "keys"},
        upstreams=[{"name": "u", "match": ["*"], "base_url": base, "api_key_env": "UPSTREAM_KEY"}],
        store={"capture_payloads": True},
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await post(client, request(user("hi")))
        assert r.status_code == 401
        r = await post(client, request(user("hi")), authorization="Bearer wrong")
        assert r.status_code == 401
        r = await post(client, request(user("hi")), authorization="Bearer proxy-key-2")
        assert r.status_code == 200
        (seen,) = edge.seen  # the refused requests never went upstream
        assert seen.header("authorization") == "Bearer sk-upstream-secret-999999"
        rows = await log_rows(client)
        dump = orjson.dumps(rows).decode()
        assert "proxy-key-2" not in dump and "sk-upstream-secret" not in dump


async def test_captured_payloads_are_redacted(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(chat_completion("done"))
    settings = proxy_settings(edge.base_url, store={"capture_payloads": True})
    body = request(
        user("my key is sk-abcdefghijklmnop1234 and AKIAABCDEFGHIJKLMNOP"),
        metadata={"api_key": "hunter2hunter2"},
    )
    async with in_process(settings, str(tmp_path / "db")) as client:
        r = await post(client, body, authorization="Bearer sk-client-key-0000000")
        assert r.status_code == 200
        row = (await log_rows(client))[0]
        for secret in (
            "sk-abcdefghijklmnop1234",
            "AKIAABCDEFGHIJKLMNOP",
            "hunter2hunter2",
            "sk-client-key",
        ):
            assert secret not in orjson.dumps(row).decode()
        assert "[REDACTED]" in row["request_body"]
        assert "done" in row["response_body"]


async def test_payloads_not_captured_by_default(tmp_path: Path, edge) -> None:
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        await post(client, request(user("hello there")))
        row = (await log_rows(client))[0]
        assert row["request_body"] is None and row["response_body"] is None
        assert row["tokens_before"] > 0


async def test_client_request_is_forwarded_unchanged_when_rules_have_nothing_to_do(
    tmp_path: Path, edge
) -> None:
    body = request(
        {"role": "system", "content": "sys"},
        user("plain question"),
        temperature=0.2,
        max_tokens=5,
        metadata={"x": 1},
    )
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        await post(client, body)
        assert edge.last.json() == body


@pytest.mark.parametrize(
    ("headers", "extra", "expected"),
    [
        ({"x-session-id": "abc"}, {"metadata": {"session_id": "meta"}, "user": "u"}, "abc"),
        ({}, {"metadata": {"session_id": "meta"}, "user": "u"}, "meta"),
        ({}, {"user": "u"}, "user:u"),
    ],
)
async def test_session_key_precedence(tmp_path, edge, headers, extra, expected) -> None:
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await post(client, request(user("hi"), **extra), **headers)
        assert r.headers["x-ctxproxy-session-id"] == expected


async def test_hash_session_is_stable_across_turns(tmp_path, edge) -> None:
    sys = {"role": "system", "content": "s"}
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        a = await post(client, request(sys, user("task one")))
        b = await post(
            client,
            request(sys, user("task one"), {"role": "assistant", "content": "x"}, user("more")),
        )
        c = await post(client, request(sys, user("task two")))
        assert a.headers["x-ctxproxy-session-id"] == b.headers["x-ctxproxy-session-id"]
        assert a.headers["x-ctxproxy-session-id"] != c.headers["x-ctxproxy-session-id"]
        # prefix_reuse is measured against the previous request of the same session
        rows = await log_rows(client)
        second = next(r for r in rows if r["id"] == b.headers["x-ctxproxy-request-id"])
        assert 0 < second["report"]["prefix_reuse"] < 1
