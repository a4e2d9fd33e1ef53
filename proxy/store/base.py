"""The store interface the proxy talks to, implemented by SQLite (``proxy.store.sqlite``, the
embedded default for a sidecar) and PostgreSQL (``proxy.store.postgres``, one database shared by
the replicas of a gateway); ``proxy.store.factory`` picks one at start-up.

A session's load → pipeline → save is one critical section, entered with ``store.session(id)``:
the store serialises it in the process (SQLite) or across processes (PostgreSQL: an advisory lock
keyed by the session, released once the save has committed), and its state cache never serves a
state another replica has replaced since."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from rules.base import Ancestor, SessionState

if TYPE_CHECKING:
    from proxy.store.cache_feedback import CacheFeedback, FeedbackStore
    from proxy.store.dialect import Dialect
    from proxy.store.lull import Lull

MAX_ANCESTOR_DEPTH = 3


async def walk_ancestors(
    parent_id: str | None,
    depth: int,
    lookup: Callable[[str], Awaitable[tuple[SessionState, str | None]]],
) -> list[Ancestor]:
    """Up to ``depth`` ancestor sessions, nearest first, stopping at cycles: each one's (state,
    parent) as ``lookup`` reads it."""
    out: list[Ancestor] = []
    seen: set[str] = set()
    current = parent_id
    while current and len(out) < depth and current not in seen:
        seen.add(current)
        state, next_parent = await lookup(current)
        out.append(Ancestor(current, state, len(out) + 1))
        current = next_parent
    return out


class SessionHandle(Protocol):
    """A session held for one request: its state as loaded, and where the new one goes."""

    state: SessionState
    parent_id: str | None

    async def ancestors(self, parent_id: str | None) -> list[Ancestor]:
        """Up to 3 ancestor sessions of ``parent_id``, nearest first, as stored now."""
        ...

    async def save(self, state: SessionState, parent_id: str | None) -> None:
        """The session's new state (already redacted); written before the session is let go."""
        ...


class Store(Protocol):
    # read-only members: an implementation may hold each as an attribute or a property
    @property
    def kind(self) -> str:
        """Either "sqlite" or "postgresql"."""
        ...

    @property
    def write_errors(self) -> int:
        """Rows the database refused (or that could not be encoded)."""
        ...

    @property
    def rows_dropped(self) -> int:
        """Rows dropped unwritten: the buffer was full while the database was away."""
        ...

    @property
    def backlog(self) -> int:
        """Writes queued, not in the database yet."""
        ...

    @property
    def dialect(self) -> Dialect: ...
    @property
    def cache_feedback(self) -> FeedbackStore: ...
    @property
    def lull(self) -> Lull:
        """The requests in flight, as the app's observers hear them: the writer's steps wait
        for none to be (``proxy.store.lull``)."""
        ...

    @property
    def applied(self) -> list[str]:
        """Migrations applied by ``open``."""
        ...

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    def describe(self) -> str:
        """Where the data is, for the start-up line (never a password)."""
        ...

    # sessions
    def session(
        self, session_id: str, slot: AbstractAsyncContextManager[None] | None = None
    ) -> AbstractAsyncContextManager[SessionHandle]:
        """``slot``: one of the principal's holds of a shared resource (``hold_slots``), taken
        once this process's other requests of the session are done, and kept while it is
        held: a request queued behind its own session's takes none of them meanwhile."""
        ...
    def known_state(self, session_id: str) -> tuple[SessionState, CacheFeedback | None] | None:
        """For a store whose hold costs a round trip: the state (and cache report) this process
        last held for a session with no parent, which is likely still the stored one, for the
        engine to run the pipeline on while the hold is under way (``session`` then returns that
        very state object if it is still current). None: nothing worth running ahead on."""
        ...

    async def load_state(self, session_id: str) -> tuple[SessionState, str | None]:
        """A snapshot of a session's (state, parent id), without holding it."""
        ...

    async def ancestors(
        self, parent_id: str | None, depth: int = MAX_ANCESTOR_DEPTH
    ) -> list[Ancestor]: ...

    # the request log: queued, written by the store's writer task
    async def insert_request(self, row: dict[str, Any]) -> None: ...
    async def finish_request(self, request_id: str, fields: dict[str, Any]) -> None: ...
    def write_later(
        self, sql: str, params: tuple[Any, ...], key: str | None = None, order: float = 0.0
    ) -> None: ...
    async def flush(self) -> None: ...

    # reads (indexed, LIMITed)
    async def fetchrow(self, sql: str, params: tuple[Any, ...]) -> Any: ...
    async def fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]: ...
    async def get_request(self, request_id: str) -> dict[str, Any] | None: ...
    async def list_requests(
        self,
        session: str | None = None,
        model: str | None = None,
        status: int | None = None,
        limit: int = 50,
        after_created: float | None = None,
        principal: str | None = None,
        bodies: bool = True,
    ) -> list[dict[str, Any]]:
        """Newest first; each filter given narrows (``principal``: a principal's name)."""
        ...

    async def list_sessions(self, limit: int = 100) -> list[dict[str, Any]]:
        """The latest sessions with their totals and principal."""
        ...

    async def recent_sessions(
        self, scan: int, limit: int, principal: str | None = None
    ) -> list[dict[str, Any]]:
        """Sessions seen in the latest ``scan`` requests (of ``principal`` when given), with
        their totals and principal."""
        ...

    # data lifecycle (proxy.store.retention)
    async def prune(self, older_than: float, idle_before: float) -> dict[str, int]: ...
    async def ping(self) -> bool: ...


def masked(url: str) -> str:
    """A database URL fit to print: its password replaced."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
