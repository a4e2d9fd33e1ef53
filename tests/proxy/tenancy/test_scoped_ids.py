"""With the server's key every tenant is one provider account, whose end-user and cache-route
ids (``user``, ``safety_identifier``, ``prompt_cache_key``, Anthropic's ``metadata.user_id``)
a tenant could set to another's: they go scoped to the principal, stable for it and never equal
across principals. With the client's own key they go as sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.conftest import in_process
from tests.proxy.tenancy.test_provider_refs import ALICE, BOB, keys, settings  # noqa: F401
from tests.support.anthropic_upstream import response_object
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion

JSON = {"content-type": "application/json"}
IDS = {"user": "end-user-7", "safety_identifier": "sid-7", "prompt_cache_key": "route-7"}
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], **IDS}
RESPONSES = {"model": "gpt-5", "input": "hi", **IDS}
USER_ID = '{"device_id":"d7","session_id":"5c1f0d7e-0000-4000-8000-000000000007"}'
MESSAGES = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 9,
    "metadata": {"user_id": USER_ID},
    "messages": [{"role": "user", "content": "hi"}],
}
ROUTES = [
    ("/v1/chat/completions", CHAT, Reply.json(chat_completion("ok"))),
    ("/v1/responses", RESPONSES, Reply.json(response_object(id="resp_1"))),
    ("/v1/messages", MESSAGES, Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))),
]


def _ids(sent: dict[str, Any]) -> dict[str, Any]:
    found = {name: sent.get(name) for name in IDS if name in sent}
    if "metadata" in sent:
        found["user_id"] = sent["metadata"].get("user_id")
    return found


async def _sent(client: Any, edge: EdgeUpstream, who: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for path, body, reply in ROUTES:
        edge.reply = reply
        r = await client.post(path, content=orjson.dumps(body), headers={**who, **JSON})
        assert r.status_code == 200, (path, r.text)
        out.append(_ids(orjson.loads(edge.last.body)))
    return out


async def test_with_the_servers_key_end_user_ids_are_the_principals_own(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        alice, bob, again = [await _sent(client, edge, who) for who in (ALICE, BOB, ALICE)]
    assert alice == again  # stable: a tenant's own attribution and cache route hold
    for mine, theirs in zip(alice, bob, strict=True):
        assert mine.keys() == theirs.keys() and mine
        for name, value in mine.items():
            assert value != theirs[name] and value.startswith("u-")
            assert value not in (*IDS.values(), USER_ID)


async def test_with_the_clients_own_key_they_go_as_sent(tmp_path: Path, edge: EdgeUpstream) -> None:
    async with in_process(settings(edge, shared=False), str(tmp_path / "db")) as client:
        sent = await _sent(client, edge, ALICE)
    assert sent == [IDS, IDS, {"user_id": USER_ID}]
