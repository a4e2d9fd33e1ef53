"""PostgreSQL away, through the whole app: requests keep flowing, a session this replica never
saw starting empty (docs/operations.md). A new session's cache feedback was read from the
database on its own, and its connection error went up as a 500 to every new session."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, Reply, protocol_settings
from tests.support.factories import anthropic_message, chat_completion
from tests.support.postgres import PgServer

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def _headers(session: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "authorization": "Bearer sk-test-1",
        "x-api-key": "sk-test-1",
        "x-session-id": session,
    }


async def test_new_sessions_are_served_while_the_database_is_away(
    own_server: PgServer,
    edge: EdgeUpstream,
    tmp_path: Path,
) -> None:
    settings = protocol_settings(edge)
    url = own_server.database()
    async with in_process(settings, url) as client:
        edge.reply = Reply.json(chat_completion("ok"))
        r = await client.post("/v1/chat/completions", content=orjson.dumps(CHAT),
                              headers=_headers("seen"))  # fmt: skip
        assert r.status_code == 200, r.text
        own_server.stop()
        try:
            for session in ("seen", "new-1", "new-2"):
                r = await client.post("/v1/chat/completions", content=orjson.dumps(CHAT),
                                      headers=_headers(session))  # fmt: skip
                assert r.status_code == 200, r.text
            edge.reply = Reply.json(anthropic_message())
            r = await client.post("/v1/messages", content=orjson.dumps(MESSAGES),
                                  headers=_headers("new-3"))  # fmt: skip
            assert r.status_code == 200, r.text
            ready = await client.get("/readyz")
            assert ready.status_code == 503
        finally:
            own_server.ensure_started()
