"""Non-OpenAI providers (anthropic/…, gemini/…, bedrock/…) through litellm, imported on first use.
Responses are re-encoded in OpenAI's format (JSON, or SSE chunks ending in ``data: [DONE]``).

litellm obeys many keyword arguments besides a request's parameters: where to call (``api_base``,
``base_url``, ``custom_llm_provider``, ``model_list``, ``fallbacks``), with which key and headers
(``api_key``, ``extra_headers``, ``headers``), or to answer without calling at all
(``mock_response``). A client's body therefore reaches it only through ``ALLOWED_PARAMS``; the
upstream, its key and its timeout come from config alone.

The model name steers litellm too: its prefix picks the provider, and with it a default URL
(``ollama/…`` means localhost:11434) and the key. So litellm is told the upstream's provider
(``custom_llm_provider``), and a name that names another one is refused before any call. Given
no key, litellm takes one from the process environment (``ANTHROPIC_API_KEY`` …): it is never
called without one.

Errors: the client gets a short message naming the upstream as configured (and for a provider's
own error its message, shortened and redacted); the whole exception, with its traceback, goes to
the server log."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from functools import cache, partial
from typing import Any

import orjson

from proxy.errors import (
    BadRequest,
    ModelNotFound,
    ProxyError,
    Unauthorized,
    UpstreamFailed,
    UpstreamMisconfigured,
)
from proxy.protocols.exact_json import plain_loads
from proxy.providers import load_litellm, provider_of
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.cache_breakpoints import with_breakpoints
from proxy.upstream.chat_parts import refuse_dropped_parts
from proxy.upstream.key_missing import key_missing
from proxy.upstream.key_text import require_sendable
from proxy.upstream.litellm_base import litellm_base
from proxy.upstream.litellm_errors import failure, provider_headers
from proxy.upstream.litellm_sent import Watch
from proxy.upstream.litellm_streams import close, opened
from proxy.upstream.url_model import safe_in_url
from rules.redact import redact_text, redacted_prefix

log = logging.getLogger("ctxproxy.litellm")

# OpenAI Chat Completions request parameters a client may send on to litellm (OpenAI's API
# reference; the same as litellm.constants.OPENAI_CHAT_COMPLETION_PARAMS without its transport
# ones, which a test checks), plus Anthropic's ``thinking``, which litellm takes as a request
# parameter. Left out on purpose: ``model``/``messages``/``stream`` (passed by name),
# ``metadata`` (litellm reads routing, pricing and callback settings from it; the session id in
# it is ours and already used), ``extra_body`` and every provider, credential, transport or
# litellm switch (``api_base``, ``aws_*``, ``vertex_*``, ``timeout``, ``num_retries`` …).
ALLOWED_PARAMS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream_options",
        "temperature",
        "thinking",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
# Body fields the proxy passes to litellm by name.
_OWN_FIELDS = frozenset({"model", "messages", "stream"})
_MAX_SHOWN_MODEL = 100  # characters of a refused model name in the answer
# Per (provider, model name): may litellm call that name as that provider. Bounded: names come
# from clients; longer names are not kept at all.
_VERDICTS: dict[tuple[str, str], bool] = {}
_MAX_VERDICTS = 1024
_MAX_KEPT_NAME = 256


def model_uses_provider(provider: str, model: str) -> bool:
    """Whether ``model`` names no provider but ``provider``: by its prefix, or (a bare name) by
    litellm's model lists, allowing the variant litellm itself picks within the provider
    (``claude-2`` is anthropic_text either way) and a name the provider's own list holds though
    litellm places the bare name elsewhere (``gemini-2.5-pro``: vertex_ai by itself, listed as
    ``gemini/gemini-2.5-pro``). Memoised per name, within a bound."""
    key = (provider, model)
    verdict = _VERDICTS.get(key)
    if verdict is None:
        named = provider_of(model)
        verdict = named is None or named == provider
        if not verdict and "/" not in model:
            verdict = named == _pinned_provider(provider, model) or _listed(provider, model)
        if len(model) <= _MAX_KEPT_NAME:
            if len(_VERDICTS) >= _MAX_VERDICTS:
                _VERDICTS.clear()
            _VERDICTS[key] = verdict
    return verdict


def _listed(provider: str, model: str) -> bool:
    """Whether litellm's bundled model list holds ``model`` for ``provider``."""
    litellm = load_litellm()
    return f"{provider}/{model}" in litellm.model_cost or model in litellm.models_by_provider.get(
        provider, ()
    )


def _pinned_provider(provider: str, model: str) -> str | None:
    """The provider litellm uses for ``model`` when told ``provider``."""
    try:
        return str(load_litellm().get_llm_provider(model, custom_llm_provider=provider)[1])
    except Exception:
        return None


@cache
def _known_provider(provider: str) -> bool:
    """Whether litellm knows ``provider`` (config values only, so the cache stays small): told a
    provider, litellm takes any name, so ask it about ``provider/model`` instead."""
    litellm = load_litellm()
    if provider in litellm.provider_list:  # most; checked first, as in provider_of
        return True
    try:
        return litellm.get_llm_provider(f"{provider}/model")[1] == provider
    except Exception:
        return False


