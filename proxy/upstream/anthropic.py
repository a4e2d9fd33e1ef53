"""Anthropic Messages (``POST /v1/messages``, ``/v1/messages/count_tokens``) to an upstream.

``kind: anthropic``: relayed natively on the pooled session of ``openai.UpstreamClient``: the
body's bytes as the handler hands them over, the client's ``beta`` query parameter (Claude
Code's ``?beta=true``; no other: a parameter is the upstream's to read, not a client's to steer),
every client header but the hop-by-hop ones, ours, and those a gateway upstream would read as
where the request came from or what it asks (``Forwarded``, ``X-Forwarded-*``, method
overrides), and the answer's bytes (SSE as it arrives).
Anthropic's beta features live in ``anthropic-beta`` and the body relies on them (role "system"
messages, ``context_management``, adaptive thinking), so that header passes whole.

Any other kind: through litellm (``proxy.upstream.bridge``), which answers in Anthropic's shape."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode

from proxy.providers import litellm_ready
from proxy.relayed_headers import relayed_headers, sent_with_server_key
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.key_missing import key_missing
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.thinking_signatures import verifiable
from proxy.upstream.transport import ANTHROPIC_RELAYED_NAMES

log = logging.getLogger("ctxproxy.upstream")

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
_RELAYED_PARAMS = frozenset({"beta"})  # the query parameters the Messages API reads


async def messages(
    client: UpstreamClient,
    upstream: UpstreamSettings,
    body: bytes,
    client_headers: Mapping[str, str],
    query: str,
    key: str | None,
    path: str = MESSAGES_PATH,
    asked: bool = True,
) -> UpstreamResponse:
    """Send a Messages request (``path``: ``MESSAGES_PATH`` or ``COUNT_TOKENS_PATH``) to
    ``upstream``. ``client_headers``: names lower-cased, repeated headers joined with ", ".
    ``key``: ``openai.upstream_api_key(…)``; with ``api_key_env`` set it is the only credential
    sent (as ``x-api-key``: none of the client's credential headers goes, ``api-key`` and
    ``x-goog-api-key`` included, which in keys mode hold the proxy key); without, the client's
    headers go as sent (settings require ``api_key_env`` in ``auth.mode: keys``). Raises
    ``ProxyError``s; an upstream's error status comes back as an answer, its body as the
    upstream wrote it but redacted (``UpstreamClient.errors``), as are a stream's error events.
    ``asked``: whether the request asked for a stream (``transport.answer``); a token count
    never streams, its answer is read whole."""
    if upstream.kind != "anthropic":
        from proxy.upstream.bridge import bridged_messages

        errors = client.errors.with_credentials(client_headers, key, body)
        await litellm_ready()
        answered = await bridged_messages(upstream, body, client_headers, key, path)
        return errors.response(answered, gateway=upstream.server_credentials)
    headers = anthropic_headers(upstream, client_headers, key)
    body = verifiable(body)  # no thinking another provider signed, or none did: a 400 each
    return await client.post(
        upstream, path, body, headers, stream=path != COUNT_TOKENS_PATH,
        query=relayed_query(query), relayed=ANTHROPIC_RELAYED_NAMES, asked=asked,
    )  # fmt: skip


def relayed_query(query: str) -> str:
    """The client's query string with only ``_RELAYED_PARAMS``, encoded anew."""
    if not query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, v) for k, v in pairs if k in _RELAYED_PARAMS])


def anthropic_headers(
    upstream: UpstreamSettings, client_headers: Mapping[str, str], key: str | None
) -> dict[str, str]:
    """The client's headers the relay sends (``proxy.relayed_headers``); the key as ``messages``
    says; then config's ``headers``, which win."""
    server_key = bool(upstream.api_key_env)
    headers = {"content-type": "application/json"}
    for name, value in relayed_headers(client_headers):
        if server_key and not sent_with_server_key(name):
            continue  # a key, an account, a gateway's credential, cache key or route
        if not value.isascii():  # read as Latin-1, sent as UTF-8: the client's bytes again
            try:
                value = value.encode("latin-1").decode("utf-8")
            except UnicodeError:
                continue  # not text in either: not sent
        headers[name] = value
    headers["accept-encoding"] = "identity"
    headers.update(upstream.headers)
    if server_key:
        if not key:
            raise key_missing(upstream)
        headers["x-api-key"] = key
    return headers
