"""Provider-side state named by id goes upstream with the server's key only for the principal it
was relayed to (``proxy.server.provider_refs``): a code-execution container (Anthropic's
``container``, a Responses ``code_interpreter`` tool's) another tenant learned runs its code over
the first tenant's files; a Gemini ``cachedContent`` or a Responses ``conversation``, which no
call the proxy relays makes, is refused. With the client's own key going upstream, every id
passes as sent (the provider keeps each key's state apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.anthropic_upstream import event, response_events, response_object, sse_reply
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message

ALICE = {"authorization": "Bearer ka-alice-0000000001", "anthropic-version": "2023-06-01"}
BOB = {"authorization": "Bearer kb-bob-00000000000002", "anthropic-version": "2023-06-01"}
CODE = [{"type": "code_execution_20250825", "name": "code_execution"}]
INTERPRETER = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPROXY_KEYS", raising=False)
    monkeypatch.setenv("KEY_ALICE", ALICE["authorization"][7:])
    monkeypatch.setenv("KEY_BOB", BOB["authorization"][7:])
    monkeypatch.setenv("SERVER_KEY", "sk-server-key-00000000001")


def settings(edge: EdgeUpstream, shared: bool = True) -> Any:
    key = {"api_key_env": "SERVER_KEY"} if shared else {}
    auth = (
        {"mode": "keys", "principals": {"alice": ["KEY_ALICE"], "bob": ["KEY_BOB"]}}
        if shared
        else {"mode": "passthrough"}
    )
    return proxy_settings(
        edge.base_url,
        auth=auth,
        upstreams=[
            {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url,
             **key},
            {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url, **key},
            {"name": "openai", "match": ["*"], "base_url": edge.base_url, **key},
        ],
    )  # fmt: skip


def messages(container: Any = None, tools: Any = CODE) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "tools": tools,
        "messages": [{"role": "user", "content": "run the analysis"}],
    }
    if container is not None:
        body["container"] = container
    return body


def with_container(cid: str) -> dict[str, Any]:
    answer = anthropic_message("done", model="claude-sonnet-4-5")
    return {**answer, "container": {"id": cid, "expires_at": "2026-12-02T10:00:00Z"}}


def assert_refused(r: Any, param_word: str, said: str) -> None:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert said in error["message"] and param_word in r.text


async def test_an_anthropic_container_is_its_principals_alone(tmp_path: Path, edge) -> None:
    edge.replies = [Reply.json(with_container("container_alice_1"))]
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages(), headers=ALICE)
        assert r.json()["container"]["id"] == "container_alice_1"
        # Alice goes on in her container, by id or as an object
        for named in ("container_alice_1", {"id": "container_alice_1"}):
            r = await client.post("/v1/messages", json=messages(named), headers=ALICE)
            assert r.status_code == 200
            assert edge.last.json()["container"] == named
        assert len(edge.seen) == 3
        # Bob learned the id: refused, never forwarded; an id never relayed likewise
        r = await client.post("/v1/messages", json=messages("container_alice_1"), headers=BOB)
        assert_refused(r, "container", "Container 'container_alice_1' not found")
        assert r.json()["type"] == "error"  # Anthropic's own shape
        r = await client.post("/v1/messages", json=messages("container_never"), headers=ALICE)
        assert_refused(r, "container", "not found for this client")
        assert len(edge.seen) == 3
        rows = [row for row in await log_rows(client) if row["status"] == 400]
        assert sorted(row["principal"] for row in rows) == ["alice", "bob"]
        assert {row["error_type"] for row in rows} == {"container_not_found"}


async def test_a_streamed_answers_container_is_kept(tmp_path: Path, edge) -> None:
    """Named in the stream's last events, after a chunk's end cuts it in two."""
    start = event("message_start", message={**anthropic_message("", model="claude-x"),
                                             "content": []})  # fmt: skip
    delta = event("message_delta", delta={"stop_reason": "end_turn",
                  "container": {"id": "container_streamed", "expires_at": "x"}},
                  usage={"output_tokens": 3})  # fmt: skip
    cut = delta.index(b"streamed")
    edge.replies = [sse_reply([start, delta[:cut], delta[cut:], event("message_stop")])]
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json={**messages(), "stream": True}, headers=ALICE)
        assert r.status_code == 200 and b"container_streamed" in r.content
        r = await client.post("/v1/messages", json=messages("container_streamed"), headers=BOB)
        assert r.status_code == 400
        r = await client.post("/v1/messages", json=messages("container_streamed"), headers=ALICE)
        assert r.status_code == 200


async def test_a_code_interpreters_container_is_its_principals_alone(tmp_path: Path, edge) -> None:
    call = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed",
            "code": "print(1)", "container_id": "cntr_alice_9", "outputs": []}  # fmt: skip
    answer = response_object(id="resp_1")
    edge.replies = [Reply.json({**answer, "output": [call, *answer["output"]]})]
    edge.reply = Reply.json(response_object(id="resp_2"))

    def body(container: Any) -> dict[str, Any]:
        tool = {"type": "code_interpreter", "container": container}
        return {"model": "gpt-5", "input": "plot it", "tools": [tool]}

    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/responses", json=body({"type": "auto"}), headers=ALICE)
        assert r.status_code == 200
        r = await client.post("/v1/responses", json=body("cntr_alice_9"), headers=ALICE)
        assert r.status_code == 200 and edge.last.json()["tools"][0]["container"] == "cntr_alice_9"
        r = await client.post("/v1/responses", json=body("cntr_alice_9"), headers=BOB)
        assert_refused(r, "tools[0].container", "Container 'cntr_alice_9' not found")
        assert r.json()["error"]["param"] == "tools[0].container"
        assert len(edge.seen) == 2


async def test_state_no_relayed_call_makes_is_refused_with_the_servers_key(
    tmp_path: Path, edge
) -> None:
    gemini = {"contents": [{"role": "user", "parts": [{"text": "sum up"}]}],
              "cachedContent": "cachedContents/someone-elses"}  # fmt: skip
    responses = {"model": "gpt-5", "input": "go on", "conversation": "conv_someone_elses"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1beta/models/gemini-2.5-pro:generateContent", json=gemini, headers=ALICE
        )
        assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert "cachedContent" in r.json()["error"]["message"]
        r = await client.post("/v1/responses", json=responses, headers=ALICE)
        assert_refused(r, "conversation", "conversation cannot be used")
        prompt = {"model": "gpt-5", "input": "go", "prompt": {"id": "pmpt_someone", "version": "3"}}
        r = await client.post("/v1/responses", json=prompt, headers=ALICE)
        assert_refused(r, "prompt", "prompt cannot be used")
    assert edge.seen == []


async def test_with_the_clients_own_key_every_id_passes(tmp_path: Path, edge) -> None:
    """The provider keeps each key's state apart: nothing to check, nothing kept."""
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    gemini = {"contents": [{"role": "user", "parts": [{"text": "sum up"}]}],
              "cachedContent": "cachedContents/mine"}  # fmt: skip
    own = {"x-api-key": "sk-ant-own-key-000001", "anthropic-version": "2023-06-01"}
    async with in_process(settings(edge, shared=False), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages("container_made_elsewhere"),
                              headers=own)  # fmt: skip
        assert r.status_code == 200 and edge.last.json()["container"] == "container_made_elsewhere"
        edge.reply = Reply.json({"candidates": []})
        r = await client.post("/v1beta/models/gemini-2.5-pro:generateContent", json=gemini,
                              headers={"x-goog-api-key": "AIza-own-key-0001"})  # fmt: skip
        assert r.status_code == 200
        assert orjson.loads(edge.last.body)["cachedContent"] == "cachedContents/mine"


