"""In passthrough a principal is any credential a client presents, made up or not, and the rules
run before the upstream refuses a made-up one. So what tenants share turn by turn (the worker
threads, the in-flight bounds) is shared by lane: a principal whose requests an upstream has
answered has its own, every other shares one. Ten made-up keys sending heavy bodies queue in that
one lane, not in ten, and a tenant the upstream knows keeps its turn; in keys mode every
principal has its own lane from the start."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.principals import UNVERIFIED, VERIFIED_PER_NETWORK, Principals, unverified_lane
from proxy.settings import AuthSettings
from tests.proxy.tenancy.conftest import tenancy_settings
from tests.proxy.tenancy.serving import passthrough_served
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop


def test_a_principal_has_its_own_lane_once_an_upstream_answered_it() -> None:
    passthrough = Principals(AuthSettings(mode="passthrough"), b"secret")
    a = passthrough.of({"authorization": "Bearer sk-a"})
    assert passthrough.lane(a) == UNVERIFIED
    passthrough.accepted(a)
    assert passthrough.lane(a) == a
    assert passthrough.lane(passthrough.of({"authorization": "Bearer sk-made-up"})) == UNVERIFIED
    keys = Principals(AuthSettings(mode="keys"), b"secret")
    assert keys.lane("alice") == "alice"


def test_unverified_principals_share_a_lane_by_their_clients_network() -> None:
    passthrough = Principals(AuthSettings(mode="passthrough"), b"secret")
    a = passthrough.of({"authorization": "Bearer sk-a"})
    lanes = {
        client: passthrough.lane(a, client)
        for client in (
            ("10.0.0.1", 5000),
            ("10.0.0.2", 5000),
            ("::ffff:10.0.0.1", 6000),  # an IPv4 client on a dual-stack socket
            ("2001:db8::1", 1),
            ("2001:db8::ffff:2", 2),  # the same /64
            ("2001:db8:0:1::1", 1),
            ("not an address", 1),
        )
    }
    assert list(lanes.values()) == [
        f"{UNVERIFIED}@10.0.0.1",
        f"{UNVERIFIED}@10.0.0.2",
        f"{UNVERIFIED}@10.0.0.1",
        f"{UNVERIFIED}@2001:db8::",
        f"{UNVERIFIED}@2001:db8::",
        f"{UNVERIFIED}@2001:db8:0:1::",
        UNVERIFIED,
    ]
    assert passthrough.lane(a, None) == UNVERIFIED  # no client known: the one lane
    passthrough.accepted(a)
    assert passthrough.lane(a, ("10.0.0.1", 5000)) == a


def test_one_network_has_at_most_so_many_lanes_of_its_own() -> None:
    """An upstream that checks no key (a local vLLM) answers every made-up key: 60 of them from
    one host each had a lane of its own, 480 requests in flight, and another tenant's request
    waited 19 s for an upstream connection. Past ``VERIFIED_PER_NETWORK`` a network's newly
    accepted principals share its lane; another network's are not held by them."""
    passthrough = Principals(AuthSettings(mode="passthrough"), b"secret")
    host, other = ("10.0.0.5", 4000), ("10.0.0.9", 4000)
    made_up = [passthrough.of({"authorization": f"Bearer sk-made-up-{i}"}) for i in range(40)]
    for principal in made_up:
        passthrough.accepted(principal, host)
    lanes = [passthrough.lane(p, host) for p in made_up]
    assert lanes[:VERIFIED_PER_NETWORK] == made_up[:VERIFIED_PER_NETWORK]
    assert set(lanes[VERIFIED_PER_NETWORK:]) == {unverified_lane(host)}
    real = passthrough.of({"authorization": "Bearer sk-real"})
    passthrough.accepted(real, other)
    assert passthrough.lane(real, other) == real


def heavy(tag: str) -> bytes:
    """A 1.1 MB conversation: its work runs in the worker threads."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for j in range(300):
        text = f"{tag}-{j} " + f"lorem ipsum dolor sit amet {j} " * 120
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": f"a{j}"}]
    return orjson.dumps({"model": "gpt-4o", "messages": messages})


@pytest.fixture
def served(tmp_path: Path, upstream: EdgeUpstream) -> Iterator[tuple[str, Any]]:
    with passthrough_served(tmp_path, upstream) as served:
        yield served


def post(base: str, key: str, body: bytes) -> int:
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    url = base + "/v1/chat/completions"
    return httpx.post(url, content=body, headers=headers, timeout=120).status_code


def test_made_up_keys_queue_in_one_lane(served: tuple[str, Any], upstream: EdgeUpstream) -> None:
    base, app = served
    upstream.reply = Reply.json(chat_completion("ok"))
    small = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    assert post(base, "sk-known", small) == 200  # the upstream answered: its own lane
    offload = app.state.services.engine.offload
    bodies = [heavy(f"m{i}") for i in range(10)]
    made_up = [
        threading.Thread(target=post, args=(base, f"sk-made-up-{i}", bodies[i])) for i in range(10)
    ]
    for thread in made_up:
        thread.start()
    time.sleep(0.5)  # their jobs queue
    known = threading.Thread(target=post, args=(base, "sk-known", heavy("known")))
    known.start()
    lanes: set[str] = set()
    while known.is_alive() or any(t.is_alive() for t in made_up):
        lanes |= set(offload.queued())
        time.sleep(0.01)
    known.join()
    made_up = unverified_lane(("127.0.0.1", 0))  # the loopback's unverified keys, all ten
    assert lanes and lanes <= {made_up, app.state.services.principals.lane(known_principal(app))}
    assert made_up in lanes


def known_principal(app: Any) -> str:
    return str(app.state.services.principals.of({"authorization": "Bearer sk-known"}))


def test_an_answer_with_the_servers_key_verifies_no_credential(
    tmp_path: Path, upstream: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Passthrough in front of an upstream called with the server's key: the upstream answers
    any made-up key, so its 200 gives none a lane of its own (150 made-up keys were 150 lanes,
    each with the per-client bounds, and 10,000 of them pushed a real client out of the
    verified ones); the same answer with the client's own key does."""
    monkeypatch.setenv("CTXPROXY_TEST_UPSTREAM_KEY", "sk-upstream")
    edge = {"base_url": upstream.base_url, "match": ["*"]}
    shared = {"name": "shared", **edge, "api_key_env": "CTXPROXY_TEST_UPSTREAM_KEY"}
    upstream.reply = Reply.json(chat_completion("ok"))
    small = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    loopback = unverified_lane(("127.0.0.1", 0))
    for upstreams, verified in (([shared], False), ([{"name": "own", **edge}], True)):
        settings = tenancy_settings(upstream, "passthrough", upstreams=upstreams)
        app = create_app(settings, db_path=str(tmp_path / f"{verified}.db"))
        server, base = serve_in_thread(app)
        try:
            assert post(base, "sk-made-up", small) == 200
        finally:
            stop(server)
        principals = app.state.services.principals
        made_up = principals.of({"authorization": "Bearer sk-made-up"})
        lane = principals.lane(made_up, ("127.0.0.1", 0))
        assert lane == (made_up if verified else loopback)
