"""The upstream's cache report reaches the session's next request: a live proxy in front of the
scripted upstream on loopback, answering with cached tokens in OpenAI's and Anthropic's spellings,
whole or streamed; the next request of the session finds them in its report (the CacheFacts the
rules read); a restart keeps them (SQLite); a failed or nonsensical answer leaves no feedback."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, request, user

OPENAI_USAGE = {
    "prompt_tokens": 2000,
    "completion_tokens": 5,
    "total_tokens": 2005,
    "prompt_tokens_details": {"cached_tokens": 1536},
}
# Anthropic's counts as litellm passes them on, in OpenAI's shape
ANTHROPIC_USAGE = {
    "prompt_tokens": 1812,
    "completion_tokens": 5,
    "total_tokens": 1817,
    "cache_read_input_tokens": 1500,
    "cache_creation_input_tokens": 300,
}


def ask(proxy: Any, session: str, text: str, stream: bool) -> str:
    """One chat call with the real SDK; returns the request id."""
    client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}],
        stream=stream,
        extra_headers={"x-session-id": session},
    )
    if stream:
        for _ in raw.parse():  # read to the end
            pass
    return str(raw.headers["x-ctxproxy-request-id"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("usage", "cached", "written"),
    [(OPENAI_USAGE, 1536, None), (ANTHROPIC_USAGE, 1500, 300)],
    ids=["openai", "anthropic"],
)
def test_the_next_request_of_the_session_sees_the_cache_report(
    live_proxy, fake_upstream, stream: bool, usage: dict[str, Any], cached: int, written: int | None
) -> None:
    proxy = live_proxy()
    fake_upstream.script.usage = usage
    first = proxy.row(ask(proxy, "sess-a", "one", stream))
    second = proxy.row(ask(proxy, "sess-a", "two", stream))
    other = proxy.row(ask(proxy, "sess-b", "one", stream))
    assert first["report"]["cache"]["last_cached_tokens"] is None
    assert first["report"]["cache"]["idle_s"] is None
    cache = second["report"]["cache"]
    assert (cache["last_cached_tokens"], cache["last_cache_write_tokens"]) == (cached, written)
    assert cache["idle_s"] == pytest.approx(second["created_at"] - first["created_at"], abs=0.01)
    assert (cache["read_ratio"], cache["source"]) == (0.5, "litellm")  # gpt-4o in litellm's table
    assert other["report"]["cache"]["last_cached_tokens"] is None  # another session: nothing


def test_failed_and_nonsensical_answers_leave_the_last_report(live_proxy, fake_upstream) -> None:
    proxy = live_proxy()
    fake_upstream.script.usage = OPENAI_USAGE
    proxy.row(ask(proxy, "sess-c", "one", False))
    fake_upstream.script.usage = {
        "prompt_tokens": -1,
        "prompt_tokens_details": {"cached_tokens": "lots"},
        "cache_read_input_tokens": 10**13,
    }
    proxy.row(ask(proxy, "sess-c", "two", False))
    fake_upstream.script.status = 500
    with pytest.raises(openai.InternalServerError):
        ask(proxy, "sess-c", "three", False)
    fake_upstream.script.status = 200
    last = proxy.row(ask(proxy, "sess-c", "four", False))
    assert last["report"]["cache"]["last_cached_tokens"] == 1536


def stored_feedback(db: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(
            "SELECT session_id, prompt_tokens, cached_tokens, cache_write_tokens FROM session_cache"
        ).fetchall()


async def test_the_report_survives_a_restart(tmp_path: Path, edge: EdgeUpstream) -> None:
    reply = {
        "id": "c1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": ANTHROPIC_USAGE,
    }
    edge.reply = Reply.json(reply)
    settings = proxy_settings(edge.base_url)
    db = tmp_path / "log.db"
    headers = {"x-session-id": "sess-r"}
    async with in_process(settings, str(db)) as client:
        r = await client.post("/v1/chat/completions", json=request(user("one")), headers=headers)
        assert r.status_code == 200
    assert stored_feedback(db) == [("anonymous/sess-r", 1812, 1500, 300)]
    async with in_process(settings, str(db)) as client:
        r = await client.post("/v1/chat/completions", json=request(user("two")), headers=headers)
        assert r.status_code == 200
        rows = await log_rows(client)
    cache = rows[0]["report"]["cache"]
    assert (cache["last_cached_tokens"], cache["last_cache_write_tokens"]) == (1500, 300)
    assert cache["idle_s"] == pytest.approx(rows[0]["created_at"] - rows[1]["created_at"], abs=0.01)


ANTHROPIC_MESSAGE = anthropic_message(
    "ok",
    model="claude-sonnet-4-5",
    usage={
        "input_tokens": 12,
        "output_tokens": 4,
        "cache_read_input_tokens": 1500,
        "cache_creation_input_tokens": 300,
    },
)


async def test_anthropic_through_litellm_reports_its_cache(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """litellm against a loopback server answering as Anthropic's Messages API does."""
    monkeypatch.setenv("FEEDBACK_TEST_KEY", "sk-ant-test-0000000000")
    edge.reply = Reply.json(ANTHROPIC_MESSAGE)
    spec = {
        "name": "claude",
        "match": ["anthropic/*"],
        "kind": "litellm",
        "base_url": edge.url,
        "api_key_env": "FEEDBACK_TEST_KEY",
    }
    settings = proxy_settings(edge.base_url, upstreams=[spec])
    headers = {"x-session-id": "sess-l"}
    model = "anthropic/claude-sonnet-4-5"
    async with in_process(settings, str(tmp_path / "db")) as client:
        for text in ("one", "two"):
            body = request(user(text), model=model, max_tokens=20)
            r = await client.post("/v1/chat/completions", json=body, headers=headers)
            assert r.status_code == 200, r.text
        rows = await log_rows(client)
    assert orjson.loads(edge.last.body)["model"] == "claude-sonnet-4-5"
    cache = rows[0]["report"]["cache"]
    assert (cache["last_cached_tokens"], cache["last_cache_write_tokens"]) == (1500, 300)
    assert (cache["read_ratio"], cache["write_ratio"]) == (0.1, 1.25)
