"""A session name holding a character that is not printable (a NUL, which PostgreSQL refuses in
text; a control character; a lone surrogate) is hashed like a secret-looking one: it still names
one session, and a request naming it is served on PostgreSQL as on SQLite, not answered 500."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.rewrite.session_key import named_session
from tests.proxy.tenancy.serving import tenancy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import chat_completion
from tests.support.live import serve_in_thread, stop

ODD = ["a\u0000b", "a\x1b[2Jb", "a\ud800b", "a\u2028b"]


@pytest.mark.parametrize("name", ODD)
def test_a_name_with_a_character_not_printable_is_hashed(name: str) -> None:
    named = named_session({}, {"metadata": {"session_id": name}}, b"s")
    assert named is not None and named.startswith("hashed:")
    assert named_session({}, {"metadata": {"session_id": name}}, b"s") == named
    assert named_session({}, {"metadata": {"session_id": "a b"}}, b"s") == "a b"


async def test_a_nul_in_the_name_is_served_on_postgresql(
    pg_server: Any, tmp_path: Path, upstream: EdgeUpstream
) -> None:
    upstream.reply = Reply.json(chat_completion("ok"))
    url = pg_server.database()
    app = create_app(tenancy_settings(upstream, "passthrough", None, store={"url": url}),
                     db_path=url)  # fmt: skip
    server, base = serve_in_thread(app)
    try:
        body = {"model": "gpt-4o", "metadata": {"session_id": "a\u0000b"},
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            r = await client.post(
                "/v1/chat/completions",
                content=orjson.dumps(body),
                headers={"content-type": "application/json", "authorization": "Bearer sk-a"},
            )
        assert r.status_code == 200, r.text
        assert r.headers["x-ctxproxy-session-id"].startswith("hashed")
    finally:
        stop(server)
