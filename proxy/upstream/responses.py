"""OpenAI Responses (``POST /v1/responses``) to an upstream.

``kind: openai``: relayed natively to ``{base_url}/responses`` on the pooled session of
``openai.UpstreamClient``, authorised as chat completions are (``upstream_api_key``), with Codex's
session headers passed on besides chat's (``session-id``/``thread-id``/``x-client-request-id``
name the conversation; ``originator``, ``version`` and ``x-codex-*`` say who sends it and which
features it expects). Any other kind: through litellm (``proxy.upstream.bridge``), which answers
in the Responses shape."""

from __future__ import annotations

from collections.abc import Mapping

from proxy.call_id_rules import call_id_rule
from proxy.providers import litellm_ready
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.openai import _ACCOUNT_HEADERS, _FORWARDED_HEADERS, UpstreamClient
from proxy.upstream.reasoning_items import resolvable

RESPONSES_PATH = "/responses"
_CODEX_HEADERS = frozenset(
    {"session-id", "thread-id", "x-client-request-id", "originator", "version"}
)
_FORWARDED = _CODEX_HEADERS | frozenset(_FORWARDED_HEADERS)


async def responses(
    client: UpstreamClient,
    upstream: UpstreamSettings,
    body: bytes,
    client_headers: Mapping[str, str],
    key: str | None,
    asked: bool = True,
) -> UpstreamResponse:
    """Send a Responses request to ``upstream``: ``body`` as is; ``client_headers`` with names
    lower-cased; ``key`` from ``openai.upstream_api_key``; ``asked``: whether the request asked
    for a stream (``transport.answer``). Raises ``ProxyError``s; an upstream's error status comes
    back as an answer, its body as the upstream wrote it but redacted (``UpstreamClient.errors``),
    as are a stream's error events."""
    if upstream.kind != "openai":
        from proxy.upstream.bridge import bridged_responses

        errors = client.errors.with_credentials({}, key, body)
        await litellm_ready()
        answered = await bridged_responses(upstream, body, key)
        return errors.response(answered, gateway=upstream.server_credentials)
    headers = responses_headers(upstream, client_headers, key)
    if call_id_rule(upstream, "responses") == "openai_responses":  # OpenAI's own API (or Azure's,
        body = resolvable(body)  # or one set to its rules): no reasoning it would answer 404 to
    return await client.post(upstream, RESPONSES_PATH, body, headers, stream=True, asked=asked)


def responses_headers(
    upstream: UpstreamSettings, client_headers: Mapping[str, str], key: str | None
) -> dict[str, str]:
    """Ours, the client's forwarded ones, config's, then the key (as for chat completions)."""
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    server_key = bool(upstream.api_key_env)
    for name, value in client_headers.items():
        forwarded = name in _FORWARDED or name.startswith("x-codex-")
        if forwarded and not (server_key and name in _ACCOUNT_HEADERS):
            headers[name] = value
    headers.update(upstream.headers)
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers
