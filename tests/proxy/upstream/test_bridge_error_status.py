"""A bridged request's failure keeps the provider's own status (``litellm_errors.failure``):
Anthropic's 529 "overloaded", which litellm calls a 500, reaches the client as 529; an answer of
status 200 that is no JSON (a maintenance page, a body cut short), which litellm calls a 422,
is the upstream's fault, a 502, never a client error that tells the client not to retry."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.conftest import in_process, log_rows, proxy_settings
from tests.proxy.upstream.test_bridge_stream_open import KEY, fresh_clients  # noqa: F401
from tests.support.edge_upstream import EdgeUpstream, Reply

os.environ["DISABLE_AIOHTTP_TRANSPORT"] = "True"  # litellm on httpx, as the other bridge tests
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Accessing the 'model_\w+' attribute on the instance"
)
ASK = [{"role": "user", "content": "hi"}]
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropics_529_is_relayed_as_529(
    tmp_path: Path, edge: EdgeUpstream, stream: bool
) -> None:
    edge.reply = Reply.json(OVERLOADED, 529, retry_after="3")
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"],
                "base_url": edge.url}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"model": "claude-sonnet-4-5", "messages": ASK, "stream": stream}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/chat/completions", json=body, headers={"x-api-key": "sk-ant-test"})
    assert r.status_code == 529, r.text
    assert r.headers.get("retry-after") == "3"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "gemini-2.5-flash", "messages": ASK}),
        ("/v1/responses", {"model": "gemini-2.5-flash", "input": "hi"}),
        ("/v1/messages", {"model": "gemini-2.5-flash", "messages": ASK, "max_tokens": 64}),
    ],
)
@pytest.mark.parametrize(
    "answer",
    [b"<html>maintenance</html>", b'{"candidates": [{"conte', b'{"weird": true, "echo": {"a": 1}}'],
)
async def test_an_unreadable_answer_is_a_502(
    tmp_path: Path, edge: EdgeUpstream, path: str, body: dict[str, object], answer: bytes
) -> None:
    edge.reply = Reply(200, [("content-type", "text/html")], answer)
    upstream = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    headers = {"authorization": f"Bearer {KEY}", "x-api-key": KEY}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers=headers)
    assert r.status_code == 502, r.text
    assert "could not be read" in r.text


@pytest.mark.parametrize(("status", "kind"), [(400, "invalid_request_error"),
                                              (401, "authentication_error"),
                                              (404, "not_found_error"),
                                              (503, "api_error")])  # fmt: skip
async def test_a_streamed_messages_call_to_gemini_keeps_the_providers_status(
    tmp_path: Path, edge: EdgeUpstream, fresh_clients: None, status: int, kind: str  # noqa: F811
) -> None:
    """Claude Code (which always streams) on a gemini-* model: litellm's Messages adapter wrote
    every Gemini failure as an ``api_error`` event, which came out as a 502 Claude Code retried
    for three minutes; a 400's message then read as a server-side fault."""
    error = {"error": {"code": status, "message": "Request contains an invalid argument.",
                       "status": "INVALID_ARGUMENT"}}  # fmt: skip
    edge.reply = Reply.json(error, status)
    upstream = {"name": "gem", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url}
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    body = {"model": "gemini-2.5-flash", "messages": ASK, "max_tokens": 64, "stream": True}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": KEY})
    assert r.status_code == status, r.text  # a 503 too: the provider's own
    assert r.json()["error"]["type"] == kind


@pytest.mark.parametrize(
    ("said", "status"),
    [
        ("litellm.UnsupportedParamsError: gemini does not support parameters: ['top_k']", 400),
        ("litellm.PaymentRequiredError: insufficient credits", 402),
        ("litellm.LiteLLMUnknownProvider: Unmapped provider", 400),
        ("litellm.Timeout: Connection timed out after 600.0 seconds.", 504),
        ("litellm.APIConnectionError: connection reset", 502),
        ("litellm.NoSuchError: whatever", 502),
        ("Something else entirely", 502),
        ("litellm.MidStreamFallbackError: litellm.RateLimitError: slow down", 429),
        ("litellm.MidStreamFallbackError: litellm.BadRequestError: bad input", 400),
        ("litellm.MidStreamFallbackError: litellm.APIConnectionError: APIConnectionError: "
         "OpenAIException - Stream ended before a finish_reason was received", 502),
        ("litellm.MidStreamFallbackError: the stream broke", 503),
    ],
)
def test_an_error_event_names_its_status_by_the_exceptions_class(said: str, status: int) -> None:
    """litellm's Messages adapter writes any failure of a streamed call as an ``api_error``
    event naming the exception: a name outside the table is read by the OpenAI SDK error its
    class derives from, so a parameter the provider refuses is the client's 400 (not a 502
    Claude Code retries) and a timeout is a 504."""
    from proxy.settings import UpstreamSettings
    from proxy.upstream.bridge_events import failed_event

    event = b"event: error\ndata: " + orjson.dumps(
        {"type": "error", "error": {"type": "api_error", "message": said}}
    )
    upstream = UpstreamSettings(name="gem", kind="gemini", match=["gemini-*"], base_url="http://x")
    failure = failed_event(upstream, event)
    assert failure is not None
    assert failure.status == status


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", {"model": "claude-sonnet-4-5", "messages": ASK, "max_tokens": 8}),
        ("/v1/chat/completions", {"model": "claude-sonnet-4-5", "messages": ASK}),  # bridged
    ],
)
async def test_a_bridged_error_keeps_the_gateways_account_to_itself(
    tmp_path: Path, edge: EdgeUpstream, path: str, body: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """With the server's key, the account headers of an error answer through litellm (its
    exception's headers) reached the client; the native relay dropped them."""
    monkeypatch.setenv("BRIDGE_ANTHROPIC_KEY", "sk-ant-server-key-000000000000")
    rate = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    edge.reply = Reply.json(rate, 429, retry_after="3", anthropic_organization_id="org-gw-1234")
    upstream = {"name": "claude", "kind": "anthropic", "match": ["claude-*"],
                "base_url": edge.url, "api_key_env": "BRIDGE_ANTHROPIC_KEY"}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"x-api-key": "client"})
    assert r.status_code == 429
    assert r.headers.get("retry-after") == "3"
    assert "anthropic-organization-id" not in r.headers


