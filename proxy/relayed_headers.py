"""Which of a client's headers the native Messages relay sends upstream: all but the hop-by-hop
ones, the framing and encoding (ours to set), the proxy's own, and those a gateway in front of the
provider would trust as the request's origin or verb. One list, read by the relay
(``proxy.upstream.anthropic``) and by the principal (``proxy.principals.credentials``): a header
the upstream never sees authenticates nothing, so it never names a tenant."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

# Never forwarded: hop-by-hop (RFC 9110 7.6.1), framing and encoding (ours to set: we read the
# SSE for usage, so the answer must come uncompressed), and the proxy's own headers.
NOT_FORWARDED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",  # ``100-continue``: uvicorn answered it; aiohttp would wait, unbounded, for one
        "host",
        "content-length",
        "content-encoding",  # the body goes decoded (``proxy.server.body_encoding``)
        "accept-encoding",
        "x-session-id",
        "x-parent-session-id",
        "cookie",  # the proxy's /ui session cookie is not the provider's
        # what a gateway in front of the provider would trust as the request's origin or verb
        "forwarded",
        "x-real-ip",
        "x-client-ip",
        "true-client-ip",
        "x-original-url",
        "x-rewrite-url",
        "x-original-host",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    }
)
_NOT_FORWARDED_PREFIXES = ("x-ctxproxy-", "x-forwarded-")
# What picks the account a request bills or the organization it runs under: a client's own,
# never sent with the server's key (a tenant would bill, or act in, another account of the
# gateway's key)
ACCOUNT_HEADERS = frozenset(
    {"openai-organization", "openai-project", "x-goog-user-project", "anthropic-organization-id"}
)
# Those, and an idempotency key: beside the one server key, a tenant's would meet another's at
# the provider (the other's request answered with its stored result, or refused as a replay)
NOT_WITH_SERVER_KEY = ACCOUNT_HEADERS | {"idempotency-key"}


# With the server's key, only what steers the request within the provider's own API goes: its
# version and betas, the SDK's and the agent's descriptive headers, tracing. A gateway in front
# of the provider reads its own credential, virtual key, config, cache key and routing headers
# (`cf-aig-*`, `x-portkey-*`, `helicone-*`, `x-litellm-api-key`, `x-envoy-*`): a tenant setting
# those beside the gateway's key chose its account, target or a cache entry other tenants read.
_WITH_SERVER_KEY = frozenset(
    {
        "anthropic-version",
        "anthropic-beta",
        "anthropic-dangerous-direct-browser-access",
        "accept",
        "content-type",
        "user-agent",
        "x-app",
        "x-claude-code-session-id",
        "traceparent",
        "tracestate",
    }
)
_WITH_SERVER_KEY_PREFIXES = ("x-stainless-",)


def sent_with_server_key(name: str) -> bool:
    """Whether a client's header (name lower-cased) goes beside the server's key."""
    return name in _WITH_SERVER_KEY or name.startswith(_WITH_SERVER_KEY_PREFIXES)


def relayed_headers(client_headers: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """(name, value) of each client header the relay sends (names lower-cased), before the
    upstream's own rules (a server key replaces the client's credential headers)."""
    # the names ``Connection`` lists are this hop's too (RFC 9110, 7.6.1)
    connection = client_headers.get("connection", "")
    hop = {n.strip().lower() for n in connection.split(",")} if connection else ()
    for name, value in client_headers.items():
        if name in NOT_FORWARDED or name in hop or name.startswith(_NOT_FORWARDED_PREFIXES):
            continue
        yield name, value
