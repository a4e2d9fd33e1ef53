"""Whose requests the inspection views show: the principal of a logged session, and a session
filter given as the client's own name plus a principal (``logs --session NAME --principal P``,
``/ui?session=NAME&principal=P``). The admin sees every principal; this only names them."""

from __future__ import annotations

from proxy.principals import LEGACY, SEPARATOR, scoped, split_scoped


def session_filter(session: str | None, principal: str | None) -> str | None:
    """The scoped session id to filter on: ``session`` as logged (``principal/name``); with a
    ``principal``, a name not already scoped under it is the client's own name (which may hold
    a '/' itself), scoped as ``principal/name``."""
    if not session:
        return None
    if principal and not session.startswith(principal + SEPARATOR):
        return scoped(principal, session)
    return session


def session_parts(session_id: str, principal: str | None = None) -> tuple[str, str]:
    """(principal, the client's own session name) of a logged session id. The row's principal
    column wins where it is known: a row written without one (``legacy``) may hold an unscoped
    id, and a legacy client's name may itself hold a '/'."""
    if principal and session_id.startswith(principal + SEPARATOR):
        return principal, session_id[len(principal) + len(SEPARATOR) :]
    if principal == LEGACY or SEPARATOR not in session_id:
        return principal or LEGACY, session_id
    return split_scoped(session_id)
