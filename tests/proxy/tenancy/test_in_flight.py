"""One principal's requests in flight are bounded (by default half the upstream connections), and
so are the bytes of their bodies (by default 8 of the largest): however many long answers a tenant
keeps waiting, another tenant's request neither queues behind them for an upstream connection nor
is refused, and a tenant's large bodies cannot take the server's memory. Past a bound a tenant's
next request is answered 429 with ``retry-after`` at once (a declared length before its body is
read), and its counts come down as each request ends, however it ends."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from tests.proxy.tenancy.conftest import tenancy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop

SLOW_S = 3.0
CONNECTIONS = 4  # so each principal may have 2 in flight
BODY_LIMIT = 256 * 1024  # so each principal's bodies in flight may carry 2 MiB


def slow() -> Reply:
    reply = Reply.json(chat_completion("a long answer"))
    reply.header_delay_s = SLOW_S
    return reply


@pytest.fixture
def proxy(tmp_path: Path, upstream: EdgeUpstream) -> Iterator[tuple[str, EdgeUpstream, Any]]:
    """The proxy's URL, its upstream and the app."""
    limits = {"upstream_max_connections": CONNECTIONS, "max_body_bytes": BODY_LIMIT}
    settings = tenancy_settings(upstream, "passthrough", limits=limits)
    app = create_app(settings, db_path=str(tmp_path / "db"))
    server, base = serve_in_thread(app)
    try:
        yield base, upstream, app
    finally:
        stop(server)


def post(base: str, key: str, text: str = "hi") -> httpx.Response:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    return httpx.post(
        base + "/v1/chat/completions", content=orjson.dumps(body), headers=headers, timeout=30
    )


def served_soon(base: str, key: str) -> httpx.Response:
    """A quick request of ``key``'s, answered 200 within half ``SLOW_S``: not queued behind
    others' long answers."""
    started = time.monotonic()
    response = post(base, key)
    took = time.monotonic() - started
    assert response.status_code == 200
    assert took < SLOW_S / 2, f"{key} waited {took:.2f} s behind others' long answers"
    return response