async def test_a_cached_contents_tokens_are_not_counted_with_the_servers_key(
    tmp_path: Path, edge
) -> None:
    """``countTokens`` relayed to Gemini would tell another's cached content's size."""
    count = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
             "cachedContent": "cachedContents/someone-elses"}  # fmt: skip
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post(
            "/v1beta/models/gemini-2.5-pro:countTokens", json=count, headers=ALICE
        )
    assert r.status_code == 400 and "cachedContent" in r.json()["error"]["message"]
    assert edge.seen == []


async def test_gemini_refuses_cached_content_in_either_spelling(tmp_path: Path, edge) -> None:
    """Gemini reads ``cached_content`` as it reads ``cachedContent``."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "cached_content": "cachedContents/someone-elses"}  # fmt: skip
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for verb, sent in (("generateContent", body),
                           ("countTokens", {"generateContentRequest": body})):  # fmt: skip
            r = await client.post(f"/v1beta/models/gemini-2.5-pro:{verb}", json=sent, headers=ALICE)
            assert r.status_code == 400 and "cachedContent" in r.json()["error"]["message"]
    assert edge.seen == []


def document(fid: str) -> dict[str, Any]:
    return {"type": "document", "source": {"type": "file", "file_id": fid}}


def with_file(fid: str) -> dict[str, Any]:
    """An answer whose code execution wrote ``fid``."""
    output = {"type": "bash_code_execution_result", "stdout": "", "stderr": "", "return_code": 0,
              "content": [{"type": "bash_code_execution_output", "file_id": fid}]}  # fmt: skip
    result = {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_1",
              "content": output}  # fmt: skip
    answer = with_container("container_alice_2")
    return {**answer, "content": [result, *answer["content"]]}


async def test_a_file_a_code_execution_wrote_is_its_principals_alone(tmp_path: Path, edge) -> None:
    edge.replies = [Reply.json(with_file("file_alice_plot"))]
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))

    def naming(*blocks: dict[str, Any]) -> dict[str, Any]:
        body = messages()
        content = [*blocks, {"type": "text", "text": "read"}]
        return {**body, "messages": [{"role": "user", "content": content}]}

    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages(), headers=ALICE)
        assert r.status_code == 200
        upload = {"type": "container_upload", "file_id": "file_alice_plot"}
        for block in (document("file_alice_plot"), upload):
            r = await client.post("/v1/messages", json=naming(block), headers=ALICE)
            assert r.status_code == 200, r.text
        assert len(edge.seen) == 3
        r = await client.post("/v1/messages", json=naming(document("file_alice_plot")),
                              headers=BOB)  # fmt: skip
        assert_refused(r, "error", "File 'file_alice_plot' not")  # Anthropic's: no param
        # in a tool result, and an upload the proxy never relayed
        result = {"type": "tool_result", "tool_use_id": "t1", "content": [upload]}
        r = await client.post("/v1/messages", json=naming(result), headers=BOB)
        assert_refused(r, "error", "File 'file_alice_plot' not found for this")
        r = await client.post("/v1/messages", json=naming(document("file_uploaded_elsewhere")),
                              headers=ALICE)  # fmt: skip
        assert_refused(r, "error", "File 'file_uploaded_elsewhere' not found")
        # the key spelled with an escape is the same key to the provider's parser
        escaped = orjson.dumps(naming(document("file_alice_plot"))).replace(
            b'"file_id"', b'"file\\u005fid"'
        )
        r = await client.post("/v1/messages", content=escaped,
                              headers={**BOB, "content-type": "application/json"})  # fmt: skip
        assert r.status_code == 400
        assert len(edge.seen) == 3
        rows = [row for row in await log_rows(client) if row["status"] == 400]
        assert {row["error_type"] for row in rows} == {"file_not_found"}


async def test_responses_and_chat_files_and_stores_with_the_servers_key(
    tmp_path: Path, edge
) -> None:
    cite = {"type": "container_file_citation", "container_id": "cntr_alice_3",
            "file_id": "cfile_alice_csv", "filename": "out.csv", "start_index": 0,
            "end_index": 1}  # fmt: skip
    answer = response_object(id="resp_1")
    message = answer["output"][-1]
    part = {**message["content"][0], "annotations": [cite]}
    edge.replies = [Reply.json({**answer, "output": [{**message, "content": [part]}]})]
    edge.reply = Reply.json(response_object(id="resp_2"))

    def body(container: Any, content: Any = "plot it") -> dict[str, Any]:
        tool = {"type": "code_interpreter", "container": container}
        return {"model": "gpt-5", "tools": [tool],
                "input": [{"role": "user", "content": content}]}  # fmt: skip

    mine = {"type": "auto", "file_ids": ["cfile_alice_csv"]}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/responses", json=body({"type": "auto"}), headers=ALICE)
        assert r.status_code == 200
        r = await client.post("/v1/responses", json=body(mine), headers=ALICE)
        assert r.status_code == 200, r.text
        r = await client.post("/v1/responses", json=body(mine), headers=BOB)
        assert_refused(r, "tools[0].container.file_ids[0]", "File 'cfile_alice_csv' not found")
        part_file = [{"type": "input_file", "file_id": "file-uploaded"}]
        r = await client.post("/v1/responses", json=body({"type": "auto"}, part_file),
                              headers=ALICE)  # fmt: skip
        assert_refused(r, "input[0].content[0].file_id", "File 'file-uploaded' not found")
        stores = {"type": "file_search", "vector_store_ids": ["vs_someone"]}
        search = {"model": "gpt-5", "input": "find it", "tools": [stores]}
        r = await client.post("/v1/responses", json=search, headers=ALICE)
        assert_refused(r, "tools[0].vector_store_ids", "vector_store_ids cannot be used")
        mask = {"type": "image_generation", "input_image_mask": {"file_id": "file-uploaded"}}
        r = await client.post("/v1/responses", json={**search, "tools": [mask]}, headers=ALICE)
        assert_refused(r, "tools[0].input_image_mask.file_id", "not found for this client")
        chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": [
            {"type": "file", "file": {"file_id": "file-uploaded"}}]}]}  # fmt: skip
        r = await client.post("/v1/chat/completions", json=chat, headers=ALICE)
        assert_refused(r, "messages[0].content[0].file.file_id", "not found for this client")
        assert len(edge.seen) == 2


async def test_a_stored_item_is_referenced_by_its_principal_alone(tmp_path: Path, edge) -> None:
    """An ``item_reference`` names an item of a stored response: Alice's, streamed or whole."""
    whole = response_object(id="resp_a1")
    whole["output"][0]["id"] = "msg_alice_whole"
    streamed = response_events(id="resp_a2")
    edge.replies = [Reply.json(whole), sse_reply(
        [e.replace(b"msg_r1", b"msg_alice_streamed") for e in streamed])]  # fmt: skip
    edge.reply = Reply.json(response_object(id="resp_next"))

    def referring(iid: str) -> dict[str, Any]:
        return {"model": "gpt-5", "input": [{"type": "item_reference", "id": iid},
                                            {"role": "user", "content": "go on"}]}  # fmt: skip

    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/responses", json={"model": "gpt-5", "input": "a"},
                              headers=ALICE)  # fmt: skip
        assert r.status_code == 200
        r = await client.post("/v1/responses", json={"model": "gpt-5", "input": "b",
                              "stream": True}, headers=ALICE)  # fmt: skip
        assert r.status_code == 200 and b"msg_alice_streamed" in r.content
        for iid in ("msg_alice_whole", "msg_alice_streamed"):
            r = await client.post("/v1/responses", json=referring(iid), headers=ALICE)
            assert r.status_code == 200, r.text
            r = await client.post("/v1/responses", json=referring(iid), headers=BOB)
            assert_refused(r, "input[0].id", f"Item with id '{iid}' not found for this client")
        r = await client.post("/v1/responses", json=referring("msg_never"), headers=ALICE)
        assert_refused(r, "input[0].id", "not found for this client")
        assert len(edge.seen) == 4
        # an item with no type (or a null one) is an item reference to the provider too
        for untyped in ({"id": "msg_alice_whole"}, {"type": None, "id": "msg_alice_whole"},
                        {"id": "msg_alice_whole", "role": "user", "content": "x"}):  # fmt: skip
            body = {"model": "gpt-5", "input": [untyped, {"role": "user", "content": "go"}]}
            r = await client.post("/v1/responses", json=body, headers=BOB)
            assert_refused(r, "input[0].id", "Item with id 'msg_alice_whole' not found")
            r = await client.post("/v1/responses", json=body, headers=ALICE)
            assert r.status_code == 200, r.text
        assert len(edge.seen) == 7
        # with store false nothing was kept: an untyped item carrying its content is its own
        own = {"model": "gpt-5", "store": False,
               "input": [{"id": "msg_mine", "role": "user", "content": "x"}]}  # fmt: skip
        r = await client.post("/v1/responses", json=own, headers=BOB)
        assert r.status_code == 200, r.text
    # with the client's own key the provider keeps each key's items apart
    async with in_process(settings(edge, shared=False), str(tmp_path / "db2")) as client:
        own = {"authorization": "Bearer sk-own-key-0000000001"}
        r = await client.post("/v1/responses", json=referring("msg_made_elsewhere"), headers=own)
        assert r.status_code == 200


