"""What a Gemini client bridged to another provider is told its cache read.

litellm writes the answer of an OpenAI-shaped provider (OpenAI, Anthropic, any litellm reaches)
in Gemini's shape for a Gemini client (``litellm.google_genai``), and its usage with prompt,
candidate and total counts only: the tokens the provider read from its cache were dropped, so the
client, the request log and the cost were told none (``cached_tokens`` 0 where OpenAI said 64 of
100). Gemini counts them inside ``promptTokenCount`` as ``cachedContentTokenCount``, as OpenAI
counts its ``cached_tokens`` inside ``prompt_tokens``: the one maps onto the other.

Installed once, when litellm is first imported (``proxy.providers.load_litellm``); litellm is
pinned by the lock, and ``tests/proxy/upstream/test_gemini_bridge_usage.py`` fails if a release
moves what this wraps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_installed = False


def cached_tokens(usage: Any) -> int:
    """``prompt_tokens_details.cached_tokens`` of a litellm usage (an object or a mapping)."""
    details = _get(usage, "prompt_tokens_details")
    cached = _get(details, "cached_tokens")
    return cached if isinstance(cached, int) and not isinstance(cached, bool) and cached > 0 else 0


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def install() -> None:
    """Wraps litellm's OpenAI-to-Gemini usage mapping to carry the cache read."""
    global _installed
    if _installed:
        return
    from litellm.google_genai.adapters.transformation import GoogleGenAIAdapter

    adapter: Any = GoogleGenAIAdapter
    mapped: Callable[[Any, object], Mapping[str, int]] = adapter._map_usage

    def _map_usage(self: Any, usage: object) -> Mapping[str, int]:
        counts = mapped(self, usage)
        cached = cached_tokens(usage)
        return {**counts, "cachedContentTokenCount": cached} if cached else counts

    adapter._map_usage = _map_usage
    _installed = True
