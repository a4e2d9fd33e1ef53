"""An upstream's ``usage`` as the request log keeps it: token counts in any provider's spelling,
and only values an INTEGER column can hold; and what it says about the prompt cache."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

# A token count larger than this is no count (no prompt is ten billion tokens long).
MAX_SANE_TOKENS = 10**10
# A whole answer larger than this is not parsed for its usage (60 MB held the event loop 0.14 s):
# the usage object sits near its end in every protocol, and is read from its last ``TAIL_BYTES``.
WHOLE_PARSE_MAX = 1024 * 1024
TAIL_BYTES = 64 * 1024
# A usage key opening an object (a quote inside a JSON string is escaped, so this is a key).
_USAGE_KEY = re.compile(rb'"(?:usage|usageMetadata)"\s*:\s*\{')
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class CacheUsage:
    """The prompt cache as the upstream reported it for one answer; None: not reported."""

    prompt_tokens: int | None
    cached_tokens: int | None  # read from the cache
    cache_write_tokens: int | None  # written to it


def cache_usage(usage: Any) -> CacheUsage | None:
    """Cache reads and writes in each provider's spelling: OpenAI
    ``prompt_tokens_details.cached_tokens`` (Responses: ``input_tokens_details.cached_tokens``),
    Anthropic ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` (natively, and as
    litellm passes them on), Gemini ``cached_content_token_count`` / ``cachedContentTokenCount``,
    DeepSeek ``prompt_cache_hit_tokens``. Untrusted: only non-negative ints of a sane size are
    kept."""
    if not isinstance(usage, dict):
        return None
    details = _dict(usage.get("prompt_tokens_details"))
    input_details = usage.get("input_tokens_details")
    cached = _largest(
        details.get("cached_tokens"),
        _dict(input_details).get("cached_tokens"),
        usage.get("cache_read_input_tokens"),
        usage.get("prompt_cache_hit_tokens"),
        usage.get("cached_content_token_count"),
        usage.get("cachedContentTokenCount"),
    )
    written = _largest(
        usage.get("cache_creation_input_tokens"), details.get("cache_creation_tokens")
    )
    if cached is None and _gemini_count(usage.get("promptTokenCount"), usage):
        # Gemini's JSON leaves out a count of zero: no cachedContentTokenCount is a miss, not
        # a silence (taken as one, a cold cache passed for warm and requests ran 48% over the
        # budget)
        cached = 0
    return _with_prompt(usage, isinstance(input_details, dict), cached, written)


def _gemini_count(prompt: Any, usage: dict[str, Any]) -> bool:
    """Whether ``usage`` is Gemini's ``usageMetadata`` (its prompt count in its own spelling)."""
    return type(prompt) is int and "prompt_tokens" not in usage


def _with_prompt(
    usage: dict[str, Any], responses: bool, cached: int | None, written: int | None
) -> CacheUsage | None:
    prompt = _largest(
        usage.get("prompt_tokens"), usage.get("prompt_token_count"), usage.get("promptTokenCount")
    )
    fresh = _largest(usage.get("input_tokens"))
    if prompt is None and fresh is not None:
        # Responses' input_tokens is the whole prompt (its details say how much was cached);
        # Anthropic's counts what the cache neither read nor wrote
        prompt = fresh if responses else fresh + (cached or 0) + (written or 0)
    if prompt is None and cached is None and written is None:
        return None
    return CacheUsage(prompt, cached, written)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _largest(*values: Any) -> int | None:
    sane = [v for v in values if type(v) is int and 0 <= v <= MAX_SANE_TOKENS]
    return max(sane) if sane else None


def usage_fields(
    usage: dict[str, Any] | None, reported: CacheUsage | None = None
) -> dict[str, Any]:
    """Usage as logged: prompt/completion tokens and cached tokens in any provider's spelling
    (Anthropic's prompt: input + cache reads + cache writes; Responses': ``input_tokens``).
    ``reported``: ``cache_usage(usage)`` when the caller read it already."""
    if not isinstance(usage, dict):
        return {}
    if reported is None:
        reported = cache_usage(usage)
    cached = reported.cached_tokens if reported is not None else None
    prompt = _count(usage.get("prompt_tokens"))
    if prompt is None and reported is not None:  # Anthropic's or Responses' input_tokens
        prompt = _count(reported.prompt_tokens)
    completion = _count(usage.get("completion_tokens"))
    if completion is None:
        completion = _count(usage.get("output_tokens"))
    if completion is None:  # Gemini's
        completion = _count(usage.get("candidatesTokenCount"))
    return {
        "usage": usage,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": _count(cached) or 0,
    }


def _count(value: Any) -> int | None:
    """A token count as an INTEGER column takes it: whatever else an upstream sends is logged
    in ``usage`` as it came, never in the column (a list there would stop the writer)."""
    if type(value) is int and 0 <= value < 2**63:
        return value
    return None


def usage_of(body: bytes | None) -> dict[str, Any] | None:
    """The ``usage`` object of a whole JSON answer, if it has one."""
    if not body:
        return None
    if len(body) > WHOLE_PARSE_MAX:
        return last_usage(body[-TAIL_BYTES:])
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(obj, list) and obj:  # Gemini's JSON-array stream: the last chunk's is final
        obj = obj[-1]
    if not isinstance(obj, dict):
        return None
    usage = obj.get("usage")
    if usage is None:
        usage = obj.get("usageMetadata")  # Gemini's
    return usage if isinstance(usage, dict) else None


def last_usage(data: bytes | bytearray) -> dict[str, Any] | None:
    """The last ``"usage": {…}`` (or ``usageMetadata``) object in ``data``, if it is whole there."""
    last = None
    for last in _USAGE_KEY.finditer(data):  # noqa: B007 (the last one is wanted)
        pass
    if last is None:
        return None
    text = bytes(data[last.end() - 1 :]).decode("utf-8", "replace")
    try:
        found, _ = _DECODER.raw_decode(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
