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