def test_an_answer_aiohttp_could_not_parse_is_no_client_error() -> None:
    # aiohttp raises a ClientResponseError of status 400 from its parser's HttpProcessingError
    # (an upstream's bad chunked framing): the upstream's fault, a 502, never the client's 400
    import aiohttp
    from aiohttp.http_exceptions import TransferEncodingError

    from proxy.settings import UpstreamSettings
    from proxy.upstream.litellm_errors import failure

    parsed = TransferEncodingError("Not enough data for satisfy transfer length header.")
    try:
        try:
            raise parsed
        except TransferEncodingError as exc:
            raise aiohttp.ClientResponseError(None, (), status=400, message=str(exc)) from exc  # type: ignore[arg-type]
    except aiohttp.ClientResponseError as raised:
        error = failure(UpstreamSettings(name="openai"), raised)
    assert error.status == 502 and "could not be read" in error.message


async def test_an_answer_litellm_cannot_make_sense_of_is_a_502(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    # an OpenAI-compatible upstream answering a chat call with something else (no "choices"):
    # litellm raises its own APIError of status 500; the upstream's fault, never a 500
    edge.reply = Reply.json({"id": "msg_1", "type": "message", "content": []})
    settings = proxy_settings(edge.base_url)
    body = {"model": "gpt-x", "messages": ASK, "max_tokens": 16}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": "sk-test"})
    assert r.status_code == 502, r.text


PAGE = b"<html><body>Bad gateway from nginx</body></html>"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        # a gateway's page: its text kept, as the native path keeps it (the SDK said only
        # "Error code: 502")
        (
            Reply(
                502,
                [("content-type", "text/html")],
                b"<html><body>Bad gateway from nginx</body></html>",
            ),
            "Upstream fake: <html><body>Bad gateway from nginx</body></html>",
        ),
        # a 200 that is no JSON: not json's "Expecting value: line 1 column 1 (char 0)"
        (
            Reply(200, [("content-type", "application/json")], b"not j"),
            "Upstream fake sent an answer that could not be read.",
        ),
    ],
)
async def test_a_bridged_answer_that_is_no_json_is_told_as_the_native_path_tells_it(
    tmp_path: Path, edge: EdgeUpstream, answer: Reply, said: str
) -> None:
    edge.reply = answer
    settings = proxy_settings(edge.base_url)
    body = {"model": "gpt-x", "messages": ASK, "max_tokens": 16}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": "sk-test"})
    assert r.status_code == 502, r.text
    assert r.json()["error"]["message"] == said


@pytest.mark.parametrize(
    "event",
    [
        {"error": {"message": "The server had an error", "type": "server_error", "code": None}},
        {"object": "error", "message": "The server had an error", "code": 503},
    ],
)
async def test_an_error_event_first_in_a_bridged_stream_is_no_unreachable_upstream(
    tmp_path: Path, edge: EdgeUpstream, event: dict[str, object]
) -> None:
    """An OpenAI-compatible stream opening with its error: litellm calls it its catch-all
    ``APIConnectionError``, which the Messages adapter writes into its error event by name: the
    client was told the upstream "could not be reached", the row an ``upstream_connection_error``
    (an operator looked for a network fault)."""
    edge.reply = Reply.event_stream(b"data: " + orjson.dumps(event) + b"\n\n")
    settings = proxy_settings(edge.base_url)
    body = {"model": "gpt-x", "messages": ASK, "max_tokens": 16, "stream": True}
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post("/v1/messages", json=body, headers={"x-api-key": "sk-test"})
        (row,) = await log_rows(c)
    assert r.status_code == 502, r.text
    assert "could not be reached" not in r.text, r.text
    assert row["error_type"] != "upstream_connection_error"


STREAMED = {
    "chat": ("/v1/chat/completions", {"model": "lit-x", "messages": ASK, "stream": True}),
    "responses": ("/v1/responses", {"model": "lit-x", "input": "hi", "stream": True}),
}


@pytest.mark.parametrize("client", STREAMED)
async def test_a_stream_opening_with_its_error_is_coded_by_its_status(
    tmp_path: Path, edge: EdgeUpstream, client: str
) -> None:
    """A stream's failure before anything was relayed: litellm raises it as its
    ``MidStreamFallbackError``, which is no error code of any protocol (and says mid-stream):
    the code is the type word of its status, as after the stream began."""
    error = {"message": "Rate limit reached", "type": "rate_limit_exceeded", "code": "rate"}
    edge.reply = Reply.event_stream(b"data: " + orjson.dumps({"error": error}) + b"\n\n")
    upstream = {"name": "lit", "kind": "litellm", "provider": "openai", "match": ["lit-*"],
                "base_url": edge.base_url}  # fmt: skip
    settings = proxy_settings(edge.base_url, upstreams=[upstream])
    path, body = STREAMED[client]
    async with in_process(settings, str(tmp_path / "db")) as c:
        r = await c.post(path, json=body, headers={"authorization": "Bearer sk-test"})
        (row,) = await log_rows(c)
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limit_error", r.text
    assert row["status"] == 429
