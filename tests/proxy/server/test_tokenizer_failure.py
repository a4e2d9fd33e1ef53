"""A tokenizer failure is no request's failure. A tokenizer that raises, however it raises (a
native panic is pyo3's ``PanicException``, a ``BaseException``: tiktoken's ``o200k_base`` panicked
on about a million consecutive spaces when it was handed such a run whole), leaves that text
estimated, and the request goes on: every model endpoint relays the upstream's 200 and
``count_tokens`` answers its count, each with a finished log row and the in-flight gauge back at
0, and the conversation's next request succeeds too. The failure is injected here: tiktoken now
sees only windows of a text (``proxy.token_windows``), and a million spaces are counted for
real. A failure that does escape into a handler is answered in the protocol's shape, with its
log row."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy import tokens
from proxy.settings import Settings, settings_from_mapping
from proxy.token_windows import windows
from proxy.tokens import TiktokenCounter, estimate_tokens
from tests.conftest import in_process, log_rows
from tests.proxy.tenancy.serving import RESPONSE
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import anthropic_message, chat_completion

POISON = "\u2620"  # the character the injected tokenizer fails on
SPACES = " " * 1_000_000 + POISON  # a long text the tokenizer fails on, in its last window


class Panic(BaseException):
    """What pyo3 raises for a panic in native code: no ``Exception``."""


class PanickingEncoding:
    """A real encoding that panics on any text holding ``POISON``."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def encode_ordinary(self, text: str) -> Any:
        if POISON in text:
            raise Panic("called `Result::unwrap()` on an `Err` value")
        return self.real.encode_ordinary(text)


@pytest.fixture(autouse=True)
def panicking_tokenizer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = tokens._encoding
    monkeypatch.setattr(tokens, "_encoding", lambda name: PanickingEncoding(real(name)))
    yield


JSON = {"content-type": "application/json", "authorization": "Bearer sk-test-client"}
# o200k_base models: gpt-4o to the OpenAI-shaped upstream, gpt-4o-messages to the Anthropic one
CHAT_MODEL, MESSAGES_MODEL = "gpt-4o", "gpt-4o-messages"


def settings(edge: EdgeUpstream) -> Settings:
    messages = {"name": "messages", "kind": "anthropic", "match": [MESSAGES_MODEL]}
    return settings_from_mapping(
        {
            "upstreams": [
                {**messages, "base_url": edge.url},
                {"name": "openai", "match": ["*"], "base_url": edge.base_url},
            ],
            "pipeline": {"on_rule_error": "fail"},
        }
    )


def in_flight(client: httpx.AsyncClient) -> float:
    value = client.app.state.metrics.registry.get_sample_value(  # type: ignore[attr-defined]
        "ctxproxy_in_flight_requests"
    )
    assert value is not None
    return float(value)


