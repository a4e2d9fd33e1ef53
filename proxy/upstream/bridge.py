"""A protocol the upstream does not speak, through litellm (imported on first use): Anthropic
Messages to an ``openai`` or ``litellm`` upstream, Responses to an ``anthropic`` or ``litellm``
one. (Chat completions to an ``anthropic`` upstream take ``litellm.litellm_chat``.) Answers come
back in the client's protocol: Anthropic JSON or SSE (``event: message_start`` …), Responses JSON
or SSE (``event: response.created`` … ``response.completed``).

Security as in ``proxy.upstream.litellm``: the client's body reaches litellm only through
``MESSAGES_PARAMS``/``RESPONSES_PARAMS``; the provider, URL, key and timeout come from config
(``_skip_mcp_handler``: never litellm's MCP gateway); litellm is never called without a key.

What litellm carries, and what it cannot (the request is translated to a chat completion and the
answer back):
- Messages → chat: text, images, tool_use/tool_result (ids kept), system (string or blocks),
  role "system" messages, tools and tool_choice, temperature/top_p/top_k/stop_sequences,
  ``thinking`` and ``output_config`` (effort → ``reasoning_effort``, format → response_format).
  Lost: ``thinking``/``redacted_thinking`` blocks and their ``signature`` (another provider
  cannot verify them; the model does not see its earlier reasoning), ``cache_control`` (OpenAI
  caches prefixes by itself; nor does Gemini get context-cache objects made of them:
  ``proxy.providers.load_litellm``), ``metadata`` (``user_id`` included: litellm reads routing from
  it), ``context_management`` (litellm would run its own compaction, calling a model),
  ``mcp_servers``, ``container``, ``service_tier``, every ``anthropic-beta`` feature and every
  client header (litellm sends its own; config ``headers`` are added). With ``thinking`` of type
  "enabled" and OpenAI's own API, litellm calls ``{base_url}/responses`` instead of chat (any
  other OpenAI-compatible server is sent chat, the thinking budget as ``reasoning_effort``).
  ``count_tokens`` is answered here, estimated with tiktoken (the upstream has no such call).
- Responses → chat: messages, instructions, function/custom tools, their calls and outputs
  (``call_id`` kept; shell and patch calls as function calls: ``bridge_calls``), reasoning items
  as far as the provider accepts them back, text format. Lost: ``previous_response_id``
  (refused: no server-side history here), ``store``, ``include`` (no
  ``reasoning.encrypted_content`` comes back), ``metadata``/``client_metadata``,
  ``prompt_cache_key`` except for providers whose chat takes it, hosted tools (``web_search``
  becomes litellm's web_search_options or is dropped; ``tool_search``, ``namespace`` …), every
  client header. Item ids in the answer are litellm's, not the provider's."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import orjson

from proxy.errors import (
    BadRequest,
    ProxyError,
    Unauthorized,
    UpstreamFailed,
)
from proxy.protocols.exact_json import dumps, plain_loads
from proxy.providers import load_litellm
from proxy.settings import UpstreamSettings
from proxy.tokens import TiktokenCounter, encoding_name_for
from proxy.upstream import UpstreamResponse
from proxy.upstream.bridge_calls import bridged_calls
from proxy.upstream.bridge_documents import bridged_documents
from proxy.upstream.bridge_events import failed_event
from proxy.upstream.bridge_tool_choice import parallel_calls_off
from proxy.upstream.key_missing import key_missing
from proxy.upstream.key_text import require_sendable
from proxy.upstream.litellm import _checked
from proxy.upstream.litellm_base import gemini_api_base
from proxy.upstream.litellm_errors import failure, provider_headers
from proxy.upstream.litellm_messages import streamed_messages
from proxy.upstream.litellm_sent import Watch
from proxy.upstream.litellm_streams import close, opened
from proxy.upstream.reasoning_items import marked_answer as marked_response
from proxy.upstream.reasoning_items import marked_event as marked_response_event
from proxy.upstream.thinking_signatures import (
    marked_answer,
    marked_event,
    unmarked,
    without_unverifiable,
)

log = logging.getLogger("ctxproxy.litellm")

MESSAGES_PARAMS = frozenset(
    {
        "max_tokens",
        "output_config",
        "output_format",
        "stop_sequences",
        "system",
        "temperature",
        "thinking",
        "tool_choice",
        "tools",
        "top_k",
        "top_p",
    }
)
RESPONSES_PARAMS = frozenset(
    {
        "instructions",
        "max_output_tokens",
        "parallel_tool_calls",
        "reasoning",
        "safety_identifier",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_p",
        "truncation",
        "user",
    }
)
_OPENAI_BASE = "https://api.openai.com/v1"
# Providers litellm gives a document's URL as one they read (Gemini's ``file_data``)
_READS_URLS = frozenset({"gemini", "vertex_ai"})
# litellm's Messages adapter looks up litellm's proxy server for a router on every call
# (importing it, seconds, or failing to); the router serves only the context_management
# polyfill, which never runs here (context_management is not passed). Any non-None value stops
# the lookup.
_NO_ROUTER = ()


async def bridged_messages(
    upstream: UpstreamSettings,
    body: bytes,
    client_headers: Mapping[str, str],
    key: str | None,
    path: str,
) -> UpstreamResponse:
    """Anthropic Messages through litellm. Like ``litellm_chat``, a provider's error status
    comes back as an answer whose body is ``UpstreamFailed``'s (OpenAI's error shape, the
    provider's shortened message inside); the ``UpstreamFailed`` itself is in
    ``extra["error"]`` for the handler to render in Anthropic's shape."""
    data = _object(body)
    model = data.get("model")
    if not isinstance(model, str):
        raise BadRequest("model must be a string.", param="model")
    if path.endswith("/count_tokens"):
        return _count_tokens(model, data)
    if not upstream.api_key_env and not key:  # Claude Code sends its key as x-api-key
        key = client_headers.get("x-api-key", "").strip() or None
    target, provider, base = _route(upstream, model, key)
    if not isinstance(data.get("max_tokens"), int):
        raise BadRequest("max_tokens must be an integer.", param="max_tokens")
    litellm = load_litellm()
    # the chat completions URL for an OpenAI upstream (litellm's default is the Responses API,
    # which most OpenAI-compatible servers lack); set on every call, as load_litellm sets its own
    litellm.use_chat_completions_url_for_anthropic_messages = True
    if provider == "anthropic":  # Anthropic's own API: nothing it cannot verify goes
        data = without_unverifiable(data) or data
        messages = data.get("messages")
    else:  # each signature as its maker wrote it; documents as the bridge carries them
        urls = provider in _READS_URLS
        messages = bridged_documents(unmarked(data.get("messages")), urls)
    stream = data.get("stream") is True
    kwargs = _chat_only_thinking(
        {k: v for k, v in data.items() if k in MESSAGES_PARAMS}, model, provider, base
    )
    kwargs = parallel_calls_off(kwargs, model, provider)
    if target.headers:
        kwargs["extra_headers"] = dict(target.headers)
    # a stream takes litellm's chat adapter: its own stream path needs litellm's proxy server
    call = streamed_messages if stream else litellm.anthropic_messages
    watch = Watch()
    try:
        with watch:
            result = await call(
                model=model,
                messages=messages,
                stream=stream,
                api_key=key,
                api_base=base,
                custom_llm_provider=provider,
                timeout=target.timeout_s,
                _skip_mcp_handler=True,
                max_retries=0,  # a failure goes back at once, retry-after with it
                litellm_router=_NO_ROUTER,
                **kwargs,
            )
            if stream:  # its first read may be the call: a failure there has its status
                said = partial(failed_event, target)
                result = await opened(result, target, _message_start, said)
    except ProxyError:
        raise
    except Exception as exc:
        return _failed(target, exc, unsent=watch.unsent)
    mark = provider != "anthropic"  # Anthropic's own signatures are good at Anthropic
    if not stream:
        answer = marked_answer(_as_dict(result)) if mark else result
        return UpstreamResponse(200, dict(_JSON), body=orjson.dumps(answer, default=_plain))
    chunks, shut = _anthropic_sse(result, target, mark), partial(close, result)
    return UpstreamResponse(200, dict(_SSE), chunks=chunks, close=shut)


