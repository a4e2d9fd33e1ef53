"""Upstream calls. OpenAI-compatible upstreams get the forwarded body through one pooled
``httpx.AsyncClient`` with the response bytes relayed untouched; other providers go through
litellm, imported only when such an upstream is first used (the import costs seconds)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from proxy.settings import UpstreamSettings

# Request headers a client may send that the upstream should see too.
_FORWARDED_HEADERS = ("openai-organization", "openai-project", "openai-beta", "user-agent")
# Response headers worth relaying (rate limits, request ids); hop-by-hop and length are not.
_RELAYED_PREFIXES = ("x-ratelimit-", "openai-", "x-request-id", "retry-after", "anthropic-")


@dataclass
class UpstreamResponse:
    status: int
    headers: dict[str, str]
    body: bytes | None = None  # non-streaming
    chunks: AsyncIterator[bytes] | None = None  # streaming: raw bytes as they arrive
    close: Any = None  # awaitable to release the connection
    extra: dict[str, Any] = field(default_factory=dict)


def relay_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for k, v in headers.items():
        lk = k.lower()
        if lk == "content-type" or lk.startswith(_RELAYED_PREFIXES):
            out[lk] = v
    return out


def upstream_api_key(
    upstream: UpstreamSettings, client_headers: Mapping[str, str], auth_mode: str
) -> str | None:
    """The upstream key: from the upstream's environment variable; else, in ``passthrough``
    mode only, the client's own bearer. In ``keys`` mode the client's bearer is the proxy key and
    never goes upstream (settings require ``api_key_env`` there)."""
    if upstream.api_key_env:
        return os.environ.get(upstream.api_key_env) or None
    if auth_mode != "passthrough":
        return None
    auth = client_headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return None


class UpstreamClient:
    def __init__(self, max_connections: int = 200) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=64)
        # Upstream requests go straight to the pooled transport: a proxy wants none of the client
        # layer (its cookie jar would leak one client's upstream cookies to the next; redirects
        # and auth flows are not ours to follow), and skipping it saves ~0.1 ms a request.
        self.transport = httpx.AsyncHTTPTransport(limits=limits, retries=0)

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def chat(
        self,
        upstream: UpstreamSettings,
        body: dict[str, Any],
        client_headers: Mapping[str, str],
        passthrough_key: str | None,
    ) -> UpstreamResponse:
        if upstream.kind == "litellm":
            from proxy.litellm_upstream import litellm_chat

            return await litellm_chat(upstream, body, passthrough_key)
        return await self._openai_chat(upstream, body, client_headers, passthrough_key)

    def _headers(self, client_headers: Mapping[str, str], key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        for name in _FORWARDED_HEADERS:
            if name in client_headers:
                headers[name] = client_headers[name]
        if key:
            headers["authorization"] = f"Bearer {key}"
        return headers

    async def _openai_chat(
        self,
        upstream: UpstreamSettings,
        body: dict[str, Any],
        client_headers: Mapping[str, str],
        key: str | None,
    ) -> UpstreamResponse:
        base = (upstream.base_url or "https://api.openai.com/v1").rstrip("/")
        timeout = httpx.Timeout(upstream.timeout_s, connect=upstream.connect_timeout_s)
        request = httpx.Request(
            "POST",
            f"{base}/chat/completions",
            content=orjson.dumps(body),
            headers=self._headers(client_headers, key),
            extensions={"timeout": timeout.as_dict()},
        )
        stream = bool(body.get("stream"))
        try:
            response = await self.transport.handle_async_request(request)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(
                f"Upstream {upstream.name} timed out: {type(exc).__name__}"
            ) from None
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(
                f"Upstream {upstream.name} could not be reached: {type(exc).__name__}: {exc}"
            ) from None
        headers = relay_headers(response.headers)
        if not stream or response.status_code >= 400 or not _is_event_stream(headers):
            try:
                content = await response.aread()
            except httpx.TimeoutException:
                raise UpstreamTimeout(
                    f"Upstream {upstream.name} timed out reading the body"
                ) from None
            except httpx.HTTPError as exc:
                raise UpstreamUnreachable(f"Upstream {upstream.name} broke off: {exc}") from None
            finally:
                await response.aclose()
            return UpstreamResponse(response.status_code, headers, body=content)
        return UpstreamResponse(
            response.status_code,
            headers,
            chunks=_raw_chunks(response, upstream.name),
            close=response.aclose,
        )

    async def models(self, upstream: UpstreamSettings, key: str | None) -> tuple[int, bytes]:
        """GET the upstream's model list straight through the pooled transport, like chat: no
        client layer, so no cookie jar carrying one client's upstream cookies to the next."""
        base = (upstream.base_url or "https://api.openai.com/v1").rstrip("/")
        timeout = httpx.Timeout(upstream.connect_timeout_s)
        request = httpx.Request(
            "GET",
            f"{base}/models",
            headers=self._headers({}, key),
            extensions={"timeout": timeout.as_dict()},
        )
        try:
            response = await self.transport.handle_async_request(request)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(
                f"Upstream {upstream.name} could not be reached: {exc}"
            ) from None
        return response.status_code, content


def _is_event_stream(headers: Mapping[str, str]) -> bool:
    return "text/event-stream" in headers.get("content-type", "")


async def _raw_chunks(response: httpx.Response, name: str) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.TimeoutException:
        raise UpstreamTimeout(f"Upstream {name} timed out mid-stream") from None
    except httpx.HTTPError as exc:
        raise UpstreamUnreachable(f"Upstream {name} broke off mid-stream: {exc}") from None
