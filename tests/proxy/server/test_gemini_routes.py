"""Gemini's routes through the app, against a socket-level scripted upstream: the native relay
(path, query, headers, key, the client's bytes when nothing changed), the SSE and JSON-array
streams with their usage read, ``countTokens`` and the model list, errors in Gemini's shape, the
overflow rescue on Gemini's wording, and a doubled function response repaired on the way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.gemini_checks import pairing_violations
from proxy.settings import Settings, settings_from_mapping
from tests.conftest import in_process
from tests.support.edge_upstream import EdgeUpstream, Reply

MODEL = "gemini-2.5-flash"
PATH = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"
KEY = "AIzaSyDummyClientKey0000000000000000000"
HEADERS = {
    "content-type": "application/json",
    "x-goog-api-key": KEY,
    "user-agent": "GeminiCLI/0.61.0/gemini-3.1-pro-preview (linux; x64; terminal)",
    "x-goog-api-client": "google-genai-sdk/1.30.0 gl-node/v20.20.2",
    "x-server-timeout": "30",  # google-genai's, given a timeout: the server's own deadline
}
USAGE = {"promptTokenCount": 30, "candidatesTokenCount": 5, "cachedContentTokenCount": 12}


def answer(
    text: str = "Done.", usage: dict[str, int] | None = None, last: bool = True
) -> dict[str, Any]:
    candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if last:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": usage or USAGE}


def settings(edge: EdgeUpstream, **upstream: Any) -> Settings:
    return settings_from_mapping(
        {
            "upstreams": [
                {
                    "name": "gemini",
                    "kind": "gemini",
                    "match": ["gemini-*"],
                    "base_url": edge.url,
                    **upstream,
                },
                {"name": "openai", "match": ["gpt-*"], "base_url": edge.base_url},
            ],
            "pipeline": {"on_rule_error": "fail", "context_windows": {"gemini-*": 1_000_000}},
        }
    )


async def logged(client: Any) -> list[dict[str, Any]]:
    """The log's rows, newest first, once written."""
    store = client.app.state.services.store
    await store.flush()
    return await store.list_requests()  # type: ignore[no-any-return]


def body(*contents: dict[str, Any]) -> dict[str, Any]:
    return {
        "contents": list(contents) or [{"parts": [{"text": "hello"}], "role": "user"}],
        "systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
        "generationConfig": {"temperature": 1},
    }


