"""In passthrough a made-up key is a new principal for free, and the rules run (its session's
state cached, its request remembered for the cache attribution) before the upstream refuses it.
The shared in-memory maps evict fairly, the principal holding most losing first; counted by
principal, 20 made-up keys holding one entry each made a real tenant holding two "the heaviest",
and its entries were evicted first (its next request paid a store read). A principal no upstream
has accepted is charged to its network's lane, as the in-flight bounds are (``Principals.lane``):
the made-up keys hold most together, and lose their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.principals import split_scoped
from tests.proxy.tenancy.serving import passthrough_served
from tests.support.edge_upstream import EdgeUpstream, Reply, Seen
from tests.support.factories import chat_completion

KNOWN = "sk-known"
BOUND = 8


def by_key(seen: Seen) -> Reply:
    """An upstream that knows one key: 200 to it, 401 to any other."""
    if seen.header("authorization") == f"Bearer {KNOWN}":
        return Reply.json(chat_completion("ok"))
    return Reply.json({"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}, 401)


@pytest.fixture
def served(tmp_path: Path, upstream: EdgeUpstream) -> Iterator[tuple[str, Any]]:
    upstream.choose = by_key
    try:
        with passthrough_served(tmp_path, upstream) as served:
            yield served
    finally:
        upstream.choose = None


def post(base: str, key: str, session: str) -> int:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"hello {session}"}]}
    headers = {"authorization": f"Bearer {key}", "x-session-id": session}
    headers["content-type"] = "application/json"
    url = base + "/v1/chat/completions"
    return httpx.post(url, content=orjson.dumps(body), headers=headers, timeout=60).status_code


def test_refused_made_up_keys_evict_their_own_entries_not_a_verified_tenants(
    served: tuple[str, Any],
) -> None:
    base, app = served
    services = app.state.services
    states = services.store._states._items
    ledger = services.engine.ledger._sessions
    states.max_entries = ledger.max_entries = BOUND
    assert post(base, KNOWN, "warm-up") == 200  # the upstream accepts it: verified
    for name in ("conv-1", "conv-2", "conv-3"):
        assert post(base, KNOWN, name) == 200
    for i in range(3 * BOUND):
        assert post(base, f"sk-made-up-{i}", f"s{i}") == 401
    known = services.principals.of({"authorization": f"Bearer {KNOWN}"})
    for kept in (states, ledger):
        mine = {split_scoped(key)[1] for key in kept if split_scoped(key)[0] == known}
        assert {"conv-1", "conv-2", "conv-3"} <= mine, sorted(mine)

