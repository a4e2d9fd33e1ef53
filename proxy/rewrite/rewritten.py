"""What ``Engine.rewrite`` gives back: the body to forward, its report, and the session it was
kept under (scoped to the principal, ``proxy.principals``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.attribution.ledger import Pending
from proxy.principals import split_scoped
from rules.base import SessionState
from rules.report import Report


@dataclass
class Saved:
    """What a request's save replaced: the state it ran on (``before``) and, once saved, the
    state saved; a request the upstream refused puts ``before`` back (``Engine.take_back``)."""

    before: SessionState
    state: SessionState | None = None


@dataclass(frozen=True)
class Rewritten:
    body: dict[str, Any]  # what will be forwarded (a new dict; the client's body is untouched)
    report: Report
    session_id: str  # scoped: ``principal/name`` (``proxy.principals``), as stored and logged
    parent_session_id: str | None  # scoped too
    protocol: str = "chat"
    data: bytes | None = None  # ``body``'s bytes, where the adapter had them (else written)
    model: str | None = None  # the model, where the body does not name it (Gemini's path)
    cache: Pending | None = None  # against the session's previous request, for its cache line
    saved: Saved | None = None  # the session's state before and after this request's save

    def with_cache(self, cache: Pending) -> Rewritten:
        """A copy with its ``cache`` set: ``dataclasses.replace`` without its generic pass over
        the fields and ``__init__`` (~6 µs of a request's CPU); nothing here derives a field."""
        new = object.__new__(Rewritten)
        new.__dict__.update(self.__dict__)
        new.__dict__["cache"] = cache
        return new

    @property
    def principal(self) -> str:
        return split_scoped(self.session_id)[0]

    @property
    def client_session(self) -> str:
        """The session's name as the client knows it (unscoped)."""
        return split_scoped(self.session_id)[1]

    @property
    def client_parent(self) -> str | None:
        return split_scoped(self.parent_session_id)[1] if self.parent_session_id else None
