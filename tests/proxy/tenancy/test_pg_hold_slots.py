"""On PostgreSQL each session hold takes a pooled connection, shared by every tenant, for as long
as the request's rules run, and a heavy request's rules wait their turn in the worker thread while
it holds. One principal holds at most half the pool: a tenant's 30 heavy requests on 30 sessions
wait for its own to finish, not in the pool's queue, so another tenant's request finds a
connection at once and no hold times out (a timed-out hold serves read-only: its state unsaved).
So do 30 requests under 30 made-up keys: in passthrough, principals no upstream has answered yet
share one lane (``Principals.lane``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from tests.proxy.tenancy.serving import tenancy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop

LOCK_TIMEOUT_S = 4.0
HEAVY = 30


def heavy(i: int) -> dict[str, Any]:
    """A 1.1 MB conversation: its rules run in the worker thread."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for j in range(300):
        text = f"q{i}-{j} " + f"lorem ipsum dolor sit amet {j} " * 120
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": f"a{j}"}]
    messages.append({"role": "user", "content": "go on"})
    return {"model": "gpt-4o", "messages": messages}


def post(base: str, key: str, session: str, body: dict[str, Any]) -> float:
    headers = {
        "content-type": "application/json",
        "authorization": f"Bearer {key}",
        "x-session-id": session,
    }
    started = time.monotonic()
    r = httpx.post(
        base + "/v1/chat/completions", content=orjson.dumps(body), headers=headers, timeout=120
    )
    assert r.status_code == 200, r.text
    return time.monotonic() - started


@pytest.mark.parametrize("made_up", [False, True], ids=["one-key", "made-up-keys"])
def test_a_tenants_heavy_requests_never_take_the_whole_pool(
    pg_server: Any, tmp_path: Path, upstream: EdgeUpstream, made_up: bool
) -> None:
    """``made_up``: each of A's requests under a key of its own that no upstream answered yet
    (in passthrough, all such share one lane)."""
    upstream.reply = Reply.json(chat_completion("ok"))
    url = pg_server.database()
    store = {"url": url, "pool_size": 2, "lock_timeout_s": LOCK_TIMEOUT_S}
    app = create_app(tenancy_settings(upstream, "passthrough", None, store=store), db_path=url)
    server, base = serve_in_thread(app)
    try:
        small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        post(base, "sk-b", "b1", small)
        bodies = [heavy(i) for i in range(HEAVY)]
        threads = [
            threading.Thread(
                target=post, args=(base, f"sk-a{i}" if made_up else "sk-a", f"a{i}", bodies[i])
            )
            for i in range(HEAVY)
        ]
        for thread in threads:
            thread.start()
        time.sleep(2.5)  # A's requests hold sessions and queue in the worker thread
        took = post(base, "sk-b", "b1", {**small, "messages": [*small["messages"]] * 3})
        for thread in threads:
            thread.join()
        assert app.state.services.store.lock_timeouts == 0
        assert took < LOCK_TIMEOUT_S / 2, f"B waited {took:.2f} s for a connection"
    finally:
        stop(server)


def test_requests_queued_on_a_stalled_session_take_none_of_the_principals_slots(
    pg_server: Any, tmp_path: Path, upstream: EdgeUpstream
) -> None:
    """Another replica holds one of A's sessions and stalls. A's requests of that session queue
    behind each other here; each took one of A's slots (half the pool) while it queued, so A's
    request on another session waited for them to time out (19 s with 11 of them and a 10 s
    lock timeout). A slot is now taken once the session's turn here is had: the other session
    is served at once, and the queued requests each wait one lock timeout, not one after another."""
    import asyncio

    import asyncpg

    from proxy.store.pg_session import session_lock_key

    upstream.reply = Reply.json(chat_completion("ok"))
    url = pg_server.database()
    timeout_s = 2.0
    store = {"url": url, "pool_size": 4, "lock_timeout_s": timeout_s}  # 2 slots a principal
    app = create_app(tenancy_settings(upstream, "passthrough", None, store=store), db_path=url)
    server, base = serve_in_thread(app)
    small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    locked, release = threading.Event(), threading.Event()

    def stalled_replica(session_id: str) -> None:  # holds the session's lock, as a stalled one
        async def hold() -> None:
            conn = await asyncpg.connect(url)
            await conn.execute("SELECT pg_advisory_lock($1)", session_lock_key(session_id))
            locked.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 30)
            await conn.close()

        asyncio.run(hold())

    try:
        post(base, "sk-a", "stuck", small)  # the session exists; its name as stored:
        sid = asyncio.run(_session_named(url, "stuck"))
        holder = threading.Thread(target=stalled_replica, args=(sid,))
        holder.start()
        assert locked.wait(10)
        took: list[float] = []
        queued = [
            threading.Thread(target=lambda: took.append(post(base, "sk-a", "stuck", small)))
            for _ in range(4)
        ]
        for thread in queued:
            thread.start()
        time.sleep(0.3)  # they hold the session's turn here, or wait for it
        other = post(base, "sk-a", "other", small)
        for thread in queued:
            thread.join()
        release.set()
        holder.join()
        assert other < timeout_s / 2, f"A's other session waited {other:.2f} s"
        assert max(took) < timeout_s + 1.0, took  # one lock timeout each, not one after another
        assert app.state.services.store.lock_timeouts == 4
    finally:
        release.set()
        stop(server)


async def _session_named(url: str, name: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetchval(
            "SELECT id FROM sessions WHERE id LIKE '%/' || $1", name
        )
    finally:
        await conn.close()
    assert isinstance(found, str)
    return found