async def test_generate_content_relays_the_clients_bytes_and_key(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    edge.reply = Reply.json(answer(), x_goog_request_id="r-1")
    raw = orjson.dumps(body())
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(PATH, content=raw, headers=HEADERS)
    assert got.status_code == 200, got.text
    assert got.json()["candidates"][0]["content"]["parts"] == [{"text": "Done."}]
    seen = edge.last
    assert seen.target == PATH
    assert seen.body == raw  # nothing changed: the client's own bytes
    assert seen.header("x-goog-api-key") == KEY
    assert seen.header("x-goog-api-client") == HEADERS["x-goog-api-client"]
    assert seen.header("user-agent") == HEADERS["user-agent"]
    assert seen.header("x-server-timeout") == "30"
    assert seen.header("authorization") is None and seen.header("x-api-key") is None


async def test_a_query_key_goes_upstream_as_a_header_never_in_the_url(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    edge.reply = Reply.json(answer())
    headers = {k: v for k, v in HEADERS.items() if k != "x-goog-api-key"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(f"{PATH}?key={KEY}&alt=sse&x=1", json=body(), headers=headers)
    assert got.status_code == 200, got.text
    assert edge.last.target == f"{PATH}?alt=sse"
    assert edge.last.header("x-goog-api-key") == KEY


async def test_a_configured_key_replaces_the_clients(
    edge: EdgeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_SERVER_KEY", "server-side-key")
    edge.reply = Reply.json(answer())
    cfg = settings(edge, api_key_env="GEMINI_SERVER_KEY")
    async with in_process(cfg, str(tmp_path / "db")) as client:
        got = await client.post(PATH, json=body(), headers={**HEADERS, "x-goog-user-project": "p"})
    assert got.status_code == 200, got.text
    assert edge.last.header("x-goog-api-key") == "server-side-key"
    assert edge.last.header("x-goog-user-project") is None  # the client's billing choice: not ours


async def test_sse_stream_is_relayed_and_its_usage_logged(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    events = b"".join(
        b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"
        for chunk in (answer("Do", {"promptTokenCount": 30}, last=False), answer("ne.", USAGE))
    )
    edge.reply = Reply.event_stream(events)
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(f"{STREAM}?alt=sse", json=body(), headers=HEADERS)
        rows = await logged(client)
    assert got.status_code == 200
    assert got.content == events
    assert edge.last.target == f"{STREAM}?alt=sse"
    row = rows[0]
    assert row["protocol"] == "gemini" and row["model"] == MODEL and row["stream"] == 1
    assert (row["prompt_tokens"], row["completion_tokens"], row["cached_tokens"]) == (30, 5, 12)


async def test_json_array_stream_is_relayed_with_its_usage(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    chunks = [answer("Do", {"promptTokenCount": 30}), answer("ne.", USAGE)]
    edge.reply = Reply.json(chunks)
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(STREAM, json=body(), headers=HEADERS)
        rows = await logged(client)
    assert got.status_code == 200
    assert got.json() == chunks
    assert edge.last.target == STREAM
    assert (rows[0]["prompt_tokens"], rows[0]["cached_tokens"]) == (30, 12)


async def test_a_doubled_function_response_reaches_the_upstream_paired(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    edge.reply = Reply.json(answer())
    call = {"functionCall": {"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}},
            "thoughtSignature": "skip_thought_signature_validator"}  # fmt: skip
    done = {"functionResponse": {"id": "c1", "name": "run_shell_command",
                                 "response": {"output": "a.txt"}}}  # fmt: skip
    b = body(
        {"parts": [{"text": "list the files"}], "role": "user"},
        {"parts": [{"text": "Listing."}, call], "role": "model"},
        {"parts": [done, done], "role": "user"},
        {"parts": [{"text": "One file."}], "role": "model"},
        {"parts": [{"text": "and now?"}], "role": "user"},
    )
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(PATH, json=b, headers=HEADERS)
    assert got.status_code == 200, got.text
    sent = edge.last.json()
    assert pairing_violations(sent["contents"]) == []
    assert sent["contents"][2]["parts"] == [done]
    assert orjson.dumps(b["contents"][1]) in edge.last.body  # the call's turn, byte for byte


@pytest.mark.parametrize(
    ("method", "path", "status", "kind"),
    [
        ("POST", "/v1beta/models/gemini-9-unknown:generateContent", 200, None),
        ("POST", "/v1beta/models/claude-x:generateContent", 404, "NOT_FOUND"),
        ("POST", "/v1beta/models/gemini bad:generateContent", 400, "INVALID_ARGUMENT"),
        ("POST", f"/v1beta/models/{MODEL}:embedContent", 404, "NOT_FOUND"),
        ("GET", PATH, 405, "INVALID_ARGUMENT"),
    ],
)
async def test_errors_take_geminis_shape(
    edge: EdgeUpstream, tmp_path: Path, method: str, path: str, status: int, kind: str | None
) -> None:
    edge.reply = Reply.json(answer())
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.request(method, path, json=body(), headers=HEADERS)
    assert got.status_code == status, got.text
    if kind is not None:
        error = got.json()["error"]
        assert error["code"] == status and isinstance(error["message"], str)
        assert error["status"] == (kind if status != 405 else "FAILED_PRECONDITION")


async def test_bad_bodies_are_refused_in_geminis_shape(edge: EdgeUpstream, tmp_path: Path) -> None:
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for raw in (b"{not json", b'{"contents": "hello"}', b'{"contents": [{"role": "bot"}]}'):
            got = await client.post(PATH, content=raw, headers=HEADERS)
            assert got.status_code == 400, got.text
            assert got.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert edge.seen == []


async def test_an_upstream_error_keeps_its_shape(edge: EdgeUpstream, tmp_path: Path) -> None:
    error = {
        "error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}
    }
    edge.reply = Reply.json(error, status=429)
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(PATH, json=body(), headers=HEADERS)
    assert got.status_code == 429 and got.json() == error


async def test_overflow_in_geminis_words_is_rescued(edge: EdgeUpstream, tmp_path: Path) -> None:
    message = "The input token count (1300) exceeds the maximum number of tokens allowed (1000)."
    edge.replies = [
        Reply.json({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, 400),
        Reply.json(answer()),
    ]
    contents: list[dict[str, Any]] = [{"parts": [{"text": "read the logs"}], "role": "user"}]
    for n in range(8):
        call = {"functionCall": {"id": f"c{n}", "name": "run_shell_command",
                                 "args": {"command": f"cat log{n}"}}}  # fmt: skip
        out = "\n".join(f"line {k} of log {n}" for k in range(40))
        contents.append({"parts": [call], "role": "model"})
        contents.append({"parts": [{"functionResponse": {"id": f"c{n}", "name": "run_shell_command",
                                                         "response": {"output": out}}}],
                         "role": "user"})  # fmt: skip
    contents.append({"parts": [{"text": "summarise"}], "role": "user"})
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(PATH, json=body(*contents), headers=HEADERS)
        rows = await logged(client)
    assert got.status_code == 200, got.text
    first, retry = edge.seen
    assert len(retry.body) < len(first.body)
    assert pairing_violations(retry.json()["contents"]) == []
    rescue = rows[0]["report"]["rescue"]
    assert rescue["window"] == 1000 and rescue["outcome"] == "fitted"


async def test_count_tokens_natively_and_counted_here(edge: EdgeUpstream, tmp_path: Path) -> None:
    edge.reply = Reply.json({"totalTokens": 42})
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        native = await client.post(f"/v1beta/models/{MODEL}:countTokens", json=body(),
                                   headers=HEADERS)  # fmt: skip
        assert edge.last.target == f"/v1beta/models/{MODEL}:countTokens"
        local = await client.post("/v1beta/models/gpt-4o:countTokens", json=body(), headers=HEADERS)
        bad = await client.post("/v1beta/models/gpt-4o:countTokens", content=b"[]", headers=HEADERS)
    assert native.status_code == 200 and native.json() == {"totalTokens": 42}
    assert local.status_code == 200 and local.json()["totalTokens"] > 3
    assert len(edge.seen) == 1  # the other model was counted here
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"


async def test_the_model_list_names_the_configured_models(tmp_path: Path) -> None:
    """No Gemini upstream: the names ``upstreams:`` match exactly, in Gemini's shape."""
    cfg = settings_from_mapping(
        {"upstreams": [{"name": "o", "kind": "openai", "match": ["gemini-2.5-pro", "gpt-*"]}]}
    )
    async with in_process(cfg, str(tmp_path / "db")) as client:
        got = await client.get("/v1beta/models", headers=HEADERS)
        one = await client.get("/v1beta/models/gemini-2.5-pro", headers=HEADERS)
        none = await client.get("/v1beta/models/claude-x", headers=HEADERS)
    assert got.status_code == 200
    (only,) = got.json()["models"]
    assert only["name"] == "models/gemini-2.5-pro" == one.json()["name"]
    assert "generateContent" in only["supportedGenerationMethods"]
    assert none.status_code == 404 and none.json()["error"]["status"] == "NOT_FOUND"


GOOGLE_LIST = {
    "models": [{"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576}],
    "nextPageToken": "p2",
}


async def test_the_gemini_upstreams_own_models_are_relayed(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """google-genai's ``models.list`` got an empty list and ``models.get`` a 404 with the
    shipped config (globs name no model): the Gemini upstream's own answers are relayed, its
    pages' parameters only (never ``key``), the client's key as its header; the configured names
    follow the last page; a name another upstream serves is described from the configuration."""
    cfg = settings(edge, match=["gemini-*", "gemini-exact"])
    async with in_process(cfg, str(tmp_path / "db")) as client:
        edge.reply = Reply.json(GOOGLE_LIST)
        first = await client.get("/v1beta/models?pageSize=1&key=x&alt=y", headers=HEADERS)
        assert edge.last.target == "/v1beta/models?pageSize=1"
        assert edge.last.header("x-goog-api-key") == KEY
        edge.reply = Reply.json({"models": []})
        last = await client.get("/v1beta/models?pageToken=p2", headers=HEADERS)
        edge.reply = Reply.json({"name": f"models/{MODEL}", "inputTokenLimit": 1048576})
        one = await client.get(f"/v1beta/models/{MODEL}", headers=HEADERS)
        assert edge.last.target == f"/v1beta/models/{MODEL}"
        v1 = await client.get(f"/v1/models/{MODEL}", headers=HEADERS)
        other = await client.get("/v1beta/models/gpt-4o", headers=HEADERS)
        bad = await client.get("/v1beta/models/gemini..x%40y", headers=HEADERS)
        openai = await client.get(f"/v1/models/{MODEL}")  # no Google key: not served
        edge.reply = Reply.json({"error": {"code": 400, "message": "API key not valid"}}, 400)
        refused = await client.get("/v1beta/models", headers=HEADERS)
    assert first.json() == GOOGLE_LIST  # a page before the last: as the upstream listed it
    assert [m["name"] for m in last.json()["models"]] == ["models/gemini-exact"]
    assert one.json()["inputTokenLimit"] == 1048576 == v1.json()["inputTokenLimit"]
    assert other.status_code == 200 and other.json()["name"] == "models/gpt-4o"
    assert bad.status_code == 400 and openai.status_code == 404
    assert refused.status_code == 400 and "API key not valid" in refused.text


@pytest.mark.parametrize(
    "answer",
    [
        Reply(404, [("content-type", "text/plain")], b"Not Found"),
        Reply(403, [("content-type", "text/html")], b"<html>denied</html>"),
        Reply.json({"error": {"message": "bad key", "type": "invalid_request_error"}}, 401),
    ],
)
async def test_a_model_lists_error_that_is_not_geminis_is_written_in_geminis_shape(
    edge: EdgeUpstream, tmp_path: Path, answer: Reply
) -> None:
    """A gateway's plain-text 404 (a wrong base_url) or page, or another API's JSON error: it
    was relayed as it came under ``application/json``, which no Gemini client reads."""
    cfg = settings(edge, match=["gemini-*"])
    edge.reply = answer
    async with in_process(cfg, str(tmp_path / "db")) as client:
        listed = await client.get("/v1beta/models", headers=HEADERS)
        one = await client.get(f"/v1beta/models/{MODEL}", headers=HEADERS)
    for got in (listed, one):
        assert got.status_code == answer.status
        error = got.json()["error"]
        assert set(error) == {"code", "message", "status"} and error["code"] == answer.status
        text = answer.body.decode()
        assert ("bad key" if "bad key" in text else text) in error["message"]
    if answer.status == 404:
        assert "base_url" in listed.json()["error"]["message"]


async def test_an_unknown_gemini_path_is_a_404_in_geminis_shape(tmp_path: Path) -> None:
    cfg = settings_from_mapping({"upstreams": [{"name": "g", "kind": "gemini"}]})
    async with in_process(cfg, str(tmp_path / "db")) as client:
        got = await client.get("/v1beta/tunedModels/gemini-2.5-pro", headers=HEADERS)
        wrong = await client.post("/v1beta/models", headers=HEADERS)
    assert got.status_code == 404 and got.json()["error"]["status"] == "NOT_FOUND"
    assert wrong.status_code == 405 and set(wrong.json()["error"]) == {"code", "message", "status"}


async def test_a_workspace_root_takes_its_picture_for_a_gemini_session(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """Gemini's model is the path's, not the body's: the bootstrap picture is taken for it too,
    and said on the session's second request."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "gemini-demo"\n')
    cfg = settings(edge).model_copy(update={"workspace": settings_from_mapping(
        {"workspace": {"root": str(root), "budget_ms": 2000}}
    ).workspace})  # fmt: skip
    edge.reply = Reply.json(answer())
    first = body({"parts": [{"text": "start"}], "role": "user"})
    second = body(
        *first["contents"],
        {"parts": [{"text": "Done."}], "role": "model"},
        {"parts": [{"text": "go on"}], "role": "user"},
    )
    async with in_process(cfg, str(tmp_path / "db")) as client:
        for sent in (first, second):
            got = await client.post(PATH, json=sent, headers=HEADERS)
            assert got.status_code == 200, got.text
        rows = await logged(client)
    assert "gemini-demo" in edge.last.body.decode()
    assert rows[0]["report"]["workspace"]["source"] == "bootstrap"


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1/chat/completions", "gemini-2.5-pro"),
        ("/v1/messages", "gemini-2.5-flash"),
        ("/v1/chat/completions", "gemini-2.5-flash-lite"),
        ("/v1/chat/completions", "gemini-2.0-flash"),
    ],
)
async def test_the_other_protocols_reach_the_gemini_upstream_for_its_models(
    edge: EdgeUpstream, tmp_path: Path, path: str, model: str
) -> None:
    """Through litellm as the ``gemini`` provider, for every Gemini name its list holds: also
    those litellm by itself would place on Vertex AI (the Gemini 2.5 models)."""
    edge.reply = Reply.json(answer("Bonjour"))
    sent: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if path == "/v1/messages":
        sent["max_tokens"] = 50
    headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(path, json=sent, headers=headers)
    assert got.status_code == 200, got.text
    assert "Bonjour" in got.text
    assert f"models/{model}:generateContent" in edge.last.target


async def test_an_error_answered_as_a_json_array_goes_as_google_wrote_it(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """Without ``alt=sse`` Google answers an error as a one-element array: it was rewritten as
    an object saying "Upstream error.", its message and its details lost."""
    error = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                         "reason": "API_KEY_INVALID"}],
        }
    }  # fmt: skip
    sent = orjson.dumps([error])
    edge.reply = Reply(status=400, headers=[("content-type", "application/json")], body=sent)
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(STREAM, json=body(), headers=HEADERS)
    assert got.status_code == 400
    assert got.content == sent


async def test_a_response_to_a_call_the_cached_content_holds_goes_as_sent(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """With the client's own key a ``cachedContent`` passes, and the conversation begins in it:
    a function response to a call it holds was rewritten as text saying it had no call."""
    sent = {
        "cachedContent": "cachedContents/abc123",
        "contents": [
            {"role": "user", "parts": [{"functionResponse": {
                "id": "c1", "name": "get_weather", "response": {"output": "sunny"}}}]},
            {"role": "user", "parts": [{"text": "and tomorrow?"}]},
        ],
    }  # fmt: skip
    raw = orjson.dumps(sent)
    edge.reply = Reply.json(answer())
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(PATH, content=raw, headers=HEADERS)
    assert got.status_code == 200, got.text
    assert edge.last.body == raw  # the client's own bytes


@pytest.mark.parametrize(
    "query",
    ["alt=SSE", "$alt=sse", "%24alt=sse", "alt=Sse&key=", f"$key={KEY}&%24alt=sse"],
)
async def test_the_system_parameters_other_spellings_are_read_as_googles(
    edge: EdgeUpstream, tmp_path: Path, query: str
) -> None:
    """Google reads ``$alt`` and ``$key`` as ``alt`` and ``key`` (its system parameters): a
    client asking for events so (or as ``alt=SSE``) was relayed the JSON-array stream, and a
    ``$key`` was dropped, the request sent without a key."""
    edge.reply = Reply.event_stream(b"data: " + orjson.dumps(answer()) + b"\r\n\r\n")
    headers = {k: v for k, v in HEADERS.items() if k != "x-goog-api-key"}
    if "key=" not in query or query.endswith("key="):
        headers["x-goog-api-key"] = KEY
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        got = await client.post(f"{STREAM}?{query}", json=body(), headers=headers)
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("text/event-stream")
    assert edge.last.target == f"{STREAM}?alt=sse"
    assert edge.last.header("x-goog-api-key") == KEY


async def test_a_dollar_key_asks_for_googles_model_list(
    edge: EdgeUpstream, tmp_path: Path
) -> None:
    """``GET /v1/models?$key=…`` is google-genai's list: it was answered as the OpenAI SDK's."""
    headers = {k: v for k, v in HEADERS.items() if k != "x-goog-api-key"}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        edge.reply = Reply.json({"models": []})
        got = await client.get(f"/v1/models?%24key={KEY}", headers=headers)
    assert got.status_code == 200, got.text
    assert "models" in got.json() and edge.last.header("x-goog-api-key") == KEY
