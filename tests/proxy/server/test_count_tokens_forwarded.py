"""count_tokens counts what the proxy would forward (a pointer block the rules add is billed too),
read from the session's state without saving it, for an Anthropic upstream (the forwarded body is
what goes to its count_tokens) and for one counted here."""

from __future__ import annotations

from pathlib import Path

import orjson

from proxy.protocols.anthropic import ANTHROPIC
from proxy.tokens import TokenCounters
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import Reply
from tests.support.factories import anthropic_message, chat_completion

MADE = "/w/counted_dir_7"
JSON = {"content-type": "application/json", "x-api-key": "sk-ant-client", "x-session-id": "s1"}


def history(model: str) -> list[dict]:
    return [
        {"role": "user", "content": f"make the folder {MADE}"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                 "input": {"command": f"mkdir -p {MADE}"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "done"}]},
    ]  # fmt: skip


def ask(model: str) -> dict:
    messages = [
        *history(model),
        {"role": "assistant", "content": "Made it."},
        {"role": "user", "content": "now delete the folder I just created"},
    ]
    return {"model": model, "messages": messages}


def settings(base_url: str):
    return proxy_settings(
        base_url,
        upstreams=[
            {"name": "claude", "match": ["claude-*"], "kind": "anthropic",
             "base_url": base_url.removesuffix("/v1")},
            {"name": "local", "match": ["*"], "base_url": base_url},
        ],
    )  # fmt: skip


async def _counts(client, model: str, session: str) -> int:
    r = await client.post(
        "/v1/messages/count_tokens",
        content=orjson.dumps(ask(model)),
        headers={**JSON, "x-session-id": session},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["input_tokens"])


async def test_a_count_here_includes_the_block_the_proxy_adds(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(anthropic_message("ok"))
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        first = {"model": "claude-x", "max_tokens": 100, "messages": history("claude-x")}
        r = await client.post("/v1/messages", content=orjson.dumps(first), headers=JSON)
        assert r.status_code == 200, r.text
        # the same conversation counted here (gpt-*: no Anthropic upstream): the pointer block
        # the rules add to "the folder I just created" is counted
        edge.reply = Reply.json(chat_completion())
        r = await client.post(
            "/v1/messages",
            content=orjson.dumps({**first, "model": "gpt-4o"}),
            headers={**JSON, "x-session-id": "s2"},
        )
        assert r.status_code == 200, r.text
        rows = [row for row in await log_rows(client) if row["session_id"].endswith("/s2")]
        assert [e["path"] for e in rows[0]["report"]["entities"]] == [MADE]
        with_block = await _counts(client, "gpt-4o", "s2")
    # the client's own body, counted as count_tokens counts: the block is what it lacks
    counter = TokenCounters().for_model("gpt-4o")
    own = ANTHROPIC.lower(ask("gpt-4o"))
    sent = counter.count_messages(own.messages) + counter.count_tools(own.tools)
    assert with_block > sent + 20


async def test_an_anthropic_count_is_of_the_forwarded_body(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(anthropic_message("ok"))
    async with in_process(settings(edge.base_url), str(tmp_path / "db")) as client:
        first = {"model": "claude-x", "max_tokens": 100, "messages": history("claude-x")}
        await client.post("/v1/messages", content=orjson.dumps(first), headers=JSON)
        edge.reply = Reply.json({"input_tokens": 42})
        assert await _counts(client, "claude-x", "s1") == 42
        counted = edge.seen[-1]
        assert counted.target.endswith("/v1/messages/count_tokens")
        assert MADE in counted.body.decode() and "<ctxproxy-context>" in counted.body.decode()
        # counting saved nothing: the session's next real request still adds its block once
        before = len(edge.seen)
        edge.reply = Reply.json(anthropic_message("ok"))
        r = await client.post(
            "/v1/messages",
            content=orjson.dumps({**ask("claude-x"), "max_tokens": 100}),
            headers=JSON,
        )
        assert r.status_code == 200
        assert edge.seen[before].body.decode().count("<ctxproxy-context>") == 1
