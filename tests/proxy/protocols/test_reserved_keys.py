"""The proxy's own marks on the messages the rules read (the adapters' provenance tag, a result
of a call the provider holds) are refused from a chat client: its messages reach the rules as
they are, so a client's ``ctxproxy_held`` would keep an orphan result from being repaired (and go
upstream)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rules.messages
from proxy.protocols.body import RESERVED_KEYS
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream


def test_the_reserved_names_are_the_marks() -> None:
    # every mark the rules' messages may carry (``rules.messages``' ``ctxproxy_`` names)
    names = vars(rules.messages).values()
    marks = {v for v in names if isinstance(v, str) and v.startswith("ctxproxy_")}
    assert len(marks) == 8 and set(RESERVED_KEYS) == marks


@pytest.mark.parametrize("key", RESERVED_KEYS)
async def test_a_chat_message_carrying_one_is_refused(
    edge: EdgeUpstream, tmp_path: Path, key: str
) -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "call_x", "content": "out", key: True},
    ]
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        got = await client.post(
            "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}
        )
        rows = await log_rows(client)
    assert got.status_code == 400
    error = got.json()["error"]
    assert error["param"] == f"messages[1].{key}" and "keeps for itself" in error["message"]
    assert edge.seen == [] and [r["status"] for r in rows] == [400]
