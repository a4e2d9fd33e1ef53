"""The optional resolver model: when the rules abstain (two folders made by one `mkdir a b`), the
proxy asks a model through litellm — here the fake upstream on loopback — and the forwarded request
names the folder it picked. Its failure never fails the request; its answers are cached."""

from __future__ import annotations

import os
from typing import Any

import httpx

from proxy.rewrite.resolver import parse_pick
from tests.conftest import proxy_settings
from tests.support.factories import assistant, call, result, user
from tests.support.live import free_port

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HISTORY = [
    user("make two folders for the project"),
    assistant(None, call("call_1", "bash", command="mkdir ~/proj/alpha ~/proj/beta")),
    result("call_1", "\n[Command finished with exit code 0]"),
    assistant("Created ~/proj/alpha and ~/proj/beta."),
    user("delete the folder you just created, the second one"),
]


def resolver_settings(fake_base: str, resolver_base: str) -> Any:
    return proxy_settings(
        fake_base,
        resolver={
            "enabled": True,
            "model": "openai/gpt-4o-mini",
            "base_url": resolver_base,
            "api_key_env": None,
            "timeout_s": 5,
        },
    )


def send(proxy, session: str = "resolver-1") -> httpx.Response:  # type: ignore[no-untyped-def]
    r = httpx.post(
        proxy.base_url + "/chat/completions",
        timeout=30,
        json={"model": "gpt-4o", "messages": HISTORY},
        headers={"x-session-id": session, "authorization": "Bearer sk-test"},
    )
    assert r.status_code == 200, r.text
    return r


def test_resolver_model_settles_an_ambiguous_reference(live_proxy, fake_upstream) -> None:
    proxy = live_proxy(resolver_settings(fake_upstream.base_url, fake_upstream.base_url))
    # The same fake answers the resolver call and the agent's request.
    fake_upstream.script.content = '{"path": "~/proj/beta", "confidence": 0.9}'
    r = send(proxy)
    asked, forwarded = fake_upstream.requests[-2], fake_upstream.requests[-1]
    assert asked["model"] == "gpt-4o-mini"
    assert "~/proj/alpha" in asked["messages"][-1]["content"]  # the candidates were offered
    assert "means the folder ~/proj/beta" in forwarded["messages"][-1]["content"]
    row = proxy.row(r.headers["x-ctxproxy-request-id"])
    (ref,) = row["report"]["references"]
    assert ref["entity"]["path"] == "~/proj/beta" and ref["resolved_by"] == "resolver_model"
    assert row["report"]["resolver"]["asked"] == 1
    # Same question again: answered from the cache, the model is not called.
    n = len(fake_upstream.requests)
    r2 = send(proxy)
    assert len(fake_upstream.requests) == n + 1
    assert proxy.row(r2.headers["x-ctxproxy-request-id"])["report"]["resolver"]["cached"] == 1


def test_a_pick_outside_the_candidates_is_ignored(live_proxy, fake_upstream) -> None:
    proxy = live_proxy(resolver_settings(fake_upstream.base_url, fake_upstream.base_url))
    fake_upstream.script.content = '{"path": "/etc", "confidence": 1.0}'
    r = send(proxy, "resolver-2")
    assert "means the folder" not in str(fake_upstream.last["messages"][-1]["content"])
    (ref,) = proxy.row(r.headers["x-ctxproxy-request-id"])["report"]["references"]
    assert ref["entity"] is None and ref["abstained"] == "ambiguous"


def test_resolver_failure_never_fails_the_request(live_proxy, fake_upstream) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proxy = live_proxy(resolver_settings(fake_upstream.base_url, dead))
    r = send(proxy, "resolver-3")
    row = proxy.row(r.headers["x-ctxproxy-request-id"])
    assert row["status"] == 200
    assert row["report"]["resolver"]["errors"]
    (ref,) = row["report"]["references"]
    assert ref["entity"] is None  # the abstention stands


def test_resolver_off_by_default(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    r = send(proxy, "resolver-4")
    assert len(fake_upstream.requests) == 1
    assert "resolver" not in proxy.row(r.headers["x-ctxproxy-request-id"])["report"]


def test_parse_pick() -> None:
    cands = ["~/a", "~/b"]
    assert parse_pick('sure: {"path": "~/b", "confidence": 0.8}', cands) == {
        "path": "~/b",
        "confidence": 0.8,
    }
    assert parse_pick('{"path": null, "confidence": 0.8}', cands) is None
    assert parse_pick('{"path": "~/c", "confidence": 0.8}', cands) is None
    assert parse_pick('{"path": "~/a", "confidence": 7}', cands) is None
    assert parse_pick("no json here", cands) is None
