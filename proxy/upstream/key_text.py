"""A client's key must be text an HTTP header can carry before litellm is given it: its HTTP
client encodes header values as ASCII and fails on anything else, which reached the client as a
502 naming the upstream. A key pasted with a no-break or zero-width space (copied from a web page
or a chat) is the usual case: the client is told, with 401, and nothing is sent. The native relays
send the client's bytes as they came, and the provider answers for them."""

from __future__ import annotations

from proxy.errors import Unauthorized


def require_sendable(key: str) -> None:
    """Raises ``Unauthorized`` for a key holding a character past ASCII."""
    if not key.isascii():
        raise Unauthorized(
            "The API key holds a character an HTTP header cannot carry (past ASCII: a no-break "
            "or zero-width space pasted with it?): check the key."
        )