def chat_body(turns: int) -> dict[str, Any]:
    """A conversation whose tool read a padded file: the million spaces as its tool result."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "cat padded.txt"}'}}  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Show me padded.txt"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "start" + SPACES + "end"},
    ]
    if turns > 1:
        messages += [
            {"role": "assistant", "content": "It is mostly spaces."},
            {"role": "user", "content": "Any text in it besides?"},
        ]
    return {"model": CHAT_MODEL, "messages": messages}


def messages_body(turns: int) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "bash",
           "input": {"command": "cat padded.txt"}}  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Show me padded.txt"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "start" + SPACES + "end"}
        ]},
    ]  # fmt: skip
    if turns > 1:
        messages += [
            {"role": "assistant", "content": "It is mostly spaces."},
            {"role": "user", "content": "Any text in it besides?"},
        ]
    return {"model": MESSAGES_MODEL, "max_tokens": 64, "messages": messages}


def responses_body(turns: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "Show me padded.txt"},
        {"type": "function_call", "call_id": "call_1", "name": "bash",
         "arguments": '{"command": "cat padded.txt"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "start" + SPACES + "end"},
    ]  # fmt: skip
    if turns > 1:
        items += [
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "It is mostly spaces."}]},
            {"type": "message", "role": "user", "content": "Any text in it besides?"},
        ]  # fmt: skip
    return {"model": CHAT_MODEL, "input": items}


ENDPOINTS = [
    ("/v1/chat/completions", chat_body, Reply.json(chat_completion())),
    ("/v1/messages", messages_body, Reply.json(anthropic_message())),
    ("/v1/responses", responses_body, Reply.json(RESPONSE)),
]
IDS = ["chat", "messages", "responses"]


@pytest.mark.parametrize(("path", "body", "reply"), ENDPOINTS, ids=IDS)
async def test_a_tokenizer_panic_leaves_the_conversation_working(
    tmp_path: Path, edge: EdgeUpstream, path: str, body: Any, reply: Reply
) -> None:
    edge.reply = reply
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for turns in (1, 2):  # the conversation's next request meets the same text again
            started = time.perf_counter()
            r = await client.post(path, content=orjson.dumps(body(turns)), headers=JSON)
            elapsed = time.perf_counter() - started
            assert r.status_code == 200, r.text
            request_id = r.headers["x-ctxproxy-request-id"]
            assert in_flight(client) == 0
            row = next(x for x in await log_rows(client) if x["id"] == request_id)
            assert row["status"] == 200 and row["tokens_before"] > 0
            assert elapsed < 5.0  # no tokenizer call per rule on the poisoned text
        assert len(edge.seen) == 2


async def test_count_tokens_estimates_what_the_tokenizer_fails_on(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    # words around the run: a turn of whitespace alone is forwarded as "(empty)"
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": f"start{SPACES}end"}]}
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        for _ in range(2):
            r = await client.post("/v1/messages/count_tokens", content=orjson.dumps(body),
                                  headers=JSON)  # fmt: skip
            assert r.status_code == 200, r.text
            assert r.json()["input_tokens"] >= estimate_tokens(SPACES)
        assert in_flight(client) == 0 and edge.seen == []  # counted here, not upstream


def test_the_counter_estimates_and_remembers_a_failed_text(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "_warned", set())  # logged once per process: not yet here
    counter = TiktokenCounter("o200k_base", cache_chars=0)  # nothing cached: only the memo
    calls = []
    encode = counter._encode

    def counted(text: str) -> Any:
        calls.append(len(text))
        return encode(text)

    counter._encode = counted
    with caplog.at_level("WARNING", logger="ctxproxy.tokens"):
        assert counter.count_text(SPACES) == estimate_tokens(SPACES) == 250_001
        tried = len(calls)  # the windows up to the one that failed
        assert tried == len(list(windows(SPACES)))
        assert counter.count_text(SPACES) == 250_001
        assert counter.count_text("hello world") == 2  # other texts: the tokenizer's count
    assert calls[tried:] == [len("hello world")]  # the failed text never again
    assert "tokenizer failed (Panic)" in caplog.text


def test_an_encoding_that_cannot_be_loaded_leaves_every_text_estimated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proxy import tokens

    def missing(name: str) -> Any:
        raise OSError(f"no {name} file offline")

    monkeypatch.setattr(tokens, "_encoding", missing)
    counter = TiktokenCounter("o200k_base")
    assert counter.count_text("twelve chars") == 3
    assert counter.count_message({"role": "user", "content": "twelve chars"}) == 3 + 4


async def panicking(*args: Any, **kwargs: Any) -> Any:
    raise Panic("called `Result::unwrap()` on an `Err` value")


@pytest.mark.parametrize("stage", ["rewrite", "after_upstream"])
@pytest.mark.parametrize(("path", "body", "reply"), ENDPOINTS, ids=IDS)
async def test_a_base_exception_in_a_handler_is_answered_in_its_shape(
    tmp_path: Path, edge: EdgeUpstream, monkeypatch: pytest.MonkeyPatch, path: str, body: Any,
    reply: Reply, stage: str,
) -> None:  # fmt: skip
    """A ``BaseException`` that is no ``Exception`` (a native panic) raised inside the proxy,
    before the upstream call or after its answer: the client gets a 500 in its protocol's shape
    with a request id, the row is written, the gauge is back at 0."""
    from proxy.server import handler

    edge.reply = reply
    async with in_process(settings(edge), str(tmp_path / "db")) as client:
        if stage == "rewrite":
            engine = client.app.state.services.engine  # type: ignore[attr-defined]
            monkeypatch.setattr(engine, "prepare", panicking)  # the handler's entry
        else:
            monkeypatch.setattr(handler, "rescue_overflow", panicking)
        r = await client.post(path, content=orjson.dumps(body(1)), headers=JSON)
        assert r.status_code == 500
        error = r.json()["error"]
        assert error["message"] == "Internal error in ctxproxy: Panic"
        if path == "/v1/messages":
            assert r.json()["type"] == "error" and error["type"] == "api_error"
        request_id = r.headers["x-ctxproxy-request-id"]
        row = next(x for x in await log_rows(client) if x["id"] == request_id)
        assert row["status"] == 500 and row["error_type"] == "internal_error"
        assert in_flight(client) == 0
        assert len(edge.seen) == (0 if stage == "rewrite" else 1)
