"""A client's key must be text an HTTP header can carry before litellm is given it: its HTTP
client encodes header values as ASCII and fails on anything else, which reached the client as a
502 naming the upstream. A key pasted with a no-break or zero-width space (copied from a web page
or a chat) is the usual case: the client is told, with 401, and nothing is sent. The native relays
send the client's bytes as they came, and the provider answers for them; a control character, which
a percent-decoded ``?key=`` can hold and no header can carry, is refused on every path."""

from __future__ import annotations

import re

from proxy.errors import Unauthorized

# What no HTTP header value may hold (RFC 9110: control characters, tab aside)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def require_sendable(key: str) -> None:
    """Raises ``Unauthorized`` for a key holding a character past ASCII."""
    if not key.isascii():
        raise Unauthorized(
            "The API key holds a character an HTTP header cannot carry (past ASCII: a no-break "
            "or zero-width space pasted with it?): check the key."
        )


def require_header_text(key: str) -> None:
    """Raises ``Unauthorized`` for a key holding a control character (CR, LF, NUL …). A header
    cannot carry one, but a percent-decoded ``?key=`` can: moved into the upstream's header, it
    made the HTTP client raise (a 500, or a 502 naming the upstream)."""
    if _CONTROL.search(key) is not None:
        raise Unauthorized(
            "The API key holds a control character an HTTP header cannot carry: check the key."
        )
