"""A body naming a member twice goes upstream as its bytes, where a parser keeping the first
would act on a value the proxy never checked (``proxy.server.duplicate_members``): with the
server's key it is refused; with the client's own key it goes as sent."""

from __future__ import annotations

from pathlib import Path

import orjson

from proxy.server.duplicate_members import may_repeat, repeated_member
from tests.conftest import in_process, log_rows
from tests.proxy.tenancy.test_provider_refs import ALICE, keys, settings  # noqa: F401
from tests.support.anthropic_upstream import response_object
from tests.support.edge_upstream import Reply
from tests.support.factories import anthropic_message

JSON = {"content-type": "application/json"}


def test_only_a_body_that_may_repeat_a_checked_member_is_read_again() -> None:
    plain = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    assert not may_repeat(plain)
    assert may_repeat(b'{"model":"a","messages":[],"model":"b"}')
    assert may_repeat(b'{"mod\\u0065l":"a","model":"b"}')  # an escape spells the name
    assert may_repeat(b'{"tools":[{"type":"code_interpreter","container":"c"}]}')
    assert not may_repeat(b'{"messages":[{"content":"caf\\u00e9 \\u003c"}]}')
    assert repeated_member(b'{"a":{"b":1,"b":2}}') == "b"
    assert repeated_member(b'{"model":"a","content":"model"}') is None


async def test_a_repeated_member_is_refused_with_the_servers_key(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(response_object(id="resp_2"))
    hidden = [
        # the id checked is the last; the first is another tenant's
        b'{"model":"gpt-5","input":"go on","previous_response_id":"resp_theirs",'
        b'"previous_response_id":null}',
        # a repeated type hides a code interpreter's container from the check
        b'{"model":"gpt-5","input":"run","tools":[{"type":"code_interpreter",'
        b'"container":"cntr_theirs","type":"function","name":"f","parameters":{}}]}',
        # the name spelled with an escape
        b'{"model":"gpt-5","input":"hi","mod\\u0065l":"gpt-5-pro"}',
    ]
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for body in hidden:
            r = await client.post("/v1/responses", content=body, headers={**ALICE, **JSON})
            assert r.status_code == 400, body
            assert "twice in one object" in r.json()["error"]["message"]
        anthropic = (b'{"model":"claude-sonnet-4-5","max_tokens":9,"container":"container_theirs",'
                     b'"messages":[{"role":"user","content":"x"}],"container":null}')  # fmt: skip
        r = await client.post("/v1/messages", content=anthropic, headers={**ALICE, **JSON})
        assert r.status_code == 400 and r.json()["type"] == "error"
        assert edge.seen == []
        # a name that is a string's value too is no repeat
        fine = b'{"model":"gpt-5","input":[{"role":"user","content":"model"}]}'
        r = await client.post("/v1/responses", content=fine, headers={**ALICE, **JSON})
        assert r.status_code == 200 and edge.last.body == fine
        rows = [row for row in await log_rows(client) if row["status"] == 400]
        assert len(rows) == 4 and {row["error_type"] for row in rows} == {"duplicate_member"}


async def test_with_the_clients_own_key_a_repeat_goes_as_sent(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    body = (b'{"model":"claude-sonnet-4-5","max_tokens":9,"container":"container_mine",'
            b'"messages":[{"role":"user","content":"x"}],"container":null}')  # fmt: skip
    own = {"x-api-key": "sk-ant-own-key-000001", "anthropic-version": "2023-06-01", **JSON}
    async with in_process(settings(edge, shared=False), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", content=body, headers=own)
    assert r.status_code == 200 and edge.last.body == body
