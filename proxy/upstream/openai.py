"""The upstream client. OpenAI-compatible upstreams get the forwarded body through one pooled
aiohttp ``ClientSession`` with the response bytes relayed untouched; other providers go through
litellm, imported only when such an upstream is first used (the import costs seconds).

Why aiohttp and not httpx: profiling the proxy per request (py-spy --gil) put the upstream call
through httpx's ``AsyncHTTPTransport`` (httpcore + h11 + anyio, pure Python) at 37% of the proxy's
CPU. Measured in-process against a local upstream (per call, 20-message body): httpx's transport
0.37 ms CPU, aiohttp's ``ClientSession`` (HTTP parser in C) 0.11 ms.

The session is set up the way a proxy needs it: no cookie jar (it would replay one client's upstream
cookies to the next), no redirects followed, nothing decompressed (bytes go back as they came), no
``User-Agent``/``Accept``/``Accept-Encoding`` of aiohttp's own. Proxies from the environment
(``HTTP(S)_PROXY``, ``NO_PROXY``) are honoured, looked up once per upstream rather than through
aiohttp's ``trust_env``, which reads the environment and ``~/.netrc`` in a worker thread on every
request, and sends a netrc login for the upstream's host as Basic auth (or fails the request with
``ValueError`` when we send an ``Authorization`` header of our own)."""

from __future__ import annotations

import logging
import os
import re
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from yarl import URL

from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from rules.redact import redact_text

log = logging.getLogger("ctxproxy.upstream")

# Request headers a client may send that the upstream should see too.
_FORWARDED_HEADERS = ("openai-organization", "openai-project", "openai-beta", "user-agent")
# Of those, the ones choosing which organization or project a key bills: the client's to choose
# only with its own key. With the upstream's key they are dropped (config may set them).
_ACCOUNT_HEADERS = frozenset({"openai-organization", "openai-project"})
# Response headers worth relaying (rate limits, request ids); hop-by-hop and length are not.
_RELAYED_PREFIXES = ("x-ratelimit-", "openai-", "x-request-id", "retry-after", "anthropic-")
# Headers aiohttp would add by itself: the upstream sees only what we send.
_SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding")
# Idle pooled connections are closed after this long: below uvicorn's 5 s keep-alive (vLLM, LiteLLM
# and most Python upstreams), so we close first; aiohttp does not retry a POST that hit a
# connection the server closed at the same moment.
_KEEPALIVE_S = 4.0
_MAX_HEADER_BYTES = 65_536
# Errors aiohttp raises for a connection that failed or broke (TimeoutError is caught before).
_CONNECTION_ERRORS = (aiohttp.ClientError, OSError)


def relay_headers(headers: Iterable[tuple[bytes, bytes]] | Mapping[str, str]) -> dict[str, str]:
    """The response headers worth relaying. Raw header bytes are read as latin-1, so they go back
    out byte for byte; a value holding control characters (which no HTTP server may send on) is
    left out rather than failing an answer the upstream already gave."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = {}
    for k, v in pairs:
        name = (k.decode("latin-1") if isinstance(k, bytes) else k).lower()
        # content-encoding: the body is relayed as the upstream encoded it (we ask for identity,
        # but an upstream may compress anyway), so the client must be told how to read it
        if name in ("content-type", "content-encoding") or name.startswith(_RELAYED_PREFIXES):
            value = v.decode("latin-1") if isinstance(v, bytes) else v
            if _sendable(value):
                out[name] = value
    return out


def _sendable(value: str) -> bool:
    """A header value uvicorn will send: latin-1, no control characters but tab."""
    return _UNSENDABLE.search(value) is None


_UNSENDABLE = re.compile(r"[^\t\x20-\x7e\x80-\xff]")


def upstream_api_key(
    upstream: UpstreamSettings, client_headers: Mapping[str, str], auth_mode: str
) -> str | None:
    """The upstream key: from the upstream's environment variable; else, in ``passthrough``
    mode only, the client's own bearer. In ``keys`` mode the client's bearer is the proxy key and
    never goes upstream (settings require ``api_key_env`` there)."""
    if upstream.api_key_env:
        # stripped: a key mounted from a file or a k8s secret often ends with a newline
        return os.environ.get(upstream.api_key_env, "").strip() or None
    if auth_mode != "passthrough":
        return None
    auth = client_headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return None


@dataclass(frozen=True)
class _Target:
    """What one upstream's requests need, worked out once: parsed URLs, timeouts, proxy, TLS."""

    chat_url: URL
    models_url: URL
    chat_timeout: aiohttp.ClientTimeout
    models_timeout: aiohttp.ClientTimeout
    proxy: URL | None
    proxy_auth: aiohttp.BasicAuth | None
    ssl: ssl.SSLContext | bool


