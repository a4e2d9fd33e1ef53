"""A body litellm cannot translate, on a protocol bridged through it (Messages or Responses to an
OpenAI upstream, Chat or Gemini to another kind), is the client's fault: a 400 in the client's
own protocol, with nothing sent upstream. It was a 502 "Upstream … failed (AttributeError)",
which told the client to retry a body that fails every time. Every field of a well-formed body
of each bridge is replaced in turn by values of the wrong type; none may answer 5xx."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.settings import settings_from_mapping
from proxy.upstream.litellm_sent import _mark_class
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.live import serve_in_thread, stop

CHAT_OK = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}  # fmt: skip
ANTHROPIC_OK = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
GEMINI_OK = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                             "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                               "totalTokenCount": 2}}  # fmt: skip

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
CHAT_TOOL = {"type": "function",
             "function": {"name": "f", "description": "d", "parameters": SCHEMA}}  # fmt: skip
CHAT_HISTORY = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "r"},
]  # fmt: skip
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
CHAT = "/v1/chat/completions"
BRIDGES: dict[str, tuple[str, dict[str, Any]]] = {
    "messages to openai": (MESSAGES, {
        "model": "gpt-4o", "max_tokens": 10, "system": "s",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant",
             "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": "1"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "r"}]},
        ],
        "tools": [{"name": "f", "description": "d", "input_schema": SCHEMA}],
        "tool_choice": {"type": "auto"}, "temperature": 0.5, "stop_sequences": ["x"],
    }),
    "responses to anthropic": (RESPONSES, {
        "model": "claude-x", "instructions": "s", "max_output_tokens": 50,
        "input": [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "r"},
        ],
        "tools": [{"type": "function", "name": "f", "description": "d", "parameters": SCHEMA}],
        "tool_choice": "auto", "reasoning": {"effort": "low"}, "temperature": 0.2,
    }),
    "chat to anthropic": (CHAT, {
        "model": "claude-x", "messages": CHAT_HISTORY, "tools": [CHAT_TOOL],
        "tool_choice": "auto", "max_tokens": 20, "stop": ["x"],
        "response_format": {"type": "text"},
    }),
    "chat to gemini": (CHAT, {
        "model": "gemini-2.5-flash", "messages": CHAT_HISTORY, "tools": [CHAT_TOOL],
        "max_tokens": 20,
    }),
    "gemini to openai": ("/v1beta/models/gpt-4o:generateContent", {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": "1"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"r": 1}}}]},
        ],
        "systemInstruction": {"parts": [{"text": "s"}]},
        "tools": [{"functionDeclarations": [{"name": "f", "description": "d",
                                              "parameters": SCHEMA}]}],
        "generationConfig": {"temperature": 0.1, "maxOutputTokens": 20},
    }),
}  # fmt: skip
WRONG = [None, [None], {"x": 1}]


class _Upstream(EdgeUpstream):
    """Answers in the protocol of the path it is called on (``failing``: a 500)."""

    failing = False

    @property
    def reply(self) -> Reply:
        target = self.seen[-1].target if self.seen else ""
        if self.failing:
            return Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, 500)
        if "/messages" in target:
            return Reply.json(ANTHROPIC_OK)
        return Reply.json(GEMINI_OK if "generateContent" in target else CHAT_OK)

    @reply.setter
    def reply(self, value: Reply) -> None:
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, _Upstream]]:
    edge = _Upstream().start()
    settings = settings_from_mapping({
        "upstreams": [
            {"name": "claude", "kind": "anthropic", "match": ["claude-*"], "base_url": edge.url},
            {"name": "g", "kind": "gemini", "match": ["gemini-*"], "base_url": edge.url},
            {"name": "openai", "match": ["*"], "base_url": edge.base_url},
        ],
        "pipeline": {"on_rule_error": "fail"},
    })  # fmt: skip
    db = Path(tmp_path_factory.mktemp("bridged")) / "db"
    server, url = serve_in_thread(create_app(settings, db_path=str(db), strict=True))
    headers = {"authorization": "Bearer sk-test-1", "x-api-key": "sk-ant-test",
               "x-goog-api-key": "gk-test"}  # fmt: skip
    with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
        yield client, edge
    stop(server)
    edge.stop()


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if at:
        yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _with(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    holder: Any = out
    for k in path[:-1]:
        holder = holder[k]
    holder[path[-1]] = value
    return out


def _protocol_error(path: str, answer: httpx.Response) -> str:
    """The error's message, asserting it has the shape of the client's protocol."""
    error = answer.json()
    if path == MESSAGES:
        assert error["type"] == "error", error
        return str(error["error"]["message"])
    if path.startswith("/v1beta"):
        assert isinstance(error["error"]["status"], str), error
        return str(error["error"]["message"])
    assert isinstance(error["error"]["type"], str), error
    return str(error["error"]["message"])


@pytest.mark.parametrize("bridge", list(BRIDGES))
def test_no_field_of_the_wrong_type_gets_a_5xx(
    proxy: tuple[httpx.Client, _Upstream], bridge: str
) -> None:
    client, _ = proxy
    path, body = BRIDGES[bridge]
    assert client.post(path, json=body).status_code == 200  # well formed, it goes through
    failed = []
    for at in _paths(body):
        if at == ("model",):
            continue
        for value in WRONG:
            answer = client.post(path, content=orjson.dumps(_with(body, at, value)),
                                 headers={"content-type": "application/json"})  # fmt: skip
            if answer.status_code >= 500:
                failed.append((at, value, answer.status_code, answer.text[:120]))
            elif answer.status_code >= 400:
                _protocol_error(path, answer)
    assert not failed, failed


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (MESSAGES, {"model": "gpt-4o", "max_tokens": 10, "tools": [None],
                    "messages": [{"role": "user", "content": "hi"}]}),
        (MESSAGES, {"model": "gpt-4o", "max_tokens": 10, "thinking": "x",
                    "messages": [{"role": "user", "content": "hi"}]}),
        (RESPONSES, {"model": "claude-x", "input": "hi", "tools": [None]}),
        (CHAT, {"model": "claude-x", "messages": [{"role": "user", "content": [{"text": "x"}]}]}),
        (CHAT, {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": [None]}]}),
    ],
    ids=["messages-tools-null", "messages-thinking-string", "responses-tools-null",
         "chat-part-without-type", "chat-part-null"],
)  # fmt: skip
def test_a_body_the_translation_refuses_is_a_400_and_nothing_is_sent(
    proxy: tuple[httpx.Client, _Upstream], path: str, body: dict[str, Any]
) -> None:
    client, edge = proxy
    edge.seen.clear()
    answer = client.post(path, json=body)
    assert answer.status_code == 400, answer.text
    said = _protocol_error(path, answer)  # a part Anthropic is not given is named as such
    assert "could not be translated" in said or "cannot be sent to anthropic" in said, said
    assert not edge.seen


def test_a_provider_failure_stays_the_providers_when_the_callbacks_were_reset(
    proxy: tuple[httpx.Client, _Upstream],
) -> None:
    """The mark that tells a failed translation from a failed call is one of litellm's
    callbacks: a list reset (a reload, a library's own setup) dropped it, and every failure
    of the provider became a 400 blaming the client's body."""
    import litellm

    client, edge = proxy
    litellm.input_callback = []
    edge.failing = True
    try:
        failed = client.post(CHAT, json={"model": "claude-x", "messages": CHAT_HISTORY[1:2]})
    finally:
        edge.failing = False
    assert failed.status_code >= 500, failed.text
    assert any(isinstance(c, _mark_class()) for c in litellm.input_callback)  # put back
    refused = client.post(
        MESSAGES,
        json={
            "model": "gpt-4o",
            "max_tokens": 10,
            "tools": [None],
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert refused.status_code == 400 and "could not be translated" in refused.text
