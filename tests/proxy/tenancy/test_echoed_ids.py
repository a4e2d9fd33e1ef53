"""An id an answer only echoes is not the caller's: the Responses API copies a request's
``metadata`` into its response, and a model writes whatever a client steers into a tool call's
``input``. Read as the caller's own, Bob could plant Alice's container, file and stored item ids
there and then name them with the server's key (``proxy.server.answer_ids``): each stays
refused, whole or streamed, while the ids the provider writes are still kept."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.server.answer_ids import CONTAINER, FILE, ITEM, MAX_EVENT, EventData, answer_ids
from tests.conftest import in_process
from tests.proxy.tenancy.test_provider_refs import (  # noqa: F401
    BOB,
    CODE,
    INTERPRETER,
    keys,
    settings,
)
from tests.support.anthropic_upstream import response_object, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message

PLANTED = {"id": "msg_alice", "container_id": "cntr_alice", "file_id": "file_alice"}


def _sse(*events: dict[str, Any]) -> list[bytes]:
    return [b"event: x\ndata: " + orjson.dumps(e) + b"\n\n" for e in events]


def _bobs_responses_answer(stream: bool) -> Reply:
    answer = {**response_object(id="resp_bob"), "metadata": PLANTED,
              "tools": [{"type": "code_interpreter", "container": "cntr_alice"}]}  # fmt: skip
    if not stream:
        return Reply.json(answer)
    return sse_reply(_sse({"type": "response.created", "response": answer},
                          {"type": "response.completed", "response": answer}))  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
async def test_echoed_metadata_names_nothing_of_the_callers(
    tmp_path: Path, edge: EdgeUpstream, stream: bool
) -> None:
    edge.replies = [_bobs_responses_answer(stream)]
    edge.reply = Reply.json(response_object(id="resp_x"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        planting = {"model": "gpt-5", "input": "hi", "metadata": PLANTED, "stream": stream}
        assert (await client.post("/v1/responses", json=planting, headers=BOB)).status_code == 200
        seen = len(edge.seen)
        for named in (
            [{"type": "item_reference", "id": "msg_alice"}, {"role": "user", "content": "again"}],
            [{"role": "user", "content": [{"type": "input_file", "file_id": "file_alice"}]}],
        ):
            r = await client.post("/v1/responses", json={"model": "gpt-5", "input": named},
                                  headers=BOB)  # fmt: skip
            assert r.status_code == 400, r.text
        tools = [{"type": "code_interpreter", "container": "cntr_alice"}]
        r = await client.post("/v1/responses", json={"model": "gpt-5", "input": "ls",
                              "tools": tools}, headers=BOB)  # fmt: skip
        assert r.status_code == 400 and "cntr_alice" in r.text
        # the response's own output item is still Bob's to reference
        output = response_object(id="resp_bob")["output"][0]["id"]
        mine = [{"type": "item_reference", "id": output}]
        r = await client.post("/v1/responses", json={"model": "gpt-5", "input": mine},
                              headers=BOB)  # fmt: skip
        assert r.status_code == 200, r.text
    assert len(edge.seen) == seen + 1  # none of the refused went upstream


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_calls_input_names_nothing_of_the_callers(
    tmp_path: Path, edge: EdgeUpstream, stream: bool
) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "note",
            "input": {"container_id": "container_alice_1", "file_id": "file_alice_1",
                      "container": {"id": "container_alice_2"}}}  # fmt: skip
    answer = {**anthropic_message("x", model="claude-sonnet-4-5"), "content": [call],
              "stop_reason": "tool_use"}  # fmt: skip
    if stream:
        start = {**answer, "content": []}
        edge.replies = [sse_reply(_sse(
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": call},
            {"type": "message_stop"},
        ))]  # fmt: skip
    else:
        edge.replies = [Reply.json(answer)]
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": CODE, "stream": stream,
            "messages": [{"role": "user", "content": "call note"}]}  # fmt: skip
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        assert (await client.post("/v1/messages", json=body, headers=BOB)).status_code == 200
        for container in ("container_alice_1", "container_alice_2"):
            named = {**body, "stream": False, "container": container}
            r = await client.post("/v1/messages", json=named, headers=BOB)
            assert r.status_code == 400 and container in r.text
        doc = {"type": "document", "source": {"type": "file", "file_id": "file_alice_1"}}
        named = {**body, "stream": False, "messages": [{"role": "user", "content": [doc]}]}
        r = await client.post("/v1/messages", json=named, headers=BOB)
        assert r.status_code == 400 and "file_alice_1" in r.text


def test_ids_are_read_where_the_provider_writes_them() -> None:
    answer = {
        "id": "resp_1",
        "container": {"id": "container_1", "expires_at": "x"},
        "output": [
            {"id": "ci_1", "type": "code_interpreter_call", "container_id": "cntr_1",
             "code": 'print("\\"container_id\\": \\"cntr_text\\"")'},
            {"id": "msg_1", "type": "message", "content": [{"type": "output_text",
             "text": '"file_id": "file_text"', "annotations": [
                 {"type": "container_file_citation", "container_id": "cntr_1",
                  "file_id": "file_1"}]}]},
        ],
        "metadata": PLANTED,
        "instructions": [{"type": "input_file", "file_id": "file_planted"}],
        "text": {"format": {"schema": {"examples": [{"file_id": "file_planted"}]}}},
    }  # fmt: skip
    found = set(answer_ids(orjson.dumps(answer), items=True))
    assert found == {CONTAINER + "container_1", CONTAINER + "cntr_1", FILE + "file_1",
                     ITEM + "ci_1", ITEM + "msg_1"}  # fmt: skip
    assert ITEM + "ci_1" not in set(answer_ids(orjson.dumps(answer), items=False))
    assert list(answer_ids(b"not json", items=True)) == []
    deep: Any = {"file_id": "file_deep"}
    for _ in range(100):
        deep = {"a": deep}
    assert list(answer_ids(orjson.dumps(deep), items=True)) == []


def test_events_are_read_whole_however_the_stream_is_cut() -> None:
    stream = b"".join(_sse({"type": "a", "n": 1}, {"type": "b", "n": 2})).replace(b"\n", b"\r\n")
    for cut in range(1, len(stream)):
        events = EventData()
        data = [*events.feed(stream[:cut]), *events.feed(stream[cut:])]
        assert [orjson.loads(d)["n"] for d in data] == [1, 2]
    events = EventData()
    long = b"data: " + b"x" * (MAX_EVENT + 10)
    assert list(events.feed(long)) == [] and list(events.feed(b"\n\ndata: {}\n\n")) == [b"{}"]


async def test_a_large_answers_ids_are_read_off_the_loop(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    """An answer past ``READ_ON_LOOP`` is parsed on a worker thread: its ids are kept once that
    is done, and only ``MAX_ITEMS`` of its items."""
    from proxy.server.provider_refs import MAX_ITEMS, READ_ON_LOOP

    answer = response_object(id="resp_big")
    item = answer["output"][0]
    answer["output"] = [{**item, "id": f"msg_{i}"} for i in range(MAX_ITEMS + 50)]
    answer["output"].append({"id": "ci_1", "type": "code_interpreter_call",
                             "container_id": "cntr_bob", "code": "x" * READ_ON_LOOP})  # fmt: skip
    edge.replies = [Reply.json(answer)]
    edge.reply = Reply.json(response_object(id="resp_x"))
    tools = [{"type": "code_interpreter", "container": "cntr_bob"}]
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        opening = {"model": "gpt-5", "input": "go", "tools": [INTERPRETER]}
        assert (await client.post("/v1/responses", json=opening, headers=BOB)).status_code == 200
        named = {"model": "gpt-5", "input": "ls", "tools": tools}
        for _ in range(200):  # the worker's parse of 1 MiB takes some 20 ms
            r = await client.post("/v1/responses", json=named, headers=BOB)
            if r.status_code == 200:
                break
            await asyncio.sleep(0.01)
        assert r.status_code == 200, r.text
        kept = [f"msg_{MAX_ITEMS - 1}", f"msg_{MAX_ITEMS + 10}"]
        results = []
        for iid in kept:
            ref = {"model": "gpt-5", "input": [{"type": "item_reference", "id": iid}]}
            results.append((await client.post("/v1/responses", json=ref, headers=BOB)).status_code)
        assert results == [200, 400]


def test_a_long_event_costs_what_it_brings() -> None:
    """Each byte is searched once for an event's end: an 8 MiB event in 16 KiB pieces was
    copied and split again with each, 2.2 s of the event loop."""
    import time

    body = b"data: {" + b'"pad": "' + b"y" * ((8 << 20) - 64) + b'"}\n\n'
    events = EventData()
    started = time.process_time()
    found: list[bytes] = []
    for i in range(0, len(body), 16 << 10):
        found += events.feed(body[i : i + (16 << 10)])
    assert len(found) == 1 and found[0].startswith(b"{")
    assert time.process_time() - started < 0.5
