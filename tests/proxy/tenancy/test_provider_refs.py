"""Provider-side state named by id goes upstream with the server's key only for the principal it
was relayed to (``proxy.server.provider_refs``): a code-execution container (Anthropic's
``container``, a Responses ``code_interpreter`` tool's) another tenant learned runs its code over
the first tenant's files; a Gemini ``cachedContent`` or a Responses ``conversation``, which no
call the proxy relays makes, is refused. With the client's own key going upstream, every id
passes as sent (the provider keeps each key's state apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.anthropic_upstream import event, response_object, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message

ALICE = {"authorization": "Bearer ka-alice-0000000001", "anthropic-version": "2023-06-01"}
BOB = {"authorization": "Bearer kb-bob-00000000000002", "anthropic-version": "2023-06-01"}
CODE = [{"type": "code_execution_20250825", "name": "code_execution"}]
INTERPRETER = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPROXY_KEYS", raising=False)
    monkeypatch.setenv("KEY_ALICE", ALICE["authorization"][7:])
    monkeypatch.setenv("KEY_BOB", BOB["authorization"][7:])
    monkeypatch.setenv("SERVER_KEY", "sk-server-key-00000000001")


def settings(edge: EdgeUpstream, shared: bool = True) -> Any:
    key = {"api_key_env": "SERVER_KEY"} if shared else {}
    auth = (
        {"mode": "keys", "principals": {"alice": ["KEY_ALICE"], "bob": ["KEY_BOB"]}}
        if shared
        else {"mode": "passthrough"}
    )
    return proxy_settings(
        edge.base_url,
        auth=auth,
        upstreams=[
            {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url,
             **key},
            {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url, **key},
            {"name": "openai", "match": ["*"], "base_url": edge.base_url, **key},
        ],
    )  # fmt: skip


def messages(container: Any = None, tools: Any = CODE) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "tools": tools,
        "messages": [{"role": "user", "content": "run the analysis"}],
    }
    if container is not None:
        body["container"] = container
    return body


def with_container(cid: str) -> dict[str, Any]:
    answer = anthropic_message("done", model="claude-sonnet-4-5")
    return {**answer, "container": {"id": cid, "expires_at": "2026-12-02T10:00:00Z"}}


def assert_refused(r: Any, param_word: str, said: str) -> None:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert said in error["message"] and param_word in r.text


async def test_an_anthropic_container_is_its_principals_alone(tmp_path: Path, edge) -> None:
    edge.replies = [Reply.json(with_container("container_alice_1"))]
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages(), headers=ALICE)
        assert r.json()["container"]["id"] == "container_alice_1"
        # Alice goes on in her container, by id or as an object
        for named in ("container_alice_1", {"id": "container_alice_1"}):
            r = await client.post("/v1/messages", json=messages(named), headers=ALICE)
            assert r.status_code == 200
            assert edge.last.json()["container"] == named
        assert len(edge.seen) == 3
        # Bob learned the id: refused, never forwarded; an id never relayed likewise
        r = await client.post("/v1/messages", json=messages("container_alice_1"), headers=BOB)
        assert_refused(r, "container", "Container 'container_alice_1' not found")
        assert r.json()["type"] == "error"  # Anthropic's own shape
        r = await client.post("/v1/messages", json=messages("container_never"), headers=ALICE)
        assert_refused(r, "container", "not found for this client")
        assert len(edge.seen) == 3
        rows = [row for row in await log_rows(client) if row["status"] == 400]
        assert sorted(row["principal"] for row in rows) == ["alice", "bob"]
        assert {row["error_type"] for row in rows} == {"container_not_found"}


async def test_a_streamed_answers_container_is_kept(tmp_path: Path, edge) -> None:
    """Named in the stream's last events, after a chunk's end cuts it in two."""
    start = event("message_start", message={**anthropic_message("", model="claude-x"),
                                             "content": []})  # fmt: skip
    delta = event("message_delta", delta={"stop_reason": "end_turn",
                  "container": {"id": "container_streamed", "expires_at": "x"}},
                  usage={"output_tokens": 3})  # fmt: skip
    cut = delta.index(b"streamed")
    edge.replies = [sse_reply([start, delta[:cut], delta[cut:], event("message_stop")])]
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json={**messages(), "stream": True}, headers=ALICE)
        assert r.status_code == 200 and b"container_streamed" in r.content
        r = await client.post("/v1/messages", json=messages("container_streamed"), headers=BOB)
        assert r.status_code == 400
        r = await client.post("/v1/messages", json=messages("container_streamed"), headers=ALICE)
        assert r.status_code == 200


async def test_a_code_interpreters_container_is_its_principals_alone(tmp_path: Path, edge) -> None:
    call = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed",
            "code": "print(1)", "container_id": "cntr_alice_9", "outputs": []}  # fmt: skip
    answer = response_object(id="resp_1")
    edge.replies = [Reply.json({**answer, "output": [call, *answer["output"]]})]
    edge.reply = Reply.json(response_object(id="resp_2"))

    def body(container: Any) -> dict[str, Any]:
        tool = {"type": "code_interpreter", "container": container}
        return {"model": "gpt-5", "input": "plot it", "tools": [tool]}

    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/responses", json=body({"type": "auto"}), headers=ALICE)
        assert r.status_code == 200
        r = await client.post("/v1/responses", json=body("cntr_alice_9"), headers=ALICE)
        assert r.status_code == 200 and edge.last.json()["tools"][0]["container"] == "cntr_alice_9"
        r = await client.post("/v1/responses", json=body("cntr_alice_9"), headers=BOB)
        assert_refused(r, "tools[0].container", "Container 'cntr_alice_9' not found")
        assert r.json()["error"]["param"] == "tools[0].container"
        assert len(edge.seen) == 2


async def test_state_no_relayed_call_makes_is_refused_with_the_servers_key(
    tmp_path: Path, edge
) -> None:
    gemini = {"contents": [{"role": "user", "parts": [{"text": "sum up"}]}],
              "cachedContent": "cachedContents/someone-elses"}  # fmt: skip
    responses = {"model": "gpt-5", "input": "go on", "conversation": "conv_someone_elses"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1beta/models/gemini-2.5-pro:generateContent", json=gemini, headers=ALICE
        )
        assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert "cachedContent" in r.json()["error"]["message"]
        r = await client.post("/v1/responses", json=responses, headers=ALICE)
        assert_refused(r, "conversation", "conversation cannot be used")
    assert edge.seen == []


async def test_with_the_clients_own_key_every_id_passes(tmp_path: Path, edge) -> None:
    """The provider keeps each key's state apart: nothing to check, nothing kept."""
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    gemini = {"contents": [{"role": "user", "parts": [{"text": "sum up"}]}],
              "cachedContent": "cachedContents/mine"}  # fmt: skip
    own = {"x-api-key": "sk-ant-own-key-000001", "anthropic-version": "2023-06-01"}
    async with in_process(settings(edge, shared=False), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages("container_made_elsewhere"),
                              headers=own)  # fmt: skip
        assert r.status_code == 200 and edge.last.json()["container"] == "container_made_elsewhere"
        edge.reply = Reply.json({"candidates": []})
        r = await client.post("/v1beta/models/gemini-2.5-pro:generateContent", json=gemini,
                              headers={"x-goog-api-key": "AIza-own-key-0001"})  # fmt: skip
        assert r.status_code == 200
        assert orjson.loads(edge.last.body)["cachedContent"] == "cachedContents/mine"


async def test_a_cached_contents_tokens_are_not_counted_with_the_servers_key(
    tmp_path: Path, edge
) -> None:
    """``countTokens`` relayed to Gemini would tell another's cached content's size."""
    count = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
             "cachedContent": "cachedContents/someone-elses"}  # fmt: skip
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1beta/models/gemini-2.5-pro:countTokens", json=count, headers=ALICE
        )
    assert r.status_code == 400 and "cachedContent" in r.json()["error"]["message"]
    assert edge.seen == []
