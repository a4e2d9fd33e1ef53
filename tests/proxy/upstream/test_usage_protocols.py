"""Usage in Anthropic's, Responses' and Gemini's spellings: whole answers, SSE (Anthropic's
message_delta merged over message_start, Gemini's last usageMetadata), Gemini's JSON-array
stream, what the log columns and the cache feedback take from each."""

from __future__ import annotations

import time

import orjson
import pytest

from proxy.upstream.sse_usage import MAX_PENDING, UsageTap
from proxy.upstream.usage import (
    WHOLE_PARSE_MAX,
    CacheUsage,
    cache_usage,
    usage_fields,
    usage_of,
)
from tests.support.anthropic_upstream import (
    MESSAGE_USAGE,
    RESPONSE_USAGE,
    event,
    message_events,
    response_events,
    response_object,
)
from tests.support.factories import anthropic_message


def tapped(chunks: list[bytes], size: int = 0) -> UsageTap:
    tap = UsageTap()
    data = b"".join(chunks)
    step = size or len(data)
    for i in range(0, len(data), step):
        tap.feed(data[i : i + step])
    return tap


@pytest.mark.parametrize("size", [0, 1, 5, 64])
def test_anthropic_stream_merges_the_delta_over_the_start(size: int) -> None:
    tap = tapped(message_events(output_tokens=9), size)
    assert tap.usage == {**MESSAGE_USAGE, "output_tokens": 9}


def test_a_delta_with_input_counts_overrides_the_start() -> None:
    start = {"usage": {"input_tokens": 0, "output_tokens": 0}}
    chunks = [
        event("message_start", message=start),
        event("message_delta", delta={}, usage={"input_tokens": 5, "output_tokens": 2}),
    ]
    assert tapped(chunks).usage == {"input_tokens": 5, "output_tokens": 2}


def test_responses_stream_takes_the_completed_usage() -> None:
    tap = tapped(response_events(), 3)
    assert tap.usage == RESPONSE_USAGE  # response.created's null usage is no usage


def test_whole_answers() -> None:
    assert usage_of(orjson.dumps(anthropic_message(usage=MESSAGE_USAGE))) == MESSAGE_USAGE
    assert usage_of(orjson.dumps(response_object())) == RESPONSE_USAGE


@pytest.mark.parametrize(
    ("usage", "fields"),
    [
        (MESSAGE_USAGE, (130, 1, 100)),  # prompt: input + cache read + cache write
        ({"input_tokens": 12, "output_tokens": 4}, (12, 4, 0)),
        (RESPONSE_USAGE, (130, 7, 100)),  # input_tokens is the whole prompt
        ({"prompt_tokens": 11, "completion_tokens": 7}, (11, 7, 0)),
        ({"input_tokens": "x", "output_tokens": -1}, (None, None, 0)),
    ],
)
def test_usage_fields(usage: dict, fields: tuple) -> None:
    out = usage_fields(usage)
    assert (out["prompt_tokens"], out["completion_tokens"], out["cached_tokens"]) == fields


def test_cache_usage_of_each_spelling() -> None:
    assert cache_usage(MESSAGE_USAGE) == CacheUsage(130, 100, 20)
    assert cache_usage(RESPONSE_USAGE) == CacheUsage(130, 100, None)


def test_geminis_missing_cached_count_is_a_miss() -> None:
    """Gemini's JSON leaves out a count of zero: a usageMetadata without
    ``cachedContentTokenCount`` read nothing from the cache (taken for "not reported", a cold
    cache passed for warm). An OpenAI-compatible server that says nothing of its cache still
    says nothing."""
    assert cache_usage({"promptTokenCount": 40, "candidatesTokenCount": 7}) == CacheUsage(
        40, 0, None
    )
    assert cache_usage({"promptTokenCount": 40, "cachedContentTokenCount": 24}).cached_tokens == 24
    assert cache_usage({"prompt_tokens": 40, "completion_tokens": 7}) == CacheUsage(40, None, None)