@pytest.mark.parametrize(
    "uri",
    [
        "https://generativelanguage.googleapis.com/v1beta/files/abc-123",
        "files/abc-123",
        " HTTPS://GenerativeLanguage.googleapis.com./v1beta/files/abc-123",
        "gs://the-operators-bucket/report.pdf",
    ],
)
async def test_a_gemini_file_in_the_providers_storage_is_refused_with_the_servers_key(
    tmp_path: Path, edge, uri: str
) -> None:
    """A Files API file or a Cloud Storage object is read with the server's credentials: no
    relayed call made it for the principal (the proxy relays no upload). A URL on the web passes;
    with the client's own key every URI does."""

    def gemini(file: dict[str, Any], where: str = "contents") -> dict[str, Any]:
        parts = [{"text": "sum up"}, file]
        if where == "system":
            return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                    "system_instruction": {"parts": parts}}  # fmt: skip
        if where == "function":
            call = {"functionCall": {"name": "read", "args": {}}}
            result = {"functionResponse": {"name": "read", "response": {}, "parts": [file]}}
            return {"contents": [{"role": "user", "parts": [{"text": "read it"}]},
                                 {"role": "model", "parts": [call]},
                                 {"role": "user", "parts": [result]}]}  # fmt: skip
        return {"contents": [{"role": "user", "parts": parts}]}

    edge.reply = Reply.json({"candidates": []})
    path = "/v1beta/models/gemini-2.5-pro"
    spellings = [{"fileData": {"fileUri": uri, "mimeType": "application/pdf"}},
                 {"file_data": {"file_uri": uri, "mime_type": "application/pdf"}}]  # fmt: skip
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for file in spellings:
            for where in ("contents", "system", "function"):
                body = gemini(file, where)
                r = await client.post(f"{path}:generateContent", json=body, headers=ALICE)
                assert r.status_code == 400, (where, r.text)
                assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
                assert "not found for this client" in r.json()["error"]["message"]
            r = await client.post(f"{path}:countTokens", json=gemini(file), headers=ALICE)
            assert r.status_code == 400, r.text
        assert edge.seen == []
        web = {"fileData": {"fileUri": "https://www.youtube.com/watch?v=x", "mimeType": "video/*"}}
        r = await client.post(f"{path}:generateContent", json=gemini(web), headers=ALICE)
        assert r.status_code == 200, r.text
    async with in_process(settings(edge, shared=False), str(tmp_path / "db2")) as client:
        r = await client.post(f"{path}:generateContent", json=gemini(spellings[0]),
                              headers={"x-goog-api-key": "AIza-own-key-0001"})  # fmt: skip
        assert r.status_code == 200
        assert uri in edge.last.body.decode()


