"""Gemini ``generateContent`` (``:generateContent``, ``:streamGenerateContent``,
``:countTokens``, and the model list) to an upstream.

``kind: gemini``: relayed natively on the pooled session of ``openai.UpstreamClient`` to
``{base_url}/{version}/models/{model}:{method}``: the body's bytes as the handler hands them
over, ``alt`` as the client asked (``alt=sse``: an event stream relayed as it arrives; without
it, Google's JSON-array stream, relayed element by element: ``json_array_stream``), the SDK's
identifying headers, and the key as ``x-goog-api-key``: config's (``api_key_env``) or, in
passthrough, the client's (``x-goog-api-key``, or a ``?key=`` query parameter, which is never
put in the upstream URL).
Any other kind: through litellm (``proxy.upstream.gemini_bridge``)."""

from __future__ import annotations

from collections.abc import Mapping

from proxy.providers import litellm_ready
from proxy.relayed_headers import NOT_WITH_SERVER_KEY
from proxy.settings import UpstreamSettings
from proxy.upstream import UpstreamResponse
from proxy.upstream.gemini_route import Route, system_parameters, upstream_query
from proxy.upstream.key_text import require_header_text
from proxy.upstream.openai import UpstreamClient
from proxy.upstream.transport import RELAYED_NAMES, REQUEST_CONTEXT_HEADERS

# The client's headers the upstream sees: who is calling (Google's SDKs name themselves in
# ``x-goog-api-client``), the request's context (every protocol's), the deadline google-genai
# asks the server to keep (``x-server-timeout``, seconds), and the user project a key may bill
# (the client's key only).
_FORWARDED = frozenset(
    {"user-agent", "x-goog-api-client", "x-server-timeout", *REQUEST_CONTEXT_HEADERS}
)
_ACCOUNT = frozenset({"x-goog-user-project"})
# Google names its request id and its server timing in these
GEMINI_RELAYED_NAMES = RELAYED_NAMES | {"x-goog-request-id", "server-timing"}


def client_key(headers: Mapping[str, str], query: str) -> str | None:
    """The client's Gemini key: ``x-goog-api-key``, else ``?key=`` (or ``$key``), else a bearer
    token. Raises ``Unauthorized`` for a ``?key=`` no header can carry (it goes upstream as
    one)."""
    key = headers.get("x-goog-api-key", "").strip()
    if key:
        return key
    for value in system_parameters(query, "key"):
        if value.strip():
            require_header_text(value.strip())
            return value.strip()
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return None


def gemini_headers(
    upstream: UpstreamSettings, client_headers: Mapping[str, str], key: str | None
) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept-encoding": "identity"}
    server_key = bool(upstream.api_key_env)
    for name, value in client_headers.items():
        if server_key and name in NOT_WITH_SERVER_KEY:
            continue
        if name in _FORWARDED or name in _ACCOUNT:
            headers[name] = value
    headers.update(upstream.headers)
    if key:
        headers["x-goog-api-key"] = key
    return headers


async def generate(
    client: UpstreamClient,
    upstream: UpstreamSettings,
    route: Route,
    body: bytes,
    client_headers: Mapping[str, str],
    query: str,
    key: str | None,
) -> UpstreamResponse:
    """Send one Gemini model call to ``upstream``. Raises ``ProxyError``s; an upstream's error
    status comes back as an answer, its body redacted (``UpstreamClient.errors``)."""
    if upstream.kind != "gemini":
        from proxy.upstream.gemini_bridge import bridged_gemini

        errors = client.errors.with_credentials({}, key, (body, route.path, query))
        await litellm_ready()
        answered = await bridged_gemini(upstream, route, body, query, key)
        return errors.response(answered, gateway=upstream.server_credentials)
    headers = gemini_headers(upstream, client_headers, key)
    sent_query = upstream_query(query)
    return await client.post(
        upstream,
        route.path,
        body,
        headers,
        stream=route.stream,
        query=sent_query,
        relayed=GEMINI_RELAYED_NAMES,
        # Google's JSON-array stream, unless events were asked for (``alt=sse``): then an
        # answer labelled as text is read as the event stream it is (``mislabelled_stream``)
        json_array=route.stream and sent_query != "alt=sse",
    )
