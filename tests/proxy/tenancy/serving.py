"""The proxy the tenancy tests talk to: its settings (passthrough or keys mode, SQLite or
PostgreSQL, history restore on), a scripted upstream's answer in each protocol's shape, and a
client that returns, with each answer, the bytes the upstream received for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from proxy.settings import Settings, settings_from_mapping
from tests.proxy.tenancy.conversations import ENDPOINTS, credentials, notes_hold
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion

UPSTREAM_KEY_ENV = "CTXPROXY_TENANCY_UPSTREAM_KEY"
KEYS = "ka,kb"  # CTXPROXY_KEYS in keys mode; in passthrough, the two clients' provider keys
KEY_A, KEY_B = KEYS.split(",")

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
}


def reply_for(proto: str) -> Reply:
    """What the upstream answers a request of ``proto``."""
    if proto == "messages":
        return Reply.json(anthropic_message())
    if proto == "responses":
        return Reply.json(RESPONSE)
    return Reply.json(chat_completion())


def tenancy_settings(
    edge: EdgeUpstream, mode: str, store_url: str | None = None, **overrides: Any
) -> Settings:
    """Claude models to ``edge`` as Anthropic's API, the rest to it as OpenAI's; history restore
    on (the path that puts a session's stored turns into a request); in keys mode a server key
    for every upstream (the client's key is the proxy key, never forwarded)."""
    server_key = {"api_key_env": UPSTREAM_KEY_ENV} if mode == "keys" else {}
    claude = {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url}
    data: dict[str, Any] = {
        "upstreams": [
            {**claude, **server_key},
            {"name": "openai", "match": ["*"], "base_url": edge.base_url, **server_key},
        ],
        "pipeline": {"on_rule_error": "fail"},
        "auth": {"mode": mode},
        "memory": {"restore_history": True},
    }
    if store_url:
        data["store"] = {"url": store_url}
    data.update(overrides)
    return settings_from_mapping(data)


class Served:
    """A proxy served on loopback in front of ``edge``; ``post`` returns the answer and the bytes
    the upstream received for it."""

    def __init__(self, url: str, edge: EdgeUpstream, label: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30)
        self.edge = edge
        self.label = label

    def post(
        self, proto: str, body: dict[str, Any], key: str, headers: dict[str, str] | None = None
    ) -> tuple[httpx.Response, bytes]:
        self.edge.reply = reply_for(proto)
        before = len(self.edge.seen)
        sent = {"content-type": "application/json", **credentials(proto, key), **(headers or {})}
        r = self.client.post(ENDPOINTS[proto], content=orjson.dumps(body), headers=sent)
        assert r.status_code == 200, (self.label, proto, r.status_code, r.text)
        assert len(self.edge.seen) == before + 1, "not forwarded exactly once"
        seen = self.edge.seen[-1]
        if self.label.endswith("keys"):  # a proxy key is never forwarded: the server's key is
            assert seen.header("authorization") in (None, "Bearer sk-upstream")
            assert seen.header("x-api-key") in (None, "sk-upstream")
        assert notes_hold(seen.body), seen.body.decode()
        return r, seen.body


@contextmanager
def passthrough_served(db_dir: Path, upstream: EdgeUpstream) -> Iterator[tuple[str, Any]]:
    """The proxy in passthrough before ``upstream``, served on loopback: its URL and its app."""
    from proxy.app import create_app
    from tests.support.live import serve_in_thread, stop

    app = create_app(tenancy_settings(upstream, "passthrough"), db_path=str(db_dir / "db"))
    server, base = serve_in_thread(app)
    try:
        yield base, app
    finally:
        stop(server)
