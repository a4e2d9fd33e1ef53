"""The upstream client. OpenAI-compatible upstreams get the forwarded body through one pooled
aiohttp ``ClientSession`` with the response bytes relayed untouched; other providers go through
litellm, imported only when such an upstream is first used (the import costs seconds).

Why aiohttp and not httpx: profiling the proxy per request (py-spy --gil) put the upstream call
through httpx's ``AsyncHTTPTransport`` (httpcore + h11 + anyio, pure Python) at 37% of the proxy's
CPU. Measured in-process against a local upstream (per call, 20-message body): httpx's transport
0.37 ms CPU, aiohttp's ``ClientSession`` (HTTP parser in C) 0.11 ms.

The session is set up the way a proxy needs it: no cookie jar (it would replay one client's upstream
cookies to the next), no redirects followed, an answer compressed despite our ``Accept-Encoding:
identity`` decoded (gzip, deflate; br and zstd where their modules are installed), no
``User-Agent``/``Accept``/``Accept-Encoding`` of aiohttp's own. Proxies from the environment
(``HTTP(S)_PROXY``, ``NO_PROXY``) are honoured, looked up once per upstream rather than through
aiohttp's ``trust_env``, which reads the environment and ``~/.netrc`` in a worker thread on every
request, and sends a netrc login for the upstream's host as Basic auth (or fails the request with
``ValueError`` when we send an ``Authorization`` header of our own)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from yarl import URL

from proxy.errors import UpstreamFailed, UpstreamTimeout
from proxy.providers import litellm_ready
from proxy.relayed_headers import NOT_WITH_SERVER_KEY
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.error_redaction import ErrorRedactor
from proxy.upstream.key_missing import key_missing
from proxy.upstream.transport import (
    CONNECTION_ERRORS,
    MAX_ERROR_ANSWER_BYTES,
    RELAYED_NAMES,
    REQUEST_CONTEXT_HEADERS,
    answer,
    encoded_query,
    read_bounded,
    undecodable,
    undecodable_answer,
    unreachable,
)
from proxy.upstream.transport import env_proxy as _env_proxy
from proxy.upstream.transport import relay_headers as relay_headers

# Request headers a client may send that the upstream should see too.
_FORWARDED_HEADERS = (
    "openai-organization",
    "openai-project",
    "openai-beta",
    "user-agent",
    *REQUEST_CONTEXT_HEADERS,
)
# Of those, the ones choosing which organization or project a key bills, and an idempotency
# key: the client's only with its own key. With the upstream's they are dropped (config may set
# the account's).
_ACCOUNT_HEADERS = NOT_WITH_SERVER_KEY
# A model list is read whole to be merged with the configured names: bounded (OpenAI's is some
# 20 KB, OpenRouter's about a megabyte).
MAX_MODEL_LIST_BYTES = 8 * 1024 * 1024
# Where each kind of upstream is when config gives no base_url.
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",  # no /v1: paths carry it, as Anthropic's SDKs do
    "gemini": "https://generativelanguage.googleapis.com",  # no /v1beta: paths carry it
}
# Headers aiohttp would add by itself: the upstream sees only what we send.
_SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding")
# Idle pooled connections are closed after this long: below uvicorn's 5 s keep-alive (vLLM, LiteLLM
# and most Python upstreams), so we close first; aiohttp does not retry a POST that hit a
# connection the server closed at the same moment.
_KEEPALIVE_S = 4.0
_MAX_HEADER_BYTES = 65_536


def upstream_api_key(
    upstream: UpstreamSettings, client_headers: Mapping[str, str], auth_mode: str
) -> str | None:
    """The upstream key: from the upstream's environment variable; else, in ``passthrough``
    mode only, the client's own bearer. In ``keys`` mode the client's bearer is the proxy key and
    never goes upstream (settings require ``api_key_env`` there). A named variable left unset
    or empty refuses the request (``UpstreamKeyMissing``) on every kind: sent without a key, the
    provider's 401 would read as the client's own key refused, and litellm would find another."""
    if upstream.api_key_env:
        # stripped: a key mounted from a file or a k8s secret often ends with a newline
        key = os.environ.get(upstream.api_key_env, "").strip()
        if not key:
            raise key_missing(upstream)
        return key
    if auth_mode != "passthrough":
        return None
    auth = client_headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return None


@dataclass(frozen=True)
class _Target:
    """What one upstream's requests need, worked out once: parsed URLs, timeouts, proxy, TLS."""

    base: str
    timeout: aiohttp.ClientTimeout
    models_timeout: aiohttp.ClientTimeout
    proxy: URL | None
    proxy_auth: aiohttp.BasicAuth | None
    ssl: ssl.SSLContext | bool
    # per path (a handful, all ours: /chat/completions, /models, /responses, /v1/messages …)
    urls: dict[str, URL] = field(default_factory=dict)

    def url(self, path: str, query: str = "") -> URL:
        if query:  # the client's (Claude Code's ?beta=true), relayed as sent
            return URL(f"{self.base}{path}?{encoded_query(query)}", encoded=True)
        found = self.urls.get(path)
        if found is None:
            found = self.urls[path] = URL(f"{self.base}{path}")
        return found


