"""A body naming a member twice, where the upstream is called with the server's key.

The proxy reads a body as orjson does, the last of a repeated member winning, and checks what it
read (the model it routes, a ``previous_response_id``, a container, a file), but an unchanged
body goes upstream as the client's bytes. A parser there (a gateway in front of the provider)
that keeps the first would act on a value nobody checked: ``{"previous_response_id":
"resp_theirs", "previous_response_id": null}``. With the server's key that is another tenant's
state, so such a body is refused (400), as a strict JSON parser would. With the client's own key
the provider keeps each key's state apart, and the body goes as sent.

Finding a repeat means reading the body again with the standard parser, which reports every
object's members (several times orjson's time): that is done only when the bytes could hold one.
A member the checks read is named by its quoted name in the bytes (once, when it is not
repeated), unless an escape spells it (orjson reads ``"mod\\u0065l"`` as ``model``), and JSON
writers escape no ASCII letter, digit or ``_``: a body with neither a checked name twice (nor a
member read beside a ``type`` at all) nor such an escape repeats none of them. One that may is
read again, off the event loop when large (``offload``), and refused for any repeated member
anywhere, the first named in the error."""

from __future__ import annotations

import json
import re
from typing import Any

from proxy.errors import BadRequest
from proxy.rewrite.offload import Offload
from proxy.server.provider_refs import shared_key

# the members the proxy's checks and routing read: a body naming one of these once repeats it
# nowhere (``provider_refs``, ``response_ids``, the model)
COUNTED = (
    b'"model"', b'"previous_response_id"', b'"conversation"', b'"tools"', b'"cachedContent"',
    b'"cached_content"', b'"generateContentRequest"',
)  # fmt: skip
# those read only beside a ``type`` (a file source, a code interpreter's container, a file
# search's stores: ``provider_files``): a repeated ``type`` could hide them, so a body naming
# one at all is read again
PRESENT = (b'"container"', b'"file_id"', b'"file_ids"', b'"vector_store_ids"')
# an escape of an ASCII letter, digit or ``_`` (JSON writers escape none: a spelled-out name)
_NAME_ESCAPE = re.compile(rb"\\u00(?:3[0-9]|4[1-9a-fA-F]|5[0-9aAfF]|6[1-9a-fA-F]|7[0-9aA])")


class _Repeated(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def may_repeat(raw: bytes) -> bool:
    """Whether ``raw`` may name a checked member twice (cheap: counts and one search)."""
    if any(raw.count(name) > 1 for name in COUNTED) or any(name in raw for name in PRESENT):
        return True
    return _NAME_ESCAPE.search(raw) is not None


def repeated_member(raw: bytes) -> str | None:
    """The first member any object of ``raw`` names twice, or None."""

    def pairs(members: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(members)
        if len(out) != len(members):
            seen: set[str] = set()
            for name, _ in members:
                if name in seen:
                    raise _Repeated(name)
                seen.add(name)
        return out

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except _Repeated as found:
        return found.name
    except (ValueError, RecursionError):
        return None  # orjson read it: what the standard parser refuses is no repeat found
    return None


def refuse(name: str) -> BadRequest:
    shown = name if len(name) <= 80 else name[:79] + "…"
    return BadRequest(
        f"The body names the member '{shown}' twice in one object: send each member once.",
        code="duplicate_member",
    )


async def require_once(raw: bytes, upstream: Any, offload: Offload) -> None:
    """Refuse ``raw`` (400) when it repeats a member and ``upstream`` is called with the
    server's key."""
    if not shared_key(upstream) or not may_repeat(raw):
        return
    name = await offload.maybe(offload.heavy(len(raw)), repeated_member, raw)
    if name is not None:
        raise refuse(name)
