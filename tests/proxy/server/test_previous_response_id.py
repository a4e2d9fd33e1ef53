"""A Responses request continues a stored response (``previous_response_id``) only if the proxy
relayed that response to the same principal (``proxy.server.response_ids``): in keys mode every
principal's call goes upstream with the server's one key, so the provider cannot tell Alice's
responses from Bob's. An id relayed to Alice (whole or streamed) is forwarded for her; for Bob,
and for an id never relayed, the answer is the Responses API's own 400, logged, never forwarded;
a restarted proxy on the same store still knows Alice's ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.anthropic_upstream import response_events, response_object, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply

ALICE = {"authorization": "Bearer ka-alice-0000000001"}
BOB = {"authorization": "Bearer kb-bob-00000000000002"}
UPSTREAM_KEY = "sk-upstream-secret-999999"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPROXY_KEYS", raising=False)
    monkeypatch.setenv("KEY_ALICE", ALICE["authorization"][7:])
    monkeypatch.setenv("KEY_BOB", BOB["authorization"][7:])
    monkeypatch.setenv("UPSTREAM_KEY", UPSTREAM_KEY)


def settings(edge: EdgeUpstream, **auth: Any) -> Any:
    upstream = {"name": "openai", "match": ["*"], "base_url": edge.base_url}
    return proxy_settings(
        edge.base_url,
        auth={"mode": "keys", "principals": {"alice": ["KEY_ALICE"], "bob": ["KEY_BOB"]}, **auth},
        upstreams=[{**upstream, "api_key_env": "UPSTREAM_KEY"}],
    )


def body(previous: Any = None, stream: bool = False, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": "gpt-5",
        "input": [{"type": "message", "role": "user", "content": "go on"}],
        "stream": stream,
        **extra,
    }
    if previous is not None:
        out["previous_response_id"] = previous
    return out


async def post(client: Any, data: dict[str, Any], headers: dict[str, str]) -> Any:
    return await client.post("/v1/responses", json=data, headers=headers)


async def kept(client: Any) -> int:
    """The response ids in the store."""
    store = client.app.state.services.store
    await store.flush()
    return int((await store.fetchrow("SELECT count(*) FROM response_ids", ()))[0])


def assert_refused(r: Any, shown: str) -> None:
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert error == {
        "message": f"Previous response with id '{shown}' not found for this client.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }


async def test_a_whole_answers_id_is_kept_to_its_principal(tmp_path: Path, edge) -> None:
    edge.replies = [Reply.json(response_object(id="resp_alice1"))]
    edge.reply = Reply.json(response_object(id="resp_next"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await post(client, body(), ALICE)
        assert r.status_code == 200 and r.json()["id"] == "resp_alice1"

        r = await post(client, body("resp_alice1"), ALICE)  # Alice continues her own
        assert r.status_code == 200
        assert len(edge.seen) == 2
        assert edge.last.json()["previous_response_id"] == "resp_alice1"
        assert edge.last.header("authorization") == f"Bearer {UPSTREAM_KEY}"

        r = await post(client, body("resp_alice1"), BOB)  # Bob learned the id: refused
        assert_refused(r, "resp_alice1")
        r = await post(client, body("resp_never_seen"), ALICE)  # an id never relayed: refused
        assert_refused(r, "resp_never_seen")
        assert len(edge.seen) == 2  # neither went upstream

        rows = {row["id"]: row for row in await log_rows(client)}
        refused = [row for row in rows.values() if row["status"] == 400]
        assert sorted(row["principal"] for row in refused) == ["alice", "bob"]
        for row in refused:
            assert row["error_type"] == "previous_response_not_found"
            assert row["protocol"] == "responses" and row["model"] == "gpt-5"


async def test_a_streamed_answers_id_is_kept_to_its_principal(tmp_path: Path, edge) -> None:
    edge.replies = [sse_reply(response_events(id="resp_streamed1"))]
    edge.reply = Reply.json(response_object(id="resp_next"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await post(client, body(stream=True), ALICE)
        assert r.status_code == 200 and b"resp_streamed1" in r.content

        r = await post(client, body("resp_streamed1"), BOB)
        assert_refused(r, "resp_streamed1")
        r = await post(client, body("resp_streamed1", stream=True), ALICE)
        assert r.status_code == 200
        assert edge.last.json()["previous_response_id"] == "resp_streamed1"
        assert len(edge.seen) == 2


async def test_ids_are_still_known_after_a_restart(tmp_path: Path, edge) -> None:
    db = str(tmp_path / "db")
    edge.replies = [
        Reply.json(response_object(id="resp_before1")),
        sse_reply(response_events(id="resp_before2")),
    ]
    edge.reply = Reply.json(response_object(id="resp_next"))
    async with in_process(settings(edge), db) as client:
        assert (await post(client, body(), ALICE)).status_code == 200
        assert (await post(client, body(stream=True), ALICE)).status_code == 200
    async with in_process(settings(edge), db) as client:  # a new process: nothing in memory
        for rid in ("resp_before1", "resp_before2"):
            assert_refused(await post(client, body(rid), BOB), rid)
            r = await post(client, body(rid), ALICE)
            assert r.status_code == 200
            assert edge.last.json()["previous_response_id"] == rid


async def test_an_answer_to_a_request_not_stored_is_not_kept(tmp_path: Path, edge) -> None:
    """``store: false`` (Codex's default): the provider keeps nothing to continue, we neither."""
    edge.replies = [Reply.json(response_object(id="resp_unstored"))]
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        assert (await post(client, body(store=False), ALICE)).status_code == 200
        assert_refused(await post(client, body("resp_unstored"), ALICE), "resp_unstored")
        store = client.app.state.services.store
        await store.flush()
        rows = await store.fetchall("SELECT id FROM response_ids", ())
        assert [r[0] for r in rows] == ["unstored:resp_unstored"]  # a cache comparison's only


async def test_an_upstream_error_keeps_no_id(tmp_path: Path, edge) -> None:
    error = {"error": {"message": "bad", "type": "invalid_request_error", "code": None}}
    edge.replies = [Reply.json({"id": "resp_failed", **error}, status=400)]
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        assert (await post(client, body(), ALICE)).status_code == 400
        assert_refused(await post(client, body("resp_failed"), ALICE), "resp_failed")


@pytest.mark.parametrize("previous", [7, {"id": "resp_x"}, ["resp_x"]])
async def test_a_previous_response_id_that_is_no_string_is_refused(
    tmp_path: Path, edge, previous: Any
) -> None:
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await post(client, body(previous), ALICE)
        assert r.status_code == 400
        error = r.json()["error"]
        assert (error["param"], error["code"]) == ("previous_response_id", "invalid_request")
        assert edge.seen == []


async def test_a_long_id_is_clipped_in_the_answer(tmp_path: Path, edge) -> None:
    rid = "resp_" + "x" * 300
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await post(client, body(rid), ALICE)
        assert_refused(r, rid[:79] + "…")


async def test_the_check_can_be_turned_off(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(response_object(id="resp_next"))
    off = settings(edge, check_previous_response_id=False)
    async with in_process(off, str(tmp_path / "db")) as client:
        r = await post(client, body("resp_someone_elses"), BOB)
        assert r.status_code == 200
        assert edge.last.json()["previous_response_id"] == "resp_someone_elses"
        assert await kept(client) == 0  # nothing kept either: the check off costs nothing


async def test_passthrough_keeps_each_credential_apart(tmp_path: Path, edge) -> None:
    """In passthrough each credential is a principal: the same check holds (it matters when an
    upstream's ``api_key_env`` makes the clients share one provider key)."""
    edge.replies = [Reply.json(response_object(id="resp_pt1"))]
    edge.reply = Reply.json(response_object(id="resp_next"))
    passthrough = proxy_settings(edge.base_url)
    one = {"authorization": "Bearer sk-client-one-0000000"}
    two = {"authorization": "Bearer sk-client-two-0000000"}
    async with in_process(passthrough, str(tmp_path / "db")) as client:
        assert (await post(client, body(), one)).status_code == 200
        assert_refused(await post(client, body("resp_pt1"), two), "resp_pt1")
        assert (await post(client, body("resp_pt1"), one)).status_code == 200
        assert edge.last.header("authorization") == one["authorization"]


async def test_other_protocols_are_not_checked(tmp_path: Path, edge) -> None:
    """Only the Responses API has stored responses: a chat body's stray field passes as sent."""
    edge.reply = Reply.json({"id": "c1", "object": "chat.completion", "choices": []})
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        data = {
            "model": "gpt-5",
            "messages": [{"role": "user", "content": "hi"}],
            "previous_response_id": "resp_x",
        }
        r = await client.post("/v1/chat/completions", json=data, headers=ALICE)
        assert r.status_code == 200
        assert orjson.loads(edge.last.body)["previous_response_id"] == "resp_x"