def test_a_tenants_long_answers_never_hold_another_tenants_request(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    base, edge, _ = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    for key in ("sk-a", "sk-b"):  # tenants whose keys the upstream has accepted
        assert post(base, key).status_code == 200
    edge.replies = [slow() for _ in range(CONNECTIONS)]
    seen = len(edge.seen)
    answers: list[int] = []
    waiting = [
        threading.Thread(target=lambda i=i: answers.append(post(base, "sk-a", f"a{i}").status_code))
        for i in range(CONNECTIONS)
    ]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + SLOW_S
    while len(edge.seen) < seen + CONNECTIONS // 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # the rest of A's requests arrive (and are refused, or queue)
    edge.replies.clear()

    other = served_soon(base, "sk-b")
    assert other.json()["choices"][0]["message"]["content"] == "quick"

    refused = post(base, "sk-a")
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "too_many_requests_in_flight"
    for thread in waiting:
        thread.join()
    assert sorted(answers) == [200] * (CONNECTIONS // 2) + [429] * (CONNECTIONS // 2)
    # each ended request gave its place back: A is served again
    assert post(base, "sk-a").status_code == 200


def test_two_tenants_long_answers_leave_a_connection_to_a_third(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    """Half the connections each, two tenants' long answers held all four and a third tenant's
    request waited for one (up to the upstream's timeout). Once one more would leave under an
    eighth free, each principal gets an equal share with one kept for a tenant to come: B's
    second long request is refused, C is served at once."""
    base, edge, _ = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    for key in ("sk-a", "sk-b", "sk-c"):
        assert post(base, key).status_code == 200
    seen = len(edge.seen)
    edge.replies = [slow() for _ in range(CONNECTIONS)]
    answers: dict[str, list[int]] = {"sk-a": [], "sk-b": []}

    def long_request(key: str) -> None:
        answers[key].append(post(base, key, "long").status_code)

    waiting: list[threading.Thread] = []
    for key, arrived in (("sk-a", 1), ("sk-a", 2), ("sk-b", 3)):  # each holds a connection
        waiting.append(threading.Thread(target=long_request, args=(key,)))
        waiting[-1].start()
        deadline = time.monotonic() + SLOW_S
        while len(edge.seen) < seen + arrived and time.monotonic() < deadline:
            time.sleep(0.01)
    waiting.append(threading.Thread(target=long_request, args=("sk-b",)))
    waiting[-1].start()
    time.sleep(0.3)  # B's second is refused, or holds the last connection
    edge.replies.clear()

    served_soon(base, "sk-c")  # not behind A's and B's long answers
    for thread in waiting:
        thread.join()
    assert sorted(answers["sk-a"]) == [200, 200]
    assert sorted(answers["sk-b"]) == [200, 429]


def test_a_request_refused_or_failed_gives_its_place_back(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    base, edge, app = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    assert post(base, "sk-a").status_code == 200
    json = {"content-type": "application/json", "authorization": "Bearer sk-a"}
    url = base + "/v1/chat/completions"
    assert httpx.post(url, content=b"{", headers=json).status_code == 400
    text = {**json, "content-type": "text/plain"}
    assert httpx.post(url, content=b"{}", headers=text).status_code == 415
    unknown = orjson.dumps({"model": "x", "messages": []})
    assert httpx.post(url, content=unknown, headers=json).status_code in (400, 404)
    edge.reply = Reply.json({"error": {"message": "overloaded"}}, status=529)
    assert post(base, "sk-a").status_code == 529
    in_flight = app.state.services.in_flight
    assert settled(in_flight, principal_of(app, "sk-a"), (0, 0)) == (0, 0)
    edge.reply = Reply.json(chat_completion("quick"))
    assert post(base, "sk-a").status_code == 200


def settled(in_flight: Any, principal: str, expected: tuple[int, int]) -> tuple[int, int]:
    """What ``principal`` has in flight, once it is ``expected`` or 5 s have passed (a request
    ends just after its answer is sent)."""
    deadline = time.monotonic() + 5
    while in_flight.of(principal) != expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return in_flight.of(principal)  # type: ignore[no-any-return]


def idle(in_flight: Any, *but: str) -> bool:
    """Whether no principal (but those named) has requests in flight, within 5 s."""
    deadline = time.monotonic() + 5
    while set(in_flight._counts) - set(but) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not set(in_flight._counts) - set(but)


def principal_of(app: Any, key: str) -> str:
    return str(app.state.services.principals.of({"authorization": f"Bearer {key}"}, None))


def big(text: str, size: int) -> bytes:
    content = text + " " + "word " * (size // 5)
    return orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": content}]})


def test_a_tenants_bodies_in_flight_are_bounded_in_bytes(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    base, edge, app = proxy
    url = base + "/v1/chat/completions"
    edge.reply = Reply.json(chat_completion("quick"))
    for key in ("sk-a", "sk-b"):
        assert post(base, key).status_code == 200
    in_flight = app.state.services.in_flight
    a = principal_of(app, "sk-a")
    # their places given back (just after their answers; the first in their network's lane):
    # while another is in flight, a has a fair share
    assert idle(in_flight)
    in_flight.bound = 100  # only the bytes bound is under test here
    held = [in_flight.enter(a) for _ in range(8)]
    for ticket in held:  # eight requests of 250 KiB waiting on long answers
        in_flight.size(ticket, 250 * 1024)
    headers = {"content-type": "application/json", "authorization": "Bearer sk-a"}
    body = big("one more", 100 * 1024)
    refused = httpx.post(url, content=body, headers=headers)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert "max_body_bytes_in_flight_per_principal" in refused.json()["error"]["message"]
    assert len(edge.seen) == 0 or b"one more" not in edge.seen[-1].body
    # another tenant's body of the same size goes through
    other = httpx.post(url, content=body, headers={**headers, "authorization": "Bearer sk-b"})
    assert other.status_code == 200
    # its place given back (just after its answer): while it is in flight, a has a fair share
    assert idle(in_flight, a)
    for ticket in held[:2]:
        in_flight.leave(ticket)
    assert httpx.post(url, content=body, headers=headers).status_code == 200
    assert settled(in_flight, a, (6, 6 * 250 * 1024)) == (6, 6 * 250 * 1024)
    for ticket in held[2:]:
        in_flight.leave(ticket)
    assert in_flight.of(a) == (0, 0)


@pytest.mark.parametrize(
    ("path", "headers", "body"),
    [
        (
            "/v1/messages/count_tokens",
            {"x-api-key": "sk-a", "anthropic-version": "2023-06-01"},
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        ),
        (
            "/v1beta/models/gemini-2.5-pro:countTokens",
            {"x-goog-api-key": "sk-a"},
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        ),
    ],
)
def test_a_count_of_tokens_counts_among_the_requests_in_flight(
    proxy: tuple[str, EdgeUpstream, Any], path: str, headers: dict[str, str], body: Any
) -> None:
    base, edge, app = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    assert post(base, "sk-a").status_code == 200  # a key the upstream accepted: its own lane
    services = app.state.services
    lane = services.principals.lane(principal_of(app, "sk-a"))
    held = [services.in_flight.enter(lane) for _ in range(CONNECTIONS // 2)]
    sent = {"content-type": "application/json", **headers}
    try:
        refused = httpx.post(base + path, content=orjson.dumps(body), headers=sent)
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
    finally:
        for ticket in held:
            services.in_flight.leave(ticket)
    counted = httpx.post(base + path, content=orjson.dumps(body), headers=sent)
    assert counted.status_code == 200, counted.text
    assert settled(services.in_flight, lane, (0, 0)) == (0, 0)  # its place given back


def test_a_body_sent_without_a_length_counts_as_it_is_read(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    """Chunked, with no ``content-length``: its bytes count among its tenant's as they arrive,
    and the tenant is answered 429 once they pass the bound, before the rest is read (counted
    only once read whole, a hundred such uploads held a hundred bodies' memory)."""
    base, edge, app = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    assert post(base, "sk-a").status_code == 200
    in_flight = app.state.services.in_flight
    a = principal_of(app, "sk-a")
    held = [in_flight.enter(a) for _ in range(CONNECTIONS // 2 - 1)]
    in_flight.size(held[0], 1900 * 1024)  # of the 2 MiB bound, 148 KiB left
    host, port = base.removeprefix("http://").split(":")
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Authorization: Bearer sk-a\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = 64 * 1024
    chunk = f"{piece:x}\r\n".encode() + b" " * piece + b"\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + chunk * 2)
        reading = (2, 1900 * 1024 + 2 * piece)
        assert settled(in_flight, a, reading) == reading  # counted while it is still coming
        sock.sendall(chunk)  # past the bound (not past one body's): refused before its end
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 429"), answer[:200]
    assert b"max_body_bytes_in_flight_per_principal" in answer
    assert settled(in_flight, a, (1, 1900 * 1024)) == (1, 1900 * 1024)
    for ticket in held:
        in_flight.leave(ticket)


def test_a_flood_of_made_up_keys_from_one_network_spares_another_networks_new_key(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    """Unverified keys share a lane by the client's network (here as a trusted proxy says it,
    ``X-Forwarded-For`` from the loopback): one address's made-up keys, waiting on long answers,
    fill theirs, and a new key from elsewhere is served."""
    base, edge, _ = proxy
    edge.reply = slow()
    body = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    codes: dict[str, int] = {}

    def first(key: str, address: str) -> None:
        headers = {
            "content-type": "application/json",
            "authorization": f"Bearer {key}",
            "x-forwarded-for": address,
        }
        url = base + "/v1/chat/completions"
        codes[key] = httpx.post(url, content=body, headers=headers, timeout=30).status_code

    flood = [
        threading.Thread(target=first, args=(f"sk-made-up-{i}", "10.0.0.1"))
        for i in range(CONNECTIONS // 2)  # the lane's bound
    ]
    for thread in flood:
        thread.start()
    time.sleep(1.0)  # both wait on their answers
    first("sk-new-1", "10.0.0.1")
    first("sk-new-2", "10.0.0.2")
    for thread in flood:
        thread.join()
    assert codes["sk-new-1"] == 429  # its network's unverified lane is full
    assert codes["sk-new-2"] == 200
    assert [codes[f"sk-made-up-{i}"] for i in range(CONNECTIONS // 2)] == [200, 200]


def test_every_lanes_bodies_together_are_bounded_in_bytes(
    proxy: tuple[str, EdgeUpstream, Any],
) -> None:
    """Each lane's bodies are bounded, and a network may have 16 lanes (an upstream that checks
    no key accepts every made-up one): 20 made-up keys from one host held 136 bodies of 30 MiB,
    the server's memory 425 MB -> 4.4 GB. All lanes' bodies together are bounded as well (by
    default 16 of the largest): past it a request is answered 429, whoever sends it."""
    base, edge, app = proxy
    edge.reply = Reply.json(chat_completion("quick"))
    in_flight = app.state.services.in_flight
    assert in_flight.total_bound == 16 * BODY_LIMIT
    held = []
    for i in range(16):  # sixteen lanes, each one body of the largest waiting upstream
        held.append(ticket := in_flight.enter(f"lane-{i}"))
        in_flight.size(ticket, BODY_LIMIT)
    headers = {"content-type": "application/json", "authorization": "Bearer sk-new"}
    url = base + "/v1/chat/completions"
    refused = httpx.post(url, content=big("one more", 100 * 1024), headers=headers)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert "limits.max_body_bytes_in_flight" in refused.json()["error"]["message"]
    in_flight.leave(held.pop())
    assert httpx.post(url, content=big("now", 100 * 1024), headers=headers).status_code == 200
    for ticket in held:
        in_flight.leave(ticket)
    deadline = time.monotonic() + 5  # the served request's ticket is let go after its answer
    while in_flight._total and time.monotonic() < deadline:
        time.sleep(0.01)
    assert in_flight._total == 0


def test_a_principal_alone_keeps_its_whole_bound_and_shares_shrink_with_tenants() -> None:
    from proxy.errors import TooManyInFlight
    from proxy.server.in_flight import InFlight

    flights = InFlight(bound=16, byte_bound=1 << 30, capacity=16)  # 2 connections kept free
    alone = [flights.enter("a") for _ in range(16)]  # no other tenant: its bound, not a share
    with pytest.raises(TooManyInFlight):
        flights.enter("a")
    for ticket in alone[8:]:
        flights.leave(ticket)
    b = [flights.enter("b") for _ in range(6)]  # 14 in flight: one more leaves under 2 free
    with pytest.raises(TooManyInFlight, match="its share"):
        flights.enter("b")  # past its share beside a: 16 // 3
    assert flights.within_share("c")  # a newcomer: let in, up to a share of its own
    c = flights.enter("c")
    for ticket in [*alone[:8], *b, c]:
        flights.leave(ticket)
    assert flights.within_share("a") and flights.of("a") == (0, 0)


def test_a_third_tenant_under_its_share_leaves_a_connection_to_a_fourth() -> None:
    """Shares apply to what enters: two tenants let in while the connections were free held more
    than theirs, and a third tenant, under its own share, was let in past the last connection, so
    a fourth tenant's first request waited for one (as if no share applied)."""
    from proxy.errors import TooManyInFlight
    from proxy.server.in_flight import InFlight

    flights = InFlight(bound=8, byte_bound=1 << 30, capacity=16)
    held = [flights.enter("a") for _ in range(8)]  # alone: its bound
    held += [flights.enter("b") for _ in range(6)]  # 14: under an eighth free past it
    for _ in range(16):
        try:
            held.append(flights.enter("c"))
        except TooManyInFlight:
            break
    assert flights.of("c")[0] >= 1  # a newcomer is let in
    held.append(flights.enter("d"))  # a newcomer too: a connection is left for it
    try:
        assert sum(flights.of(name)[0] for name in "abcd") <= 16
    finally:
        for ticket in held:
            flights.leave(ticket)
