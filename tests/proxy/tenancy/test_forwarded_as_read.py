"""With the server's key the upstream gets the body as the proxy read it (``provider_refs.
what_was_read``): the checks read a body as orjson does (a repeated member's last value, escapes
decoded), and a parser there keeping the first would act on what no check saw. With the client's
own key the provider keeps each key's state apart, and the client's bytes go as sent."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import in_process
from tests.proxy.tenancy.test_provider_refs import ALICE, keys, settings  # noqa: F401
from tests.support.anthropic_upstream import response_object
from tests.support.edge_upstream import Reply
from tests.support.factories import anthropic_message

JSON = {"content-type": "application/json"}
HIDDEN = [
    # the id checked is the last; the first is another tenant's
    (b'{"model":"gpt-5","input":"go on","previous_response_id":"resp_theirs",'
     b'"previous_response_id":null}'),
    # a repeated type hides a code interpreter's container from the check
    (b'{"model":"gpt-5","input":"run","tools":[{"type":"code_interpreter",'
     b'"container":"cntr_theirs","type":"function","name":"f","parameters":{}}]}'),
    # the name spelled with an escape, beside another
    b'{"model":"gpt-5","input":"hi","mod\\u0065l":"gpt-5-pro","st\\u006fre":false}',
]  # fmt: skip


async def test_with_the_servers_key_the_upstream_reads_what_was_checked(
    tmp_path: Path, edge
) -> None:
    edge.reply = Reply.json(response_object(id="resp_2"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for raw in HIDDEN:
            r = await client.post("/v1/responses", content=raw, headers={**ALICE, **JSON})
            assert r.status_code == 200, r.text
            sent = edge.last.body
            assert sent == orjson.dumps(orjson.loads(raw)), sent  # each member once, as read
        assert b"resp_theirs" not in b"".join(s.body for s in edge.seen)
        # the container goes in the tool the check read: a function's, no code interpreter's
        assert orjson.loads(edge.seen[1].body)["tools"][0]["type"] == "function"
        anthropic = (b'{"model":"claude-sonnet-4-5","max_tokens":9,"container":"container_theirs",'
                     b'"messages":[{"role":"user","content":"x"}],"container":null}')  # fmt: skip
        edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
        r = await client.post("/v1/messages", content=anthropic, headers={**ALICE, **JSON})
        assert r.status_code == 200 and b"container_theirs" not in edge.last.body


async def test_with_the_clients_own_key_the_bytes_go_as_sent(tmp_path: Path, edge) -> None:
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    body = (b'{"model":"claude-sonnet-4-5","max_tokens":9,"container":"container_mine",'
            b'"messages":[{"role":"user","content":"x"}],  "container":null}')  # fmt: skip
    own = {"x-api-key": "sk-ant-own-key-000001", "anthropic-version": "2023-06-01", **JSON}
    async with in_process(settings(edge, shared=False), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", content=body, headers=own)
    assert r.status_code == 200 and edge.last.body == body