def _message_start(event: Any) -> bool:
    """litellm's Messages adapter writes ``message_start`` before it reads the chat stream."""
    if isinstance(event, bytes):
        return event.startswith((b"event: message_start", b'data: {"type":"message_start"'))
    return isinstance(event, dict) and event.get("type") == "message_start"


def _stored_history(data: dict[str, Any]) -> tuple[str, str] | None:
    """What in a Responses body stands for history only OpenAI keeps (as named to the client,
    and its parameter), or None."""
    for name in ("previous_response_id", "conversation"):
        if data.get(name):
            return name, name
    items = data.get("input")
    if isinstance(items, list) and any(
        isinstance(item, dict) and item.get("type") == "item_reference" for item in items
    ):
        return "An item_reference", "input"
    return None


async def bridged_responses(
    upstream: UpstreamSettings, body: bytes, key: str | None
) -> UpstreamResponse:
    """Responses through litellm's Responses-to-chat bridge (not ``litellm.aresponses``, which
    imports the ``mcp`` package on every call, an extra we do not install). Errors as in
    ``bridged_messages``."""
    data = _object(body)
    model = data.get("model")
    if not isinstance(model, str):
        raise BadRequest("model must be a string.", param="model")
    stored = _stored_history(data)
    if stored is not None:
        what, param = stored
        raise BadRequest(
            f"{what} needs an OpenAI upstream: {upstream.name} is reached through litellm, "
            "which keeps no responses. Send the whole input instead.",
            param=param,
        )
    target, provider, base = _route(upstream, model, key)
    load_litellm()
    from litellm.responses.litellm_completion_transformation.handler import (
        LiteLLMCompletionTransformationHandler,
    )

    stream = data.get("stream") is True
    params = {k: v for k, v in data.items() if k in RESPONSES_PARAMS}
    extra: dict[str, Any] = {}
    if isinstance(data.get("prompt_cache_key"), str):
        extra["prompt_cache_key"] = data["prompt_cache_key"]
    handler: Any = LiteLLMCompletionTransformationHandler()  # typed for its sync mode only
    watch = Watch()
    try:
        with watch:
            result = await handler.response_api_handler(
                model=model,
                input=bridged_calls(data.get("input", "")),  # shell calls not dropped
                responses_api_request=params,
                custom_llm_provider=provider,
                _is_async=True,
                stream=stream,
                extra_headers=dict(target.headers) or None,
                api_key=key,
                api_base=base,
                timeout=target.timeout_s,
                _skip_mcp_handler=True,
                max_retries=0,  # a failure goes back at once, retry-after with it
                **extra,
            )
            if stream:  # its first read may be the call: a failure there has its status
                result = await opened(result, target)
    except ProxyError:
        raise
    except Exception as exc:
        return _failed(target, exc, unsent=watch.unsent)
    if not stream:
        answer = marked_response(_plain(result))  # its reasoning ids: not OpenAI's to look up
        # it echoes the request's parameters: an integer past 64 bits among them (``dumps``)
        return UpstreamResponse(200, dict(_JSON), body=dumps(answer))
    chunks, shut = _responses_sse(result, target), partial(close, result)
    return UpstreamResponse(200, dict(_SSE), chunks=chunks, close=shut)


