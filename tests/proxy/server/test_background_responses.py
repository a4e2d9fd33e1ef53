"""A Responses request with ``background: true`` is answered "queued" by the provider and billed,
and its result is read later with ``GET /v1/responses/{id}``, which the proxy does not relay: the
client was left with a job it paid for and could never read. Such a request is refused, unsent,
with the Responses API's own 400 naming ``background``; streamed, the response comes whole
through the stream, and goes."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.anthropic_upstream import response_events, sse_reply
from tests.support.edge_upstream import EdgeUpstream

BODY = {"model": "gpt-5", "input": "write the report", "background": True}


async def test_a_background_response_is_refused_unless_streamed(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        refused = await client.post("/v1/responses", json=BODY)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["param"] == "background" and "GET /v1/responses/{id}" in error["message"]
        assert not edge.seen  # nothing sent, nothing billed
        edge.reply = sse_reply(response_events("done", id="resp_bg1"))
        streamed = await client.post("/v1/responses", json={**BODY, "stream": True})
        assert streamed.status_code == 200 and b"resp_bg1" in streamed.content
        rows = await log_rows(client)
    assert len(edge.seen) == 1
    assert sorted(row["status"] for row in rows) == [200, 400]
