"""Which tool-call ids an upstream accepts (a rule of ``rules.chain.call_ids``), from its
settings and the protocol the request reaches it in. The chain repair renames only the ids
that rule refuses, so ids an OpenAI-compatible server made (Kimi's ``functions.Bash:0``) go
back to it as it made them, and a conversation carried over from another provider loses the
ids this one would refuse with a 400 on every retry (OpenAI's past 40 characters)."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from proxy.upstream_settings import UpstreamSettings

# litellm providers whose rule is known; any other takes the strictest (``anthropic``)
_LITELLM = {
    "openai": "openai",
    "azure": "openai",
    "mistral": "mistral",
    "codestral": "mistral",
    "gemini": "any",
    "hosted_vllm": "any",
    "moonshot": "any",
}
_AZURE = (".openai.azure.com", ".cognitiveservices.azure.com")  # OpenAI's models on Azure


def call_id_rule(upstream: UpstreamSettings | None, protocol: str) -> str:
    """The rule's name for a request in ``protocol`` (an adapter's name) to ``upstream``."""
    if upstream is None:
        return "anthropic"
    return _rule(upstream.kind, upstream.provider, upstream.base_url, upstream.call_ids, protocol)


@lru_cache(maxsize=256)
def _rule(kind: str, provider: str | None, base_url: str | None, chosen: str, protocol: str) -> str:
    if chosen != "auto":
        rule = chosen
    elif kind == "anthropic":
        return "anthropic"
    elif kind == "gemini":
        return "any"
    elif kind == "litellm":
        rule = _LITELLM.get(provider or "", "anthropic")
    else:  # openai: OpenAI's own API, Mistral's, or another compatible server
        rule = _openai_kind(base_url)
    # a Responses call_id to OpenAI's own /responses may run to 64 characters
    return "openai_responses" if rule == "openai" and protocol == "responses" else rule


def _openai_kind(base_url: str | None) -> str:
    host = (urlsplit(base_url).hostname or "") if base_url else "api.openai.com"
    if host == "api.openai.com" or host.endswith(_AZURE):
        return "openai"
    if host == "api.mistral.ai":
        return "mistral"
    return "any"