class UpstreamClient:
    """``errors``: what redacts the upstreams' error answers before the client sees them
    (``ErrorRedactor.for_upstreams``: with the server-side keys; by default the key shapes only)."""

    def __init__(self, max_connections: int = 200, errors: ErrorRedactor | None = None) -> None:
        self.max_connections = max_connections
        self.errors = errors if errors is not None else ErrorRedactor()
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
                auto_decompress=True,  # relayed decoded: see transport.RELAYED_NAMES
                trust_env=False,  # env proxies: see _target (no per-request netrc/env reads)
                skip_auto_headers=_SKIP_AUTO_HEADERS,
                timeout=aiohttp.ClientTimeout(total=None),
                # upstreams and their gateways may send long headers (e.g. big cookies, traces)
                max_line_size=_MAX_HEADER_BYTES,
                max_field_size=_MAX_HEADER_BYTES,
            )
        return session

    def _target(self, upstream: UpstreamSettings) -> _Target:
        base = (upstream.base_url or DEFAULT_BASE_URLS.get(upstream.kind, "")).rstrip("/")
        key = (base, upstream.timeout_s, upstream.connect_timeout_s)
        target = self._targets.get(key)
        if target is None:
            url = URL(base)
            connect = upstream.connect_timeout_s
            proxy, proxy_auth = _env_proxy(url)
            target = self._targets[key] = _Target(
                base=base,
                # sock_connect: opening a connection; connect (aiohttp: waiting for a free pooled
                # connection, then opening one) as long as a read may take, so a full pool queues
                # requests instead of failing them; sock_read: the longest wait for the next bytes.
                timeout=aiohttp.ClientTimeout(
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
                ssl=self._tls_context() if url.scheme == "https" else True,
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
        raw: bytes | None = None,
    ) -> UpstreamResponse:
        """``raw``: the client's own bytes of ``body`` when nothing was changed, sent as they
        came (as Messages and Responses are) instead of serialising ``body`` again."""
        if upstream.kind != "openai":  # litellm, and chat completions to the native kinds
            from proxy.upstream.litellm import litellm_chat

            if upstream.kind in ("anthropic", "gemini"):
                upstream = upstream.model_copy(update={"provider": upstream.kind})
            errors = self.errors.with_credentials({}, passthrough_key, body)
            await litellm_ready()
            answered = await litellm_chat(upstream, body, passthrough_key)
            return errors.response(answered, gateway=upstream.server_credentials)
        headers = self._headers(upstream, client_headers, passthrough_key)
        data = raw if raw is not None else orjson.dumps(body)
        return await self.post(
            upstream, "/chat/completions", data, headers, bool(body.get("stream"))
        )

    def openai_headers(
        self, upstream: UpstreamSettings, client_headers: Mapping[str, str], key: str | None
    ) -> dict[str, str]:
        """What an OpenAI-compatible upstream is sent with ``key`` (``_headers``)."""
        return self._headers(upstream, client_headers, key)

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

    async def post(
        self,
        upstream: UpstreamSettings,
        path: str,
        data: bytes,
        headers: Mapping[str, str],
        stream: bool,
        query: str = "",
        relayed: frozenset[str] = RELAYED_NAMES,
        json_array: bool = False,
        passthrough: bool = False,
        asked: bool = True,
    ) -> UpstreamResponse:
        """POST ``data`` as is to ``{base_url}{path}`` with exactly ``headers``; with ``stream``,
        an event stream comes back piece by piece (``passthrough``: any success answer). Response
        headers: ``relayed`` names and the rate-limit/request-id prefixes
        (``transport.relay_headers``). An error answer, and the error events of a stream, come
        back redacted (``self.errors``). ``json_array``: a stream that is one JSON array
        (Gemini's without ``alt=sse``), relayed element by element. ``asked``: whether the
        client asked for a stream (``transport.answer``)."""
        target = self._target(upstream)
        try:
            response = await self._client().request(
                "POST",
                target.url(path, query),
                data=data,
                headers=headers,
                timeout=target.timeout,
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
        except CONNECTION_ERRORS as exc:
            if undecodable(exc):
                raise undecodable_answer(upstream.name) from None
            raise unreachable(upstream.name, "could not be reached", exc) from None
        relayed_answer = await answer(
            response, upstream.name, stream, relayed, json_array, passthrough, asked
        )
        # what the request said: its body, and its path's model name and query
        errors = self.errors.with_credentials(headers, None, (data, f"{path}?{query}"))
        return errors.response(relayed_answer, gateway=upstream.server_credentials)

    async def models(
        self,
        upstream: UpstreamSettings,
        key: str | None,
        path: str = "/models",
        headers: Mapping[str, str] | None = None,
        query: str = "",
    ) -> tuple[int, bytes]:
        """GET the upstream's model list through the same pooled session as chat (so no cookie
        jar carrying one client's upstream cookies to the next); every wait bounded by the
        upstream's connect timeout. An error answer's body comes back redacted. ``headers``: all
        that is sent (Anthropic's own), else OpenAI's with ``key``."""
        target = self._target(upstream)
        try:
            response = await self._client().request(
                "GET",
                target.url(path, query),
                headers=dict(headers) if headers is not None else self._headers(upstream, {}, key),
                timeout=target.models_timeout,
                allow_redirects=False,
                proxy=target.proxy,
                proxy_auth=target.proxy_auth,
                ssl=target.ssl,
            )
            if not (200 <= response.status < 300 or 400 <= response.status < 600):
                response.close()  # a redirect (not followed: it carries the key): no list
                raise UpstreamFailed(
                    f"Upstream {upstream.name} answered HTTP {response.status}, which is not "
                    "relayed."
                )
            error = response.status >= 400
            whole = False
            try:
                limit = MAX_ERROR_ANSWER_BYTES if error else MAX_MODEL_LIST_BYTES
                content, whole = await read_bounded(response, limit)
            finally:
                if whole:
                    response.release()
                else:  # unread past the bound (or broken off): closed, not pooled
                    response.close()
        except (TimeoutError, *CONNECTION_ERRORS) as exc:
            raise unreachable(upstream.name, "could not be reached", exc) from None
        if error:
            sent = headers if headers is not None else self._headers(upstream, {}, key)
            content = self.errors.with_credentials(sent, key, f"{path}?{query}").body(content)
        elif not whole:
            raise UpstreamFailed(
                f"Upstream {upstream.name}'s model list is larger than "
                f"{MAX_MODEL_LIST_BYTES >> 20} MiB, which is not read."
            )
        return response.status, content
