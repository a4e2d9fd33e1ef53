"""An answer labelled as text (``text/plain``, ``application/octet-stream``, no type) is read as an
event stream only when the client asked for one. The Messages and Responses relays take an event
stream whatever the request, so a whole JSON answer to a request for none, labelled as text, was
relayed as a stream cut before its last event: the client got an error event instead of its
answer. A token count never streams: whatever its label, its answer is read whole (it was
relayed as an empty 200, its upstream connection left open)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import in_process, log_rows
from tests.proxy.upstream.test_stream_deadline import settings
from tests.support.edge_upstream import EdgeUpstream, Reply

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [],
    "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
}
CASES = {
    "messages": (
        "/v1/messages",
        {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
        MESSAGE,
    ),
    "responses": ("/v1/responses", {"model": "gpt-5", "input": "hi"}, RESPONSE),
    "count_tokens": (
        "/v1/messages/count_tokens",
        {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]},
        {"input_tokens": 3},
    ),
}
LABELS = [[("content-type", "text/plain")], [("content-type", "application/octet-stream")], []]


@pytest.mark.parametrize("label", LABELS, ids=["text", "octets", "none"])
@pytest.mark.parametrize("case", CASES)
async def test_a_text_answer_to_no_stream_goes_whole(
    tmp_path: Path, edge: EdgeUpstream, case: str, label: list[tuple[str, str]]
) -> None:
    path, body, answer = CASES[case]
    edge.reply = Reply(200, label, orjson.dumps(answer))
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as client:
        r = await client.post(path, json=body, headers={"authorization": "Bearer k"})
        rows = await log_rows(client)
    assert r.status_code == 200
    assert orjson.loads(r.content) == answer
    assert all(row["error_type"] is None for row in rows)


async def test_an_event_stream_label_on_a_token_count_is_read_whole(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    path, body, answer = CASES["count_tokens"]
    edge.reply = Reply(200, [("content-type", "text/event-stream")], orjson.dumps(answer))
    async with in_process(settings(edge, 0), str(tmp_path / "db")) as client:
        r = await client.post(path, json=body, headers={"authorization": "Bearer k"})
    assert (r.status_code, orjson.loads(r.content)) == (200, answer)