async def test_a_custom_skill_is_refused_with_the_servers_key(tmp_path: Path, edge) -> None:
    """A custom skill is made by the Skills API, which the proxy does not relay: with the
    server's key it may be anyone's. Anthropic's own skills pass."""
    edge.reply = Reply.json(anthropic_message("ok", model="claude-sonnet-4-5"))
    custom = {"type": "custom", "skill_id": "skill_01someone", "version": "latest"}
    own = {"type": "anthropic", "skill_id": "xlsx", "version": "latest"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages({"skills": [own, custom]}),
                              headers=ALICE)  # fmt: skip
        assert_refused(r, "container.skills[1]", "custom skill (container.skills[1]) cannot")
        assert edge.seen == []
        r = await client.post("/v1/messages", json=messages({"skills": [own]}), headers=ALICE)
        assert r.status_code == 200, r.text
        assert edge.last.json()["container"] == {"skills": [own]}


async def test_a_count_names_files_as_a_message_does(tmp_path: Path, edge) -> None:
    """``count_tokens`` relayed to Anthropic with the server's key would tell the size of a
    file another tenant's code execution wrote, or of an upload the proxy never relayed."""
    edge.replies = [Reply.json(with_file("file_alice_plot"))]

    def count(file_id: str) -> dict[str, Any]:
        content = [document(file_id), {"type": "text", "text": "read"}]
        return {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": content}]}

    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/messages", json=messages(), headers=ALICE)
        assert r.status_code == 200
        edge.reply = Reply.json({"input_tokens": 1234})
        path = "/v1/messages/count_tokens"
        r = await client.post(path, json=count("file_alice_plot"), headers=ALICE)
        assert r.status_code == 200 and r.json() == {"input_tokens": 1234}, r.text
        for who, file_id in ((BOB, "file_alice_plot"), (ALICE, "file_uploaded_elsewhere")):
            r = await client.post(path, json=count(file_id), headers=who)
            assert_refused(r, "error", f"File '{file_id}' not found for this client")
        assert len(edge.seen) == 2


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"fileSearch": {"fileSearchStoreNames": ["fileSearchStores/someone"]}},
         "tools[0].fileSearch.fileSearchStoreNames"),
        ({"file_search": {"file_search_store_names": ["fileSearchStores/someone"]}},
         "tools[0].file_search.file_search_store_names"),
        ({"retrieval": {"vertexAiSearch": {"datastore": "projects/p/dataStores/d"}}},
         "tools[0].retrieval"),
    ],
)  # fmt: skip
async def test_a_gemini_search_store_is_refused_with_the_servers_key(
    tmp_path: Path, edge, tool: dict[str, Any], param: str
) -> None:
    """A Gemini file search store, or a retrieval tool's source, is made by calls the proxy
    does not relay: with the server's key it is the project's, not the principal's."""
    body = {"contents": [{"role": "user", "parts": [{"text": "find it"}]}], "tools": [tool]}
    path = "/v1beta/models/gemini-2.5-pro"
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for verb in ("generateContent", "countTokens"):
            r = await client.post(f"{path}:{verb}", json=body, headers=ALICE)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["message"].startswith(f"{param} cannot be used")
    assert edge.seen == []