_JSON = {"content-type": "application/json"}
_EVENT_NAME = re.compile(r"[A-Za-z0-9_.]{1,100}")
_SSE = {"content-type": "text/event-stream"}


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = plain_loads(body)  # an integer past 64 bits as sent, not a float near it
    except orjson.JSONDecodeError:
        raise BadRequest("The body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise BadRequest("The body must be a JSON object.")
    return data


def _route(
    upstream: UpstreamSettings, model: str, key: str | None
) -> tuple[UpstreamSettings, str, str | None]:
    """The upstream as litellm sees it (with its provider), the provider and the base URL;
    raises what the client is told when the request may not go (nothing has been sent)."""
    if upstream.kind == "openai":
        # an OpenAI-compatible server takes any model name: no provider check on it
        if key is None:
            if upstream.api_key_env:
                raise key_missing(upstream)
            raise Unauthorized(
                f"no API key: send your provider key, or configure api_key_env (upstream "
                f"{upstream.name})."
            )
        if not upstream.api_key_env:  # the client's own: one it cannot send is its to fix
            require_sendable(key)
        target = upstream.model_copy(update={"provider": "openai"})
        return target, "openai", upstream.base_url or _OPENAI_BASE
    if upstream.kind in ("anthropic", "gemini"):
        upstream = upstream.model_copy(update={"provider": upstream.kind})
    base = upstream.base_url
    if upstream.kind == "gemini" and base is not None:
        base = gemini_api_base(base)
    return upstream, _checked(upstream, model, key), base


def _chat_only_thinking(
    kwargs: dict[str, Any], model: str, provider: str, base: str | None
) -> dict[str, Any]:
    """``kwargs`` with an enabled ``thinking`` sent as the ``reasoning_effort`` its budget
    buckets to, for an OpenAI-compatible server that is not OpenAI's: litellm sends such a
    request to ``/responses`` for any model it does not know to lack reasoning (a local model
    among them), and most such servers have only chat (Ollama answers 404)."""
    thinking = kwargs.get("thinking")
    if provider != "openai" or not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return kwargs
    host = urlsplit(base or _OPENAI_BASE).hostname or ""
    if host == "api.openai.com" or host.endswith(".api.openai.com"):
        return kwargs  # OpenAI's own: its Responses API answers with the reasoning's summary
    from litellm.llms.anthropic.messages.adapters.transformation import (
        LiteLLMAnthropicMessagesAdapter as Adapter,
    )

    rest = {k: v for k, v in kwargs.items() if k != "thinking"}
    effort = Adapter.translate_anthropic_thinking_to_reasoning_effort(thinking, model=model)
    if effort:
        rest["reasoning_effort"] = effort
    return rest


def _failed(upstream: UpstreamSettings, exc: Exception, unsent: bool = False) -> UpstreamResponse:
    error = failure(upstream, exc, unsent=unsent)
    if isinstance(error, UpstreamFailed):  # the provider answered: relay its status
        body, headers = error.body_bytes(), {**_JSON, **provider_headers(exc)}
        return UpstreamResponse(error.status, headers, body=body, extra={"error": error})
    raise error from None


def _count_tokens(model: str, data: dict[str, Any]) -> UpstreamResponse:
    """An estimate: tiktoken over the prompt's JSON (system, messages, tools)."""
    counter = TiktokenCounter(encoding_name_for(model), cache_chars=0)
    parts = (data.get("system"), data.get("messages"), data.get("tools"))
    text = "\n".join(orjson.dumps(p).decode() for p in parts if p)
    answer = {"input_tokens": counter.count_text(text)}
    return UpstreamResponse(200, dict(_JSON), body=orjson.dumps(answer))


def _plain(value: Any) -> Any:
    """A litellm answer object as JSON-able data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    raise TypeError(type(value).__name__)


async def _anthropic_sse(
    stream: Any, upstream: UpstreamSettings, mark: bool
) -> AsyncIterator[bytes]:
    """litellm's Anthropic stream: SSE bytes already (the adapter), or event objects; with
    ``mark``, each thinking signature marked as another provider's (``thinking_signatures``)."""
    try:
        async for event in stream:
            data = event if isinstance(event, bytes) else _event(_as_dict(event))
            failed = failed_event(upstream, data, mid_stream=True)
            if failed is not None:  # the adapter's own error event: its words are litellm's
                raise failed
            yield marked_event(data) if mark else data
    except ProxyError:
        raise
    except Exception as exc:  # mid-stream provider failure: the handler tells the client
        raise failure(upstream, exc, mid_stream=True) from None


async def _responses_sse(stream: Any, upstream: UpstreamSettings) -> AsyncIterator[bytes]:
    try:
        async for event in stream:
            yield _event(marked_response_event(_as_dict(event)))
    except ProxyError:
        raise
    except Exception as exc:
        raise failure(upstream, exc, mid_stream=True) from None


def _as_dict(event: Any) -> dict[str, Any]:
    return event if isinstance(event, dict) else _plain(event)


def _event(data: dict[str, Any]) -> bytes:
    kind = data.get("type")
    named = isinstance(kind, str) and _EVENT_NAME.fullmatch(kind)
    head = b"event: " + kind.encode() + b"\n" if named and isinstance(kind, str) else b""
    return head + b"data: " + dumps(data, default=_plain) + b"\n\n"
