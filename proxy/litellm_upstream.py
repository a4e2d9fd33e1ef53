"""Non-OpenAI providers (anthropic/…, gemini/…, bedrock/…) through litellm, imported on first use.
Responses are re-encoded in OpenAI's format (JSON, or SSE chunks ending in ``data: [DONE]``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from functools import cache
from typing import Any

import orjson

from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from proxy.settings import UpstreamSettings
from proxy.tokens import ensure_offline_tiktoken
from proxy.upstream import UpstreamResponse

# Body fields that are the proxy's business or that litellm takes as named arguments.
_OWN_FIELDS = {"model", "messages", "stream"}


@cache
def load_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ensure_offline_tiktoken()
    import litellm

    litellm.drop_params = True  # a field one provider lacks must not fail the request
    return litellm


def _error_response(exc: Exception) -> UpstreamResponse:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or status < 400:
        status = 502
    body = {
        "error": {
            "message": str(getattr(exc, "message", exc)),
            "type": "upstream_error",
            "param": None,
            "code": type(exc).__name__,
        }
    }
    return UpstreamResponse(status, {"content-type": "application/json"}, body=orjson.dumps(body))


async def litellm_chat(
    upstream: UpstreamSettings, body: dict[str, Any], key: str | None
) -> UpstreamResponse:
    litellm = load_litellm()
    kwargs = {k: v for k, v in body.items() if k not in _OWN_FIELDS}
    stream = bool(body.get("stream"))
    try:
        result = await litellm.acompletion(
            model=body["model"],
            messages=body["messages"],
            stream=stream,
            api_key=key,
            base_url=upstream.base_url,
            timeout=upstream.timeout_s,
            **kwargs,
        )
    except litellm.Timeout:
        raise UpstreamTimeout(f"Upstream {upstream.name} timed out") from None
    except litellm.APIConnectionError as exc:
        raise UpstreamUnreachable(f"Upstream {upstream.name} could not be reached: {exc}") from None
    except Exception as exc:  # litellm maps provider errors to exceptions carrying status_code
        return _error_response(exc)
    if not stream:
        return UpstreamResponse(
            200, {"content-type": "application/json"}, body=orjson.dumps(result.model_dump())
        )
    return UpstreamResponse(
        200, {"content-type": "text/event-stream"}, chunks=_sse(result, upstream.name)
    )


async def _sse(stream: Any, name: str) -> AsyncIterator[bytes]:
    try:
        async for chunk in stream:
            yield b"data: " + orjson.dumps(chunk.model_dump(exclude_none=True)) + b"\n\n"
    except Exception as exc:  # mid-stream provider failure: say so in the stream, then end it
        error = {"error": {"message": f"{name}: {exc}", "type": "upstream_error"}}
        yield b"data: " + orjson.dumps(error) + b"\n\n"
    yield b"data: [DONE]\n\n"
