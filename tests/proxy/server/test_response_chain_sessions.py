"""A Responses request continuing a stored response (``previous_response_id``) and naming no
session of its own is in the session that response was relayed in: a continuation carries no
first system and user message, so the hash that names an unnamed conversation named every
chain's continuations alike, and the OpenAI Agents SDK's separate conversations shared one
session's state (what was made, the working set, pruning). A session the request names wins; a
restarted proxy still knows each response's session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.anthropic_upstream import response_events, response_object, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply

KEY = {"authorization": "Bearer sk-client-0000000001"}


def first(task: str, stream: bool = False) -> dict[str, Any]:
    return {"model": "gpt-5", "instructions": "You are a coding agent.", "stream": stream,
            "input": [{"type": "message", "role": "user", "content": task}]}  # fmt: skip


def continued(previous: str, call: str) -> dict[str, Any]:
    output = {"type": "function_call_output", "call_id": call, "output": "done"}
    return {"model": "gpt-5", "instructions": "You are a coding agent.",
            "previous_response_id": previous, "input": [output]}  # fmt: skip


async def sessions(client: Any, *requests: tuple[dict[str, Any], dict[str, str]]) -> list[str]:
    for data, headers in requests:
        r = await client.post("/v1/responses", json=data, headers={**KEY, **headers})
        assert r.status_code == 200, r.text
    return [row["session_id"] for row in reversed(await log_rows(client))]  # oldest first


async def test_each_chain_keeps_its_own_session(tmp_path: Path, edge: EdgeUpstream) -> None:
    edge.replies = [
        Reply.json(response_object(id="resp_a1")),
        sse_reply(response_events(id="resp_b1")),
        Reply.json(response_object(id="resp_a2")),
        Reply.json(response_object(id="resp_b2")),
        Reply.json(response_object(id="resp_a3")),
    ]
    edge.reply = Reply.json(response_object(id="resp_named"))
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        a1, b1, a2, b2, a3 = await sessions(
            client,
            (first("fix the login bug"), {}),
            (first("write the release notes", stream=True), {}),
            (continued("resp_a1", "call_1"), {}),
            (continued("resp_b1", "call_2"), {}),
            (continued("resp_a2", "call_3"), {}),
        )  # fmt: skip
        assert a1 != b1
        assert a2 == a3 == a1 and b2 == b1
        # a session the request names wins over the continued response's
        r = await client.post("/v1/responses", json=continued("resp_a3", "call_4"),
                              headers={**KEY, "x-session-id": "mine"})  # fmt: skip
        assert r.status_code == 200
        assert (await log_rows(client))[0]["session_id"].endswith("/mine")
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await client.post("/v1/responses", json=continued("resp_b2", "call_5"), headers=KEY)
        assert r.status_code == 200
        assert (await log_rows(client))[0]["session_id"] == b1  # read from the store
