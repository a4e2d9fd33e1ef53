"""A token count reads its session's state, which on PostgreSQL takes a pooled connection and
waits out another replica's hold on the session. Its reads take one of the principal's slots, as
a request's hold does (``hold_slots``): a tenant's counts on sessions another replica holds wait
among themselves, and another tenant's request still finds a connection at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import asyncpg
import httpx
import orjson

from proxy.app import create_app
from proxy.principals import scoped
from proxy.store.pg_session import session_lock_key
from tests.proxy.tenancy.serving import tenancy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop

POOL, LOCK_TIMEOUT_S = 4, 3.0


def post(base: str, key: str, session: str, path: str, took: list[float]) -> None:
    body = {"model": "gpt-4o", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi " + session}]}  # fmt: skip
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}",
               "x-session-id": session}  # fmt: skip
    started = time.monotonic()
    r = httpx.post(base + path, content=orjson.dumps(body), headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    took.append(time.monotonic() - started)


async def test_counts_on_held_sessions_leave_the_pool_to_others(
    pg_server: Any, upstream: EdgeUpstream
) -> None:
    upstream.reply = Reply.json(chat_completion("ok"))
    url = pg_server.database()
    store = {"url": url, "pool_size": POOL, "lock_timeout_s": LOCK_TIMEOUT_S}
    app = create_app(tenancy_settings(upstream, "passthrough", None, store=store), db_path=url)
    server, base = serve_in_thread(app)
    other_replica = await asyncpg.connect(url)
    try:
        post(base, "sk-b", "b1", "/v1/chat/completions", [])
        a = app.state.services.principals.of({"authorization": "Bearer sk-a"})
        for i in range(POOL):  # another replica holds A's sessions
            key = session_lock_key(scoped(a, f"a{i}"))
            await other_replica.execute("SELECT pg_advisory_lock($1)", key)
        counts: list[float] = []
        threads = [
            threading.Thread(target=post, args=(base, "sk-a", f"a{i}",
                                                "/v1/messages/count_tokens", counts))
            for i in range(POOL)
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        await asyncio.sleep(0.5)
        took: list[float] = []
        await asyncio.to_thread(post, base, "sk-b", "b1", "/v1/chat/completions", took)
        for thread in threads:
            await asyncio.to_thread(thread.join)
        assert took[0] < 1.0, took  # before: 2.5 s, waiting for a connection A's counts held
        assert len(counts) == POOL
    finally:
        await other_replica.close()
        stop(server)