def test_huge_events_stay_bounded_and_linear() -> None:
    delta = event("content_block_delta", index=0, delta={"type": "text_delta", "text": "y" * 500})
    huge = b"data: " + b'{"x": "' + b"z" * (5 * MAX_PENDING) + b'"}\n\n'
    data = delta * 4_000 + huge * 4 + b"".join(message_events())
    tap = UsageTap()
    started = time.perf_counter()
    for i in range(0, len(data), 61):
        tap.feed(data[i : i + 61])
        assert tap.pending_bytes <= MAX_PENDING
    assert time.perf_counter() - started < 3.0
    assert tap.usage == {**MESSAGE_USAGE, "output_tokens": 7}


def test_a_usage_key_inside_a_string_of_a_huge_event_is_not_read() -> None:
    text = 'say "usage": {"input_tokens": 999}' + " " * (2 * MAX_PENDING)
    payload = orjson.dumps({"type": "response.output_text.done", "text": text})
    assert tapped([b"data: " + payload + b"\n\n"], 100).usage is None


GEMINI_USAGE = {"promptTokenCount": 40, "candidatesTokenCount": 7, "cachedContentTokenCount": 24}


def _gemini_chunk(text: str, usage: dict[str, int]) -> dict[str, object]:
    parts = [{"text": text}]
    return {"candidates": [{"content": {"parts": parts, "role": "model"}}], "usageMetadata": usage}


@pytest.mark.parametrize("size", [0, 1, 7])
def test_gemini_stream_keeps_the_last_chunks_usage_metadata(size: int) -> None:
    chunks = [
        b"data: " + orjson.dumps(_gemini_chunk("Do", {"promptTokenCount": 40})) + b"\r\n\r\n",
        b"data: " + orjson.dumps(_gemini_chunk("ne.", GEMINI_USAGE)) + b"\r\n\r\n",
    ]
    tap = tapped(chunks, size)
    assert tap.usage == GEMINI_USAGE
    fields = usage_fields(tap.usage)
    assert (fields["prompt_tokens"], fields["completion_tokens"], fields["cached_tokens"]) == (
        40,
        7,
        24,
    )
    assert cache_usage(tap.usage) == CacheUsage(40, 24, None)


def test_gemini_whole_answers_and_the_json_array_stream() -> None:
    whole = orjson.dumps(_gemini_chunk("ok", GEMINI_USAGE))
    assert usage_of(whole) == GEMINI_USAGE
    array = orjson.dumps([_gemini_chunk("o", {"promptTokenCount": 40}),
                          _gemini_chunk("k", GEMINI_USAGE)])  # fmt: skip
    assert usage_of(array) == GEMINI_USAGE
    assert usage_of(b"[]") is None


@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses", "gemini", "gemini-array"])
def test_a_huge_answers_usage_is_read_from_its_tail(protocol: str) -> None:
    """Past ``WHOLE_PARSE_MAX`` an answer is not parsed whole on the event loop (60 MB: 0.14 s):
    its usage, near its end in every protocol, is read from its tail, and a usage key quoted
    inside its text is not taken for it."""
    text = "x" * (32 << 20) + 'say "usage": {"prompt_tokens": 666} ' * 1_000  # in the tail
    answer: object
    if protocol == "chat":
        usage: dict[str, object] = {"prompt_tokens": 5, "completion_tokens": 2}
        answer = {"id": "c1", "choices": [{"message": {"content": text}}], "usage": usage}
    elif protocol == "anthropic":
        usage = MESSAGE_USAGE
        answer = anthropic_message(text=text, usage=usage)
    elif protocol == "responses":
        usage = RESPONSE_USAGE
        answer = response_object(text)
    else:
        usage = GEMINI_USAGE
        answer = _gemini_chunk(text, usage)
        answer = [answer] if protocol == "gemini-array" else answer
    body = orjson.dumps(answer)
    assert len(body) > WHOLE_PARSE_MAX
    started = time.thread_time()
    found = usage_of(body)
    took = time.thread_time() - started
    assert found == usage
    assert took < 0.01, took  # well under 1 ms; a whole parse of these 32 MB: 0.04-0.06 s