async def test_the_other_ways_to_name_a_file_an_item_or_an_audio_answer(
    tmp_path: Path, edge
) -> None:
    """Four ways in that got past the checks: a ``computer_call_output``'s screenshot (its
    ``output`` one object, not a list), an image inside an Anthropic ``document`` of ``content``
    source, a ``reasoning`` item by its id alone (the provider reads the rest from its store),
    and a chat assistant message's ``audio.id`` (an earlier audio answer)."""
    from tests.support.factories import chat_completion

    spoken = chat_completion("")
    spoken["choices"][0]["message"]["audio"] = {"id": "audio_alice_1", "data": "UklG",
                                                "expires_at": 1, "transcript": "hi"}  # fmt: skip
    reasoned = response_object(id="resp_r1")
    reasoned["output"].insert(0, {"type": "reasoning", "id": "rs_alice_1", "summary": []})
    edge.replies = [Reply.json(spoken), Reply.json(reasoned)]
    edge.reply = Reply.json(chat_completion("ok"))
    audio = {"model": "gpt-4o-audio-preview", "modalities": ["text", "audio"],
             "audio": {"voice": "alloy", "format": "wav"},
             "messages": [{"role": "user", "content": "say hi"}]}  # fmt: skip
    again = {**audio, "messages": [*audio["messages"],
             {"role": "assistant", "audio": {"id": "audio_alice_1"}},
             {"role": "user", "content": "again"}]}  # fmt: skip
    reasoning = {"model": "gpt-5", "input": [
        {"type": "reasoning", "id": "rs_alice_1", "summary": []},
        {"role": "user", "content": "go on"}]}  # fmt: skip
    screenshot = {"model": "computer-use-preview", "input": [
        {"type": "computer_call_output", "call_id": "c1",
         "output": {"type": "computer_screenshot", "file_id": "file-alice-shot"}}]}  # fmt: skip
    nested = messages(tools=None)
    image = {"type": "image", "source": {"type": "file", "file_id": "file_alice_png"}}
    doc = {"type": "document", "source": {"type": "content", "content": [image]}}
    nested["messages"] = [{"role": "user", "content": [doc, {"type": "text", "text": "read"}]}]
    del nested["tools"]
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        r = await client.post("/v1/chat/completions", json=audio, headers=ALICE)
        assert r.status_code == 200, r.text
        r = await client.post("/v1/responses", json={"model": "gpt-5", "input": "think"},
                              headers=ALICE)  # fmt: skip
        assert r.status_code == 200, r.text
        r = await client.post("/v1/chat/completions", json=again, headers=ALICE)
        assert r.status_code == 200, r.text  # her own
        r = await client.post("/v1/chat/completions", json=again, headers=BOB)
        assert_refused(r, "messages[1].audio.id", "Audio 'audio_alice_1' not found")
        r = await client.post("/v1/responses", json=reasoning, headers=ALICE)
        assert r.status_code == 200, r.text  # her own
        r = await client.post("/v1/responses", json=reasoning, headers=BOB)
        assert_refused(r, "input[0].id", "Item with id 'rs_alice_1' not found")
        # with its encrypted content the item is the client's own text, not a lookup
        carried = {**reasoning["input"][0], "encrypted_content": "gAAAA-bob"}
        r = await client.post("/v1/responses", json={**reasoning, "input": [carried]},
                              headers=BOB)  # fmt: skip
        assert r.status_code == 200, r.text
        r = await client.post("/v1/responses", json=screenshot, headers=BOB)
        assert_refused(r, "input[0].output.file_id", "File 'file-alice-shot' not found")
        r = await client.post("/v1/messages", json=nested, headers=BOB)
        assert_refused(r, "error", "File 'file_alice_png' not found")
        assert len(edge.seen) == 5


