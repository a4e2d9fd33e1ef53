"""Whose request the cross-request memos serve now. The memos are keyed by content (a text's
token count, a message's lowering, a tool output's parse); shared by every principal, a hit on
another tenant's text answers faster than a miss, so a tenant could time a guess of another's
exact content. Each memo keys its entries by this scope too: a principal's hits are on what it
sent itself. The server sets it per request (each request is its own task, with its own copy of
the context; the offload worker runs in a copy of the caller's); outside a request it is ""."""

from __future__ import annotations

from contextvars import ContextVar

_SCOPE: ContextVar[str] = ContextVar("ctxproxy_memo_scope", default="")

# the bound method: one C call on the memos' hot paths
memo_scope = _SCOPE.get


def enter_scope(principal: str) -> None:
    """The current request's memos are ``principal``'s, for the rest of its task."""
    _SCOPE.set(principal)
