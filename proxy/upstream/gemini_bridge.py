"""Gemini ``generateContent`` to an upstream that does not speak it (``openai``, ``anthropic``,
``litellm`` kinds), through litellm's ``google_genai`` adapter (imported on first use), which
turns the request into a chat completion and the answer back into Gemini's shape (JSON, or SSE
``data:`` events for ``streamGenerateContent``).

Security as in ``proxy.upstream.bridge``: the provider, URL, key and timeout come from config
(the client's key only in passthrough); litellm is never called without a key.

What the bridge carries: text, ``functionCall`` / ``functionResponse`` parts (each pair with one
id, the call's own where it has one, fitted to the upstream's rule: ``gemini_call_ids``; the
answer's calls with the provider's ids: ``proxy.litellm_gemini_ids``; a function name with dots
or colons fitted, and given back in the answer: ``gemini_tool_names``), ``inlineData`` images,
``fileData`` as a text part naming the file to a provider that reads no URI (``gemini_files``),
``systemInstruction`` (all its text parts), ``functionDeclarations``, ``generationConfig``'s
temperature, topP, maxOutputTokens, stopSequences and a JSON response format. What it loses:
``thought`` parts and every ``thoughtSignature`` (another provider cannot verify them),
``thinkingConfig``, ``safetySettings``, ``cachedContent``, ``toolConfig``'s function-calling
mode, Google's built-in tools (``googleSearch``, ``codeExecution``), and every client header.
``countTokens`` is answered here, estimated with tiktoken; the JSON-array stream
(``streamGenerateContent`` without ``alt=sse``) is written element by element as litellm yields
its chunks (``json_array_stream``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import orjson

from proxy.call_id_rules import call_id_rule
from proxy.errors import ProxyError, UpstreamTimeout
from proxy.protocols.gemini_parts import camel
from proxy.protocols.validate import gemini_count_request
from proxy.settings import UpstreamSettings
from proxy.tokens import TiktokenCounter, encoding_name_for
from proxy.upstream import UpstreamResponse
from proxy.upstream.bridge import _failed, _object, _plain, _route
from proxy.upstream.gemini_call_ids import with_call_ids
from proxy.upstream.gemini_files import named_files
from proxy.upstream.gemini_route import Route, upstream_query
from proxy.upstream.gemini_tool_names import (
    fitted_names,
    renamed_request,
    restored_answer,
    restored_event,
)
from proxy.upstream.json_array_stream import array_stream
from proxy.upstream.litellm_errors import failure
from proxy.upstream.litellm_sent import Watch
from proxy.upstream.litellm_streams import close, opened
from rules.chain.call_ids import rule_named

_JSON = {"content-type": "application/json"}
_READS_FILES = frozenset({"gemini", "vertex_ai"})  # providers that read a ``fileData`` URI
_SSE = {"content-type": "text/event-stream"}
_CONFIG = ("temperature", "topP", "maxOutputTokens", "stopSequences", "responseMimeType",
           "responseJsonSchema", "responseSchema", "candidateCount")  # fmt: skip


async def bridged_gemini(
    upstream: UpstreamSettings, route: Route, body: bytes, query: str, key: str | None
) -> UpstreamResponse:
    data = _object(body)
    if route.method == "countTokens":
        return _count_tokens(route.model, data)
    target, provider, base = _route(upstream, route.model, key)
    from proxy.providers import load_litellm

    load_litellm()
    from litellm.google_genai import agenerate_content, agenerate_content_stream

    config = data.get("generationConfig") or data.get("generation_config")
    config = config if isinstance(config, dict) else {}
    kept = {camel(k): v for k, v in config.items() if camel(k) in _CONFIG}  # either spelling
    system = data.get("systemInstruction") or data.get("system_instruction")
    kwargs: dict[str, Any] = {"systemInstruction": system} if system else {}
    contents = data.get("contents") or []
    tools = data.get("tools")
    names: dict[str, str] = {}
    if provider not in _READS_FILES:  # a file by its URI: named, as no other reads it
        contents = named_files(contents)
    if isinstance(contents, list):  # a call and its response by one id the provider accepts
        contents = with_call_ids(contents, rule_named(call_id_rule(upstream, "gemini")))
        names = fitted_names(tools, contents)  # a name the provider refuses, sent fitted
        if names:
            tools, contents = renamed_request(tools, contents, names)
    call = agenerate_content_stream if route.stream else agenerate_content
    watch = Watch()
    try:
        # google_genai's calls do not apply ``timeout``: bounded here (a stream's reads by
        # ``opened``)
        async with asyncio.timeout(target.timeout_s):
            with watch:
                result: Any = await call(
                    model=route.model,
                    contents=contents,
                    config=kept or None,
                    tools=tools,
                    extra_headers=dict(target.headers) or None,
                    timeout=target.timeout_s,
                    custom_llm_provider=provider,
                    api_key=key,
                    api_base=base,
                    _skip_mcp_handler=True,
                    max_retries=0,  # a failure goes back at once, retry-after with it
                    **kwargs,
                )
                if route.stream:  # its first read is the call: a failure there has its status
                    result = await opened(result, target)
    except TimeoutError:
        raise UpstreamTimeout(f"Upstream {target.name} timed out.") from None
    except ProxyError:
        raise
    except Exception as exc:
        return _failed(target, exc, unsent=watch.unsent)
    if not route.stream:
        answer = orjson.dumps(result, default=_plain)
        if names:
            answer = orjson.dumps(restored_answer(orjson.loads(answer), names))
        return UpstreamResponse(200, dict(_JSON), body=answer)
    events = _sse(result, target, names)
    if upstream_query(query) == "alt=sse":
        shut = partial(close, result)  # the relay closes litellm's stream, however it ends
        return UpstreamResponse(200, dict(_SSE), chunks=events, close=shut)
    return array_stream(200, dict(_JSON), _array(events), partial(close, result))


async def _sse(
    stream: Any, upstream: UpstreamSettings, names: dict[str, str]
) -> AsyncIterator[bytes]:
    try:
        async for event in stream:
            if not isinstance(event, bytes):
                event = b"data: " + orjson.dumps(event, default=_plain) + b"\n\n"
            yield restored_event(event, names) if names else event
    except ProxyError:
        raise
    except Exception as exc:  # mid-stream provider failure: the handler tells the client
        raise failure(upstream, exc, mid_stream=True) from None


async def _array(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """SSE ``data:`` events written as Google's JSON array, one element per event."""
    lead = b"["
    async for event in events:
        for line in event.splitlines():
            if line.startswith(b"data:") and line[5:].strip():
                yield lead + line[5:].strip()
                lead = b",\r\n"
    yield b"]" if lead != b"[" else b"[]"


def _count_tokens(model: str, data: dict[str, Any]) -> UpstreamResponse:
    """An estimate: tiktoken over the prompt's JSON (system instruction, contents, tools), of
    the wrapped request (``generateContentRequest``) where the body is that form."""
    data = gemini_count_request(data)
    counter = TiktokenCounter(encoding_name_for(model), cache_chars=0)
    system = data.get("systemInstruction") or data.get("system_instruction")
    parts = (system, data.get("contents"), data.get("tools"))
    text = "\n".join(orjson.dumps(p).decode() for p in parts if p)
    answer = {"totalTokens": counter.count_text(text)}
    return UpstreamResponse(200, dict(_JSON), body=orjson.dumps(answer))