class UpstreamClient:
    def __init__(self, max_connections: int = 200) -> None:
        self.max_connections = max_connections
        # Created on first use, inside the running loop that will own its connections.
        self._session: aiohttp.ClientSession | None = None
        self._targets: dict[tuple[str, float, float], _Target] = {}
        self._tls: ssl.SSLContext | None = None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _client(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections,
                limit_per_host=0,
                ttl_dns_cache=300,
                keepalive_timeout=_KEEPALIVE_S,
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                trust_env=False,  # env proxies: see _target (no per-request netrc/env reads)
                skip_auto_headers=_SKIP_AUTO_HEADERS,
                timeout=aiohttp.ClientTimeout(total=None),
                # upstreams and their gateways may send long headers (e.g. big cookies, traces)
                max_line_size=_MAX_HEADER_BYTES,
                max_field_size=_MAX_HEADER_BYTES,
            )
        return session

    def _target(self, upstream: UpstreamSettings) -> _Target:
        base = (upstream.base_url or "https://api.openai.com/v1").rstrip("/")
        key = (base, upstream.timeout_s, upstream.connect_timeout_s)
        target = self._targets.get(key)
        if target is None:
            chat_url = URL(f"{base}/chat/completions")
            connect = upstream.connect_timeout_s
            proxy, proxy_auth = _env_proxy(chat_url)
            target = self._targets[key] = _Target(
                chat_url=chat_url,
                models_url=URL(f"{base}/models"),
                # sock_connect: opening a connection; connect (aiohttp: waiting for a free pooled
                # connection, then opening one) as long as a read may take, so a full pool queues
                # requests instead of failing them; sock_read: the longest wait for the next bytes.
                chat_timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=upstream.timeout_s,
                    sock_connect=connect,
                    sock_read=upstream.timeout_s,
                ),
                models_timeout=aiohttp.ClientTimeout(
                    total=None, connect=connect, sock_connect=connect, sock_read=connect
                ),
                proxy=proxy,
                proxy_auth=proxy_auth,
                ssl=self._tls_context() if chat_url.scheme == "https" else True,
            )
        return target

    def _tls_context(self) -> ssl.SSLContext:
        """The system's CA store (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured); where that is empty
        (a Python without system certificates), certifi's bundle, which httpx used before."""
        if self._tls is None:
            context = ssl.create_default_context()
            if not context.cert_store_stats()["x509_ca"]:
                try:
                    import certifi

                    context.load_verify_locations(certifi.where())
                except ImportError:
                    pass
            self._tls = context
        return self._tls

    async def chat(
        self,
        upstream: UpstreamSettings,
        body: dict[str, Any],
        client_headers: Mapping[str, str],
        passthrough_key: str | None,
    ) -> UpstreamResponse:
        if upstream.kind == "litellm":
            from proxy.upstream.litellm import litellm_chat

            return await litellm_chat(upstream, body, passthrough_key)
        return await self._openai_chat(upstream, body, client_headers, passthrough_key)

    def _headers(
        self, upstream: UpstreamSettings, client_headers: Mapping[str, str], key: str | None
    ) -> dict[str, str]:
        """Ours, the client's forwarded ones (names lower-cased by the caller), then config's."""
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        server_key = bool(upstream.api_key_env)  # the key is config's, not the client's
        for name in _FORWARDED_HEADERS:
            if name in client_headers and not (server_key and name in _ACCOUNT_HEADERS):
                headers[name] = client_headers[name]
        headers.update(upstream.headers)
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
        target = self._target(upstream)
        stream = bool(body.get("stream"))
        try:
            response = await self._client().request(
                "POST",
                target.chat_url,
                data=orjson.dumps(body),
                headers=self._headers(upstream, client_headers, key),
                timeout=target.chat_timeout,
                allow_redirects=False,
                compress=False,
                proxy=target.proxy,
                proxy_auth=target.proxy_auth,
                ssl=target.ssl,
            )
        except TimeoutError as exc:  # aiohttp's connect and read timeouts are TimeoutErrors
            raise UpstreamTimeout(
                f"Upstream {upstream.name} timed out: {type(exc).__name__}"
            ) from None
        except _CONNECTION_ERRORS as exc:
            raise _unreachable(upstream.name, "could not be reached", exc) from None
        headers = relay_headers(response.raw_headers)
        if not stream or response.status >= 400 or not _is_event_stream(headers):
            try:
                content = await response.read()  # closes the connection itself if this fails
            except TimeoutError:
                raise UpstreamTimeout(
                    f"Upstream {upstream.name} timed out reading the body"
                ) from None
            except _CONNECTION_ERRORS as exc:
                raise _unreachable(upstream.name, "broke off", exc) from None
            finally:
                response.release()
            return UpstreamResponse(response.status, headers, body=content)
        return UpstreamResponse(
            response.status,
            headers,
            chunks=_raw_chunks(response, upstream.name),
            close=_closer(response),
        )

    async def models(self, upstream: UpstreamSettings, key: str | None) -> tuple[int, bytes]:
        """GET the upstream's model list through the same pooled session as chat (so no cookie
        jar carrying one client's upstream cookies to the next); every wait bounded by the
        upstream's connect timeout."""
        target = self._target(upstream)
        try:
            response = await self._client().request(
                "GET",
                target.models_url,
                headers=self._headers(upstream, {}, key),
                timeout=target.models_timeout,
                allow_redirects=False,
                proxy=target.proxy,
                proxy_auth=target.proxy_auth,
                ssl=target.ssl,
            )
            try:
                content = await response.read()
            finally:
                response.release()
        except (TimeoutError, *_CONNECTION_ERRORS) as exc:
            raise _unreachable(upstream.name, "could not be reached", exc) from None
        return response.status, content


