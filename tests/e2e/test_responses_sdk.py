"""Tier 3: the real ``openai`` SDK's ``responses.create`` → a live proxy (``POST /v1/responses``)
→ a scripted Responses upstream (``kind: openai``). Answers arrive intact, streamed event by
event, the upstream gets the request with the client's headers, provider-owned state (encrypted
reasoning, item ids, call_id pairs) is forwarded untouched, and the log row says the protocol,
the sections and the usage."""

from __future__ import annotations

import threading

import httpx
import openai
import orjson
import pytest

from tests.support.agent_proxy import completed_rows, row_of, section
from tests.support.protocol_upstreams import Turn, text, thinking, tool

KEY = "sk-test-secret-key-123456"
MODEL = "gpt-5"
EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}},
        "required": ["cmd"],
    },
}


def client_for(proxy, **kw) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    return openai.OpenAI(base_url=proxy.base_url, api_key=KEY, max_retries=0, **kw)


def test_non_streaming_round_trip_and_log_row(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    responses_upstream.queue(Turn([text("Hello from the Responses fake.")]))
    raw = client_for(proxy).responses.with_raw_response.create(
        model=MODEL, instructions="Be brief.", input="Hi"
    )
    response = raw.parse()
    assert response.output_text == "Hello from the Responses fake."
    assert response.usage.input_tokens_details.cached_tokens == 17

    (seen,) = responses_upstream.responses
    assert seen.path == "/v1/responses"
    assert seen.header("authorization") == f"Bearer {KEY}"
    assert seen.json["input"] == "Hi" and seen.json["instructions"] == "Be brief."

    row = row_of(proxy, raw.headers)
    assert row["protocol"] == "responses"
    assert row["status"] == 200 and row["stream"] == 0 and row["model"] == MODEL
    assert section(row, "system") > 0 and section(row, "user") > 0
    assert row["prompt_tokens"] == 31 and row["cached_tokens"] == 17
    assert row["completion_tokens"] == 8
    assert KEY not in str(proxy.rows())


def test_streaming_relays_each_event_as_it_arrives(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    full = "one two three four"
    responses_upstream.queue(Turn([text(full)], hold=True))
    stream = client_for(proxy).responses.create(
        model=MODEL, input=[{"role": "user", "content": "count"}], stream=True
    )
    pieces: list[str] = []
    kinds: list[str] = []
    got_first = threading.Event()

    def consume() -> None:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                pieces.append(event.delta)
                got_first.set()

    t = threading.Thread(target=consume)
    t.start()
    assert got_first.wait(10), "the first delta did not reach the client while upstream held back"
    assert len(pieces) == 1 and full.startswith(pieces[0]) and pieces[0] != full
    responses_upstream.release.set()
    t.join(10)
    assert "".join(pieces) == full
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"

    (row,) = completed_rows(proxy, 1)
    assert row["protocol"] == "responses" and row["stream"] == 1
    assert row["status"] == 200 and row["ttfb_ms"] is not None
    assert row["completion_tokens"] == 8 and row["cached_tokens"] == 17  # from response.completed


def test_stream_helper_gets_the_final_response(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    responses_upstream.queue(Turn([thinking("Plan it.", "enc-1"), text("Final words.")]))
    with client_for(proxy).responses.stream(model=MODEL, input="go") as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == "Final words."
    assert final.output[0].type == "reasoning"
    assert final.output[0].encrypted_content == "enc-1"


def test_stream_bytes_are_relayed_unchanged(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    responses_upstream.queue(Turn([thinking("Plan.", "enc-raw"), tool("exec_command", cmd="ls")]))
    body = {"model": MODEL, "stream": True, "input": "list files", "tools": [EXEC]}
    with httpx.stream(
        "POST",
        proxy.base_url + "/responses",
        content=orjson.dumps(body),
        headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
        timeout=10,
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        received = b"".join(r.iter_raw())
    assert received == bytes(responses_upstream.streamed[-1])


def test_tool_round_trip_keeps_reasoning_ids_and_call_ids(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    client = client_for(proxy)
    responses_upstream.queue(
        Turn([thinking("Use the shell.", "gAAA-encrypted-blob"), tool("exec_command", cmd="ls")]),
        Turn([text("Two files.")]),
    )
    items: list = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]}
    ]
    first = client.responses.create(
        model=MODEL,
        input=items,
        tools=[EXEC],
        store=False,
        include=["reasoning.encrypted_content"],
    )
    reasoning, call = first.output
    assert reasoning.encrypted_content == "gAAA-encrypted-blob"
    assert call.type == "function_call" and call.name == "exec_command"
    echoed = [o.model_dump(exclude_none=True) for o in first.output]
    items += echoed
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "a.py\nb.py"})
    second = client.responses.create(model=MODEL, input=items, tools=[EXEC], store=False)
    assert second.output_text == "Two files."

    got = responses_upstream.responses[-1]
    sent_items = got.json["input"]
    assert sent_items[1] == echoed[0]  # the reasoning item, encrypted_content and all
    assert sent_items[2]["id"] == call.id and sent_items[2]["call_id"] == call.call_id
    assert sent_items[3]["call_id"] == call.call_id
    assert got.json["tools"] == [EXEC]
    rows = completed_rows(proxy, 2)
    assert [r["protocol"] for r in rows] == ["responses", "responses"]
    assert section(rows[1], "tool_calls") > 0 and section(rows[1], "tool_results") > 0


def test_codex_headers_and_state_pass_through(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    thread = "01a209f7-4ea3-71e1-80b6-59ef52a4f500"
    headers = {
        "session-id": thread,
        "thread-id": thread,
        "originator": "codex_exec",
        "x-codex-window-id": f"{thread}:0",
        "x-codex-beta-features": "remote_compaction_v2",
        "x-codex-turn-metadata": orjson.dumps({"thread_id": thread}).decode(),
        "openai-beta": "responses_websockets=2026-02-06",
        "version": "0.169.0",
    }
    client = client_for(proxy, default_headers=headers)
    previous = client.responses.create(model=MODEL, input="hello", store=True)
    client.responses.create(
        model=MODEL,
        input="hi",
        previous_response_id=previous.id,  # one relayed to this client: forwarded
        prompt_cache_key=thread,
        store=True,
        extra_body={"client_metadata": {"thread_id": thread}},
    )
    _, seen = responses_upstream.responses
    for name, value in headers.items():
        assert seen.header(name) == value, name
    assert seen.json["previous_response_id"] == previous.id
    assert seen.json["prompt_cache_key"] == thread
    assert seen.json["store"] is True
    assert seen.json["client_metadata"] == {"thread_id": thread}
    rows = completed_rows(proxy, 2)
    assert all(r["protocol"] == "responses" and r["session_id"] for r in rows)


@pytest.mark.parametrize("stream", [False, True])
def test_a_stored_responses_call_is_answered_as_sent(
    agent_proxy, responses_upstream, stream
) -> None:  # type: ignore[no-untyped-def]
    """The OpenAI Agents SDK's loop: the call lives in the stored response, and the next
    request sends only its output with ``previous_response_id``. The output is forwarded as
    sent, not taken for an orphan and rewritten into user text (which the provider refuses:
    "No tool output found for function call")."""
    proxy = agent_proxy()
    client = client_for(proxy)
    responses_upstream.queue(Turn([tool("exec_command", cmd="mkdir a")]), Turn([text("Made.")]))
    first = client.responses.create(model=MODEL, input="make a folder", tools=[EXEC], store=True)
    (call,) = first.output
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "exit 0"}
    ask = {"type": "message", "role": "user", "content": "now list it"}
    kw = {"model": MODEL, "tools": [EXEC], "previous_response_id": first.id}
    if stream:
        with client.responses.stream(input=[output, ask], **kw) as events:
            second = events.get_final_response()
    else:
        second = client.responses.create(input=[output, ask], **kw)
    assert second.output_text == "Made."
    got = responses_upstream.responses[-1].json
    assert got["input"] == [output, ask]
    assert got["previous_response_id"] == first.id
    report = proxy.row(completed_rows(proxy, 2)[1]["id"])["report"]
    assert report["repairs"] == [] and report["warnings"] == []
    assert report["prune"].get("skipped") == "previous_response_id"


@pytest.mark.parametrize(
    "extra",
    [
        {"conversation": "conv_123"},
        {"conversation": {"id": "conv_123"}},
        {"input_before": [{"type": "item_reference", "id": "fc_stored"}]},
    ],
    ids=["conversation", "conversation-object", "item_reference"],
)
def test_outputs_of_calls_the_provider_holds_are_forwarded_as_sent(  # type: ignore[no-untyped-def]
    agent_proxy, responses_upstream, extra
) -> None:
    proxy = agent_proxy()
    responses_upstream.queue(Turn([text("Done.")]))
    before = extra.pop("input_before", [])
    items = [
        {"type": "message", "role": "user", "content": "go"},
        *before,
        {"type": "function_call_output", "call_id": "call_held1", "output": "done"},
    ]
    client_for(proxy).responses.create(model=MODEL, input=items, tools=[EXEC], extra_body=extra)
    assert responses_upstream.responses[-1].json["input"] == items
    report = proxy.row(completed_rows(proxy, 1)[0]["id"])["report"]
    assert report["repairs"] == [] and report["warnings"] == []


def test_an_output_without_its_call_and_without_stored_history_is_still_repaired(  # type: ignore[no-untyped-def]
    agent_proxy, responses_upstream
) -> None:
    """Nothing stored to answer it: the orphan output is kept as readable user text."""
    proxy = agent_proxy()
    responses_upstream.queue(Turn([text("Done.")]))
    items = [
        {"type": "message", "role": "user", "content": "go"},
        {"type": "function_call_output", "call_id": "call_gone1", "output": "done"},
    ]
    client_for(proxy).responses.create(model=MODEL, input=items, tools=[EXEC])
    sent = responses_upstream.responses[-1].json["input"]
    assert [item.get("type") for item in sent] == ["message", "message"]
    assert "call_gone1" in orjson.dumps(sent[1]).decode()
    report = proxy.row(completed_rows(proxy, 1)[0]["id"])["report"]
    assert [r["kind"] for r in report["repairs"]] == ["orphan_result"]


def test_upstream_error_keeps_openai_shape(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    responses_upstream.queue(Turn(status=500))
    with pytest.raises(openai.InternalServerError) as info:
        client_for(proxy).responses.create(model=MODEL, input="x")
    error = info.value.response.json()["error"]
    assert {"message", "type"} <= set(error)
    row = row_of(proxy, info.value.response.headers)
    assert row["status"] == 500 and row["protocol"] == "responses"


def test_bad_request_gets_openai_error(agent_proxy, responses_upstream) -> None:  # type: ignore[no-untyped-def]
    proxy = agent_proxy()
    r = httpx.post(
        proxy.base_url + "/responses",
        content=b"{not json",
        headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
    )
    assert r.status_code == 400
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert responses_upstream.responses == []
    assert row_of(proxy, r.headers)["protocol"] == "responses"
