"""A cache diagnosis names an earlier answer to compare the request with (OpenAI's
``prompt_cache_options.comparison_response_id``, Anthropic's ``diagnostics.previous_message_id``),
and the provider answers how many of the request's tokens that answer's prompt shares: with the
server's key, naming another tenant's answer read its prompt a prefix at a time. So a comparison
goes upstream only when it names an answer the proxy relayed to the same principal; another's,
or one never relayed, gets the protocol's own 400, never forwarded. With the client's own key the
provider keeps each key's answers apart, and the field goes as sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import in_process, log_rows
from tests.proxy.tenancy.test_provider_refs import ALICE, BOB, assert_refused, settings
from tests.proxy.tenancy.test_provider_refs import keys as keys  # the principals' variables
from tests.support.anthropic_upstream import event, response_object, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message

BETA = {"anthropic-beta": "cache-diagnosis-2026-04-07"}


def responses(compared: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5", "input": "the same long preamble"}
    if compared is not None:
        body["prompt_cache_options"] = {"comparison_response_id": compared}
    return body


def messages(previous: str | None = None, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "stream": stream,
        "diagnostics": {"previous_message_id": previous},
        "messages": [{"role": "user", "content": "the same long preamble"}],
    }


def message(mid: str) -> dict[str, Any]:
    return {**anthropic_message("ok", model="claude-sonnet-4-5"), "id": mid}


async def test_a_responses_comparison_names_the_principals_own_answer(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    edge.replies = [Reply.json(response_object(id="resp_alice_1"))]
    edge.reply = Reply.json(response_object(id="resp_next"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/responses", json=responses(), headers=ALICE)
        assert r.status_code == 200
        r = await client.post("/v1/responses", json=responses("resp_alice_1"), headers=ALICE)
        assert r.status_code == 200, r.text
        assert edge.last.json()["prompt_cache_options"] == {
            "comparison_response_id": "resp_alice_1"
        }
        assert len(edge.seen) == 2
        for who, named in ((BOB, "resp_alice_1"), (ALICE, "resp_never")):
            r = await client.post("/v1/responses", json=responses(named), headers=who)
            assert_refused(r, "prompt_cache_options.comparison_response_id", f"'{named}' not found")
            assert r.json()["error"]["code"] == "response_not_found"
        assert len(edge.seen) == 2
        rows = [row for row in await log_rows(client) if row["status"] == 400]
        assert sorted(row["principal"] for row in rows) == ["alice", "bob"]


async def test_a_comparison_may_name_an_unstored_answer(tmp_path: Path, edge: EdgeUpstream) -> None:
    # Codex sends store: false; its own answer is still its own to compare with, not another's
    edge.replies = [Reply.json(response_object(id="resp_alice_1"))]
    edge.reply = Reply.json(response_object(id="resp_next"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        first = {**responses(), "store": False}
        r = await client.post("/v1/responses", json=first, headers=ALICE)
        assert r.status_code == 200
        again = {**responses("resp_alice_1"), "store": False}
        r = await client.post("/v1/responses", json=again, headers=ALICE)
        assert r.status_code == 200, r.text
        assert len(edge.seen) == 2
        r = await client.post("/v1/responses", json=again, headers=BOB)
        assert_refused(r, "prompt_cache_options.comparison_response_id", "not found")
        # an unstored answer is no continuation
        continued = {**responses(), "previous_response_id": "resp_alice_1"}
        r = await client.post("/v1/responses", json=continued, headers=ALICE)
        assert r.status_code == 400 and len(edge.seen) == 2


async def test_an_anthropic_comparison_names_the_principals_own_message(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    start = event("message_start", message={**message("msg_alice_streamed"), "content": []})
    edge.replies = [
        Reply.json(message("msg_alice_whole")),
        sse_reply([start, event("message_stop")]),
    ]
    edge.reply = Reply.json(message("msg_next"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        # a first request opts in (no message to compare with): its answer is Alice's
        r = await client.post("/v1/messages", json=messages(), headers={**ALICE, **BETA})
        assert r.status_code == 200, r.text
        r = await client.post("/v1/messages", json=messages(stream=True), headers=ALICE)
        assert r.status_code == 200 and b"msg_alice_streamed" in r.content
        for mid in ("msg_alice_whole", "msg_alice_streamed"):
            r = await client.post("/v1/messages", json=messages(mid), headers={**BOB, **BETA})
            assert_refused(r, "invalid_request_error", f"Message '{mid}' not found")
            assert r.json()["type"] == "error"  # Anthropic's own shape
            r = await client.post("/v1/messages", json=messages(mid), headers={**ALICE, **BETA})
            assert r.status_code == 200, r.text
            assert edge.last.json()["diagnostics"] == {"previous_message_id": mid}
        assert len(edge.seen) == 4
        r = await client.post("/v1/messages", json=messages("msg_never"), headers=ALICE)
        assert_refused(r, "invalid_request_error", "not found for this client")
        assert len(edge.seen) == 4
        rows = [row for row in await log_rows(client) if row["status"] == 400]
        assert {row["error_type"] for row in rows} == {"message_not_found"}
        assert sorted(row["principal"] for row in rows) == ["alice", "bob", "bob"]


async def test_with_the_clients_own_key_a_comparison_goes_as_sent(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    edge.reply = Reply.json(message("msg_next"))
    async with in_process(settings(edge, shared=False), str(tmp_path / "db")) as client:
        own = {"x-api-key": "sk-ant-own-key-000000001", "anthropic-version": "2023-06-01"}
        r = await client.post("/v1/messages", json=messages("msg_elsewhere"), headers=own)
        assert r.status_code == 200, r.text
        assert edge.last.json()["diagnostics"] == {"previous_message_id": "msg_elsewhere"}
        edge.reply = Reply.json(response_object(id="resp_next"))
        own = {"authorization": "Bearer sk-own-key-0000000001"}
        r = await client.post("/v1/responses", json=responses("resp_elsewhere"), headers=own)
        assert r.status_code == 200, r.text
