"""Reading an upstream's "prompt too long" answer (each provider's wording, the window and counts
it states) apart from its other errors; and reading the prompt cache out of ``usage`` in each
provider's spelling, keeping only sane counts."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from proxy.upstream.overflow import Overflow, overflow_of
from proxy.upstream.usage import CacheUsage, cache_usage, usage_fields


def openai_error(message: str, code: str | None = "context_length_exceeded") -> bytes:
    return orjson.dumps(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": code,
            }
        }
    )


def anthropic_error(message: str) -> bytes:
    return orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            openai_error(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130012 tokens. Please reduce the length of the messages."
            ),
            Overflow(128000, 130012, None),
        ),
        (
            openai_error(
                "This model's maximum context length is 4096 tokens. However, you requested 5000 "
                "tokens (4000 in the messages, 1000 in the completion).",
                code=None,
            ),
            Overflow(4096, 4000, 1000),
        ),
        (
            anthropic_error("prompt is too long: 210000 tokens > 200000 maximum"),
            Overflow(200000, 210000, None),
        ),
        (
            anthropic_error(
                "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, "
                "decrease input length or `max_tokens` and try again"
            ),
            Overflow(200000, 197000, 8192),
        ),
        (
            orjson.dumps(
                {
                    "error": {
                        "code": 400,
                        "message": "The input token count (1200000) exceeds the maximum number "
                        "of tokens allowed (1048576).",
                        "status": "INVALID_ARGUMENT",
                    }
                }
            ),
            Overflow(1048576, 1200000, None),
        ),
        (  # our litellm upstream's answer: litellm's class as the code, the provider's words
            openai_error(
                "Upstream claude: prompt is too long: 210000 tokens > 200000 maximum",
                code="ContextWindowExceededError",
            ),
            Overflow(200000, 210000, None),
        ),
        (openai_error("Your input is too long for this model."), Overflow(None, None, None)),
    ],
)
def test_overflow_spellings(body: bytes, expected: Overflow) -> None:
    assert overflow_of(400, body) == expected


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, openai_error("Invalid value for 'temperature'.", code="invalid_value")),
        (429, openai_error("maximum context length is 8000 tokens")),  # a status of its own
        (500, anthropic_error("prompt is too long: 210000 tokens > 200000 maximum")),
        (400, b"prompt is too long"),  # not JSON
        (400, b""),
        (400, orjson.dumps(["maximum context length"])),
    ],
)
def test_other_errors_are_no_overflow(status: int, body: bytes) -> None:
    assert overflow_of(status, body) is None


def test_an_unbelievable_window_is_not_taken() -> None:
    body = openai_error("This model's maximum context length is 3 tokens.")
    assert overflow_of(400, body) == Overflow(None, None, None)


def test_a_huge_hostile_message_is_read_in_bounded_time() -> None:
    message = "maximum context length is " + "9" * 60_000 + " 1" * 2000
    started = time.perf_counter()
    found = overflow_of(400, openai_error(message))
    assert time.perf_counter() - started < 0.5
    assert found == Overflow(None, None, None)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (  # OpenAI
            {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}},
            CacheUsage(2000, 1536, None),
        ),
        (  # Anthropic, natively: input_tokens leaves the cache out
            {
                "input_tokens": 12,
                "cache_read_input_tokens": 1500,
                "cache_creation_input_tokens": 300,
            },
            CacheUsage(1812, 1500, 300),
        ),
        (  # Anthropic as litellm passes it on, in OpenAI's shape
            {
                "prompt_tokens": 1812,
                "prompt_tokens_details": {"cached_tokens": 1500},
                "cache_read_input_tokens": 1500,
                "cache_creation_input_tokens": 300,
            },
            CacheUsage(1812, 1500, 300),
        ),
        ({"promptTokenCount": 5000, "cachedContentTokenCount": 4000}, CacheUsage(5000, 4000, None)),
        (
            {"prompt_token_count": 5000, "cached_content_token_count": 4000},
            CacheUsage(5000, 4000, None),
        ),
        (  # DeepSeek
            {"prompt_tokens": 900, "prompt_cache_hit_tokens": 832, "prompt_cache_miss_tokens": 68},
            CacheUsage(900, 832, None),
        ),
        (  # untrusted: only sane non-negative ints
            {
                "prompt_tokens": -5,
                "prompt_tokens_details": {"cached_tokens": True},
                "cache_read_input_tokens": "100",
                "cache_creation_input_tokens": 10**12,
            },
            None,
        ),
        ({"prompt_tokens_details": [1], "completion_tokens": 3}, None),
        ("usage", None),
    ],
)
def test_cache_usage_spellings(usage: Any, expected: CacheUsage | None) -> None:
    assert cache_usage(usage) == expected


def test_the_logged_cached_column_reads_every_spelling() -> None:
    assert usage_fields({"prompt_tokens": 9, "cachedContentTokenCount": 8})["cached_tokens"] == 8
    assert usage_fields({"prompt_tokens": 9, "prompt_cache_hit_tokens": 7})["cached_tokens"] == 7


def test_geminis_overflow_in_its_own_error_shape() -> None:
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": (
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    )}}  # fmt: skip
    found = overflow_of(400, orjson.dumps(body))
    assert found is not None and (found.window, found.prompt_tokens) == (1048576, 1200000)