def _env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy ``HTTP_PROXY``/``HTTPS_PROXY`` name for ``url`` unless ``NO_PROXY`` exempts
    its host (as httpx and aiohttp's ``trust_env`` read them); credentials in the proxy URL
    become its Basic auth."""
    if url.host is None or urllib.request.proxy_bypass(url.host):
        return None, None
    found = urllib.request.getproxies().get(url.scheme or "")
    if not found:
        return None, None
    proxy = URL(found if "://" in found else f"http://{found}")
    if proxy.scheme not in ("http", "https"):
        # aiohttp speaks only HTTP proxies: a socks5:// one would get our HTTP request on its
        # SOCKS port and fail every call
        log.warning(
            "ignoring the %s proxy for %s: only http(s) proxies are supported",
            proxy.scheme,
            url.scheme,
        )
        return None, None
    auth = aiohttp.BasicAuth.from_url(proxy)
    return proxy.with_user(None), auth


def _is_event_stream(headers: Mapping[str, str]) -> bool:
    return "text/event-stream" in headers.get("content-type", "")


async def _raw_chunks(response: aiohttp.ClientResponse, name: str) -> AsyncIterator[bytes]:
    """The body as it arrives: de-chunked, not decompressed, one piece per socket read."""
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except TimeoutError:
        raise UpstreamTimeout(f"Upstream {name} timed out mid-stream") from None
    except _CONNECTION_ERRORS as exc:
        raise _unreachable(name, "broke off mid-stream", exc) from None


def _unreachable(name: str, what: str, exc: BaseException) -> UpstreamUnreachable:
    """The client's error names the upstream as configured and the kind of failure; the
    exception's text (aiohttp's names the host and port, e.g. "Cannot connect to host
    10.0.0.5:8000") goes to the server log only."""
    kind = type(exc).__name__
    log.warning("upstream %s %s: %s: %s", name, what, kind, redact_text(str(exc)))
    return UpstreamUnreachable(f"Upstream {name} {what} ({kind}).")


def _closer(response: aiohttp.ClientResponse) -> Callable[[], Coroutine[Any, Any, None]]:
    """``close`` for a streamed response: a body read to its end leaves its connection in the
    pool; one left unfinished (the client went away) closes it, so the upstream stops generating."""

    async def close() -> None:
        if response.content.at_eof():
            response.release()
        else:
            response.close()

    return close