async def test_with_store_false_a_reasoning_item_carrying_its_text_is_the_clients_own(
    tmp_path: Path, edge
) -> None:
    """A Responses server that is not OpenAI's (vLLM) answers reasoning as text, with no
    ``encrypted_content``; with ``store: false`` no item id is kept, the client's own included,
    so its reasoning passed back was refused as another's. One holding nothing but its id is
    still a lookup."""
    edge.reply = Reply.json(response_object(id="resp_v"))
    own = {"type": "reasoning", "id": "rs_vllm_1", "summary": [],
           "content": [{"type": "reasoning_text", "text": "think"}]}  # fmt: skip
    bare = {"type": "reasoning", "id": "rs_alice_9", "summary": []}
    ask = {"role": "user", "content": "go on"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        body = {"model": "gpt-5", "store": False, "input": [own, ask]}
        r = await client.post("/v1/responses", json=body, headers=BOB)
        assert r.status_code == 200, r.text
        body = {"model": "gpt-5", "store": False, "input": [bare, ask]}
        r = await client.post("/v1/responses", json=body, headers=BOB)
        assert_refused(r, "input[0].id", "Item with id 'rs_alice_9' not found")
        assert len(edge.seen) == 1


async def test_count_tokens_bodies_are_kept_apart_per_principal(
    tmp_path: Path, edge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini's ``countTokens`` read its body through a body memory shared by every principal:
    Bob's request for a body starting as Alice's was parsed from hers, faster than a miss, a
    clock telling him what she sent. Each principal's bodies are its own."""
    from proxy.protocols.body_memory import BodyMemory

    read_as: list[str] = []
    real = BodyMemory.read

    def spy(self: BodyMemory, raw: bytes, hint: str | None = None, principal: str = "",
            **kw: Any) -> Any:  # fmt: skip
        read_as.append(principal)
        return real(self, raw, hint, principal, **kw)

    monkeypatch.setattr(BodyMemory, "read", spy)
    edge.reply = Reply.json({"totalTokens": 3})
    count = {"contents": [{"role": "user", "parts": [{"text": "the launch plan is …"}]}]}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for who in (ALICE, BOB):
            r = await client.post(
                "/v1beta/models/gemini-2.5-pro:countTokens", json=count, headers=who
            )
            assert r.status_code == 200, r.text
    assert len(read_as) == 2 and read_as[0] and read_as[1] and read_as[0] != read_as[1]


STORAGE = ["gs://the-operators-bucket/report.pdf",
           "https://generativelanguage.googleapis.com/v1beta/files/a-1"]  # fmt: skip


@pytest.mark.parametrize("uri", STORAGE)
async def test_googles_storage_named_by_url_through_a_bridge_is_refused(
    tmp_path: Path, edge, uri: str
) -> None:
    """Chat, Responses and Messages to a Gemini model: litellm hands a URL on Google's storage
    to Google as a file, read with the server's credentials (another tenant's upload, any object
    of the operator's bucket), so it is refused as a Gemini ``fileUri`` is."""
    text = {"type": "text", "text": "sum up"}
    chat = [{"type": "image_url", "image_url": {"url": uri}},
            {"type": "image_url", "image_url": uri},
            {"type": "file", "file": {"file_url": uri, "format": "application/pdf"}}]  # fmt: skip
    responses = [{"type": "input_file", "file_url": uri},
                 {"type": "input_image", "image_url": uri}]  # fmt: skip
    anthropic = [{"type": "image", "source": {"type": "url", "url": uri}},
                 {"type": "document", "source": {"type": "url", "url": uri}}]  # fmt: skip
    model = "gemini-2.5-pro"
    bodies = [("/v1/chat/completions", {"model": model, "messages": [
                  {"role": "user", "content": [text, part]}]}) for part in chat]  # fmt: skip
    asked = {"type": "input_text", "text": "sum up"}
    bodies += [("/v1/responses", {"model": model, "input": [
                  {"role": "user", "content": [asked, part]}]}) for part in responses]  # fmt: skip
    bodies += [("/v1/messages", {"model": model, "max_tokens": 64, "messages": [
                  {"role": "user", "content": [text, part]}]}) for part in anthropic]  # fmt: skip
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for path, body in bodies:
            r = await client.post(path, json=body, headers=ALICE)
            assert r.status_code == 400, (path, r.text)
            assert "not found for this client" in r.text, r.text
        assert edge.seen == []


async def test_a_count_holding_both_forms_is_checked_in_both(tmp_path: Path, edge) -> None:
    """Google counts the wrapped request when a body holds ``contents`` and a
    ``generateContentRequest``: a file or cached content named in the wrapped one is refused
    too."""
    stored = {"fileData": {"fileUri": "files/alice-upload-1", "mimeType": "application/pdf"}}
    wrapped = {"model": "models/gemini-2.5-pro",
               "contents": [{"role": "user", "parts": [{"text": "x"}, stored]}]}  # fmt: skip
    cached = {"model": "models/gemini-2.5-pro", "cachedContent": "cachedContents/someone",
              "contents": [{"role": "user", "parts": [{"text": "x"}]}]}  # fmt: skip
    outer = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for inner in (wrapped, cached):
            body = {**outer, "generateContentRequest": inner}
            r = await client.post("/v1beta/models/gemini-2.5-pro:countTokens", json=body,
                                  headers=ALICE)  # fmt: skip
            assert r.status_code == 400, r.text
        assert edge.seen == []