def _checked(upstream: UpstreamSettings, model: str, key: str | None) -> str:
    """The upstream's provider, once the request may go to it; raises what the client is told
    otherwise (nothing has been sent)."""
    if key is None:
        if upstream.api_key_env:
            raise key_missing(upstream)
        raise Unauthorized(
            f"no API key: send your provider key, or configure api_key_env (upstream "
            f"{upstream.name})."
        )
    if not upstream.api_key_env:  # the client's own: one it cannot send is its to fix
        require_sendable(key)
    provider = upstream.provider
    if provider is None or not _known_provider(provider):
        log.error("upstream %s: litellm knows no provider %r", upstream.name, provider)
        raise UpstreamMisconfigured(
            f"Upstream {upstream.name} is misconfigured: its provider is not one litellm knows."
        )
    if not safe_in_url(provider, model):
        # the server's log and the row keep it: redacted (a Gemini URL's ``?key=AIza…`` pasted
        # as the model), before the cut (a key past it would keep its beginning, of no shape)
        shown = redacted_prefix(model, _MAX_SHOWN_MODEL)
        if len(model) > _MAX_SHOWN_MODEL and len(shown) == _MAX_SHOWN_MODEL:
            shown = shown[:-1] + "…"
        log.warning("upstream %s: model name refused: %r", upstream.name, shown)
        raise BadRequest(
            f"The model '{shown}' is not a model name {provider} takes: letters, digits and "
            "'.', '_', '-' (and '/', ':', '@', '+' where the provider's names hold them).",
            param="model",
        )
    if not model_uses_provider(provider, model):
        # the server's log and the row keep it: redacted (a Gemini URL's ``?key=AIza…`` pasted
        # as the model), before the cut (a key past it would keep its beginning, of no shape)
        shown = redacted_prefix(model, _MAX_SHOWN_MODEL)
        if len(model) > _MAX_SHOWN_MODEL and len(shown) == _MAX_SHOWN_MODEL:
            shown = shown[:-1] + "…"
        raise ModelNotFound(
            f"The model '{shown}' is not served here: upstream {upstream.name} calls {provider} "
            "only.",
            param="model",
        )
    return provider


def forwarded_params(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body's request parameters litellm may see, and the names of those dropped."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in body.items():
        if name in ALLOWED_PARAMS:
            kept[name] = value
        elif name not in _OWN_FIELDS:
            dropped.append(name)
    return kept, dropped


async def litellm_chat(
    upstream: UpstreamSettings, body: dict[str, Any], key: str | None
) -> UpstreamResponse:
    provider = _checked(upstream, body["model"], key)
    refuse_dropped_parts(provider, body.get("messages"))  # not lost without a word
    body, breakpoints = with_breakpoints(upstream, provider, body)
    response = await _completion(upstream, provider, body, key)
    if breakpoints is not None:  # for the log row (``extra`` is read by the caller)
        response.extra["breakpoints"] = breakpoints
    return response


async def _completion(
    upstream: UpstreamSettings, provider: str, body: dict[str, Any], key: str | None
) -> UpstreamResponse:
    litellm = load_litellm()
    # litellm may change what it is handed; the parsed body's objects are shared with the next
    # request of the session (``body_memory``): it gets its own
    body = plain_loads(orjson.dumps(body))  # an integer past 64 bits as sent
    kwargs, dropped = forwarded_params(body)
    if upstream.headers:
        kwargs["extra_headers"] = dict(upstream.headers)
    if dropped and log.isEnabledFor(logging.DEBUG):
        # names only (client-chosen, so bounded and redacted), never values
        names = ", ".join(repr(name[:64]) for name in sorted(dropped)[:50])
        log.debug("upstream %s: not passed to litellm: %s", upstream.name, redact_text(names))
    stream = bool(body.get("stream"))
    watch = Watch()
    try:
        with watch:
            result = await litellm.acompletion(
                model=body["model"],
                messages=body["messages"],
                stream=stream,
                api_key=key,
                custom_llm_provider=provider,  # the model's prefix must not pick another
                base_url=litellm_base(upstream),
                timeout=upstream.timeout_s,
                # never litellm's MCP gateway (tools naming a server it would call); importing it
                # needs the ``mcp`` extra and fails every request with tools without it
                _skip_mcp_handler=True,
                max_retries=0,  # a failure goes back at once, retry-after with it: the client
                **kwargs,  # retries
            )
            if stream:  # its first read may be the call: a failure there has its status
                result = await opened(result, upstream)
    except ProxyError:
        raise
    except Exception as exc:
        error = failure(upstream, exc, unsent=watch.unsent)
        if isinstance(error, UpstreamFailed):  # the provider answered: relay its status
            headers = {"content-type": "application/json", **provider_headers(exc)}
            return UpstreamResponse(error.status, headers, body=error.body_bytes())
        raise error from None
    if not stream:
        return UpstreamResponse(
            200, {"content-type": "application/json"}, body=orjson.dumps(result.model_dump())
        )
    return UpstreamResponse(
        200,
        {"content-type": "text/event-stream"},
        chunks=_sse(result, upstream),
        close=partial(close, result),  # the relay closes litellm's stream, however it ends
    )


async def _sse(stream: Any, upstream: UpstreamSettings) -> AsyncIterator[bytes]:
    try:
        async for chunk in stream:
            yield b"data: " + orjson.dumps(chunk.model_dump(exclude_none=True)) + b"\n\n"
    except ProxyError:  # the upstream's silence (``opened``)
        raise
    except Exception as exc:  # mid-stream provider failure: the relay tells the client and logs it
        raise failure(upstream, exc, mid_stream=True) from None
    yield b"data: [DONE]\n\n"
