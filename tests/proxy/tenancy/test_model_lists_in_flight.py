"""A model list asked of an upstream (``GET /v1/models``, one model, Anthropic's and Gemini's
lists) holds an upstream connection as a model request does, so it counts among its principal's
requests in flight: past the bound it is answered 429 with ``retry-after`` in the asking client's
shape, unsent, and a tenant's many lists waiting on a slow upstream leave another tenant's request
its connection."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.app import create_app
from proxy.settings import settings_from_mapping
from tests.proxy.tenancy.test_in_flight import post, principal_of, served_soon, settled
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop

CONNECTIONS = 4  # so each principal may have 2 in flight
SLOW_S = 3.0
LISTED = {"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}


@pytest.fixture
def proxy(tmp_path: Path, upstream: EdgeUpstream) -> Iterator[tuple[str, EdgeUpstream, Any]]:
    """Passthrough: Claude models to ``upstream`` as Anthropic's API, Gemini's as Gemini's, the
    rest as OpenAI's; four upstream connections."""
    claude = {"name": "claude", "kind": "anthropic", "match": ["claude-*"]}
    gemini = {"name": "gemini", "kind": "gemini", "match": ["gemini-*"]}
    settings = settings_from_mapping(
        {
            "upstreams": [
                {**claude, "base_url": upstream.url},
                {**gemini, "base_url": upstream.url},
                {"name": "openai", "match": ["*"], "base_url": upstream.base_url},
            ],
            "auth": {"mode": "passthrough"},
            "limits": {"upstream_max_connections": CONNECTIONS},
        }
    )
    app = create_app(settings, db_path=str(tmp_path / "db"))
    server, base = serve_in_thread(app)
    try:
        yield base, upstream, app
    finally:
        stop(server)


ASKED = [
    ("/v1/models", {"authorization": "Bearer sk-a"}),
    ("/v1/models/gpt-4o", {"authorization": "Bearer sk-a"}),
    ("/v1/models", {"x-api-key": "sk-a", "anthropic-version": "2023-06-01"}),
    ("/v1/models/claude-x", {"x-api-key": "sk-a", "anthropic-version": "2023-06-01"}),
    ("/v1beta/models", {"x-goog-api-key": "sk-a"}),
    ("/v1beta/models/gemini-2.5-pro", {"x-goog-api-key": "sk-a"}),
]


@pytest.mark.parametrize(("path", "headers"), ASKED)
def test_a_model_list_counts_among_the_requests_in_flight(
    proxy: tuple[str, EdgeUpstream, Any], path: str, headers: dict[str, str]
) -> None:
    base, edge, app = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    assert post(base, "sk-a").status_code == 200  # a key the upstream accepted: its own lane
    services = app.state.services
    lane = services.principals.lane(principal_of(app, "sk-a"))
    held = [services.in_flight.enter(lane) for _ in range(CONNECTIONS // 2)]
    seen = len(edge.seen)
    try:
        refused = httpx.get(base + path, headers=headers)
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        assert "max_in_flight_per_principal" in refused.text
        assert len(edge.seen) == seen  # not asked upstream
    finally:
        for ticket in held:
            services.in_flight.leave(ticket)
    edge.reply = Reply.json(LISTED)
    assert httpx.get(base + path, headers=headers).status_code == 200
    assert settled(services.in_flight, lane, (0, 0)) == (0, 0)  # its place given back


def test_a_tenants_slow_model_lists_never_hold_another_tenants_request(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    base, edge, _ = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    for key in ("sk-a", "sk-b"):  # tenants whose keys the upstream has accepted
        assert post(base, key).status_code == 200
    slow = Reply.json(LISTED)
    slow.header_delay_s = SLOW_S
    edge.replies = [slow for _ in range(CONNECTIONS)]
    seen = len(edge.seen)
    codes: list[int] = []
    headers = {"authorization": "Bearer sk-a"}
    listing = [
        threading.Thread(
            target=lambda: codes.append(
                httpx.get(base + "/v1/models", headers=headers, timeout=30).status_code
            )
        )
        for _ in range(CONNECTIONS)
    ]
    for thread in listing:
        thread.start()
    deadline = time.monotonic() + SLOW_S
    while len(edge.seen) < seen + CONNECTIONS // 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # the rest of A's lists arrive (and are refused, or queue)
    edge.replies.clear()

    served_soon(base, "sk-b")  # not behind A's model lists
    for thread in listing:
        thread.join()
    assert sorted(codes) == [200] * (CONNECTIONS // 2) + [429] * (CONNECTIONS // 2)
