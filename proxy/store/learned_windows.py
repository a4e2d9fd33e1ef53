"""Windows learned from upstreams' "prompt too long" errors (``proxy.server.rescue``), kept in
the store: after a restart, or on a replica starting next to one that learned them, the proxy
compacts to the real window at once instead of meeting the error again. Written through the
store's writer task (off the request's path). A learned window is kept ``KEEP_DAYS``: a provider
may raise a model's window, and the upstream says so again if it has not. What is stored is the
window the upstream stated (``Engine.learn_window``), for the principal whose request it answered
(the answer may quote that request's text); the engine raises a row below its floor when it loads
it (``Engine.recall_windows``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rules.redact import redact_text

if TYPE_CHECKING:
    from proxy.store.base import Store

KEEP_DAYS = 7.0
KEEP_S = KEEP_DAYS * 86_400
MAX_LOADED = 1024  # as many as the engine keeps in memory (``LearnedWindows``)


async def load(store: Store, now: float) -> list[tuple[str, str, str, int]]:
    """(principal, upstream, model, window) of the newest ``MAX_LOADED`` windows learned in the
    last ``KEEP_DAYS``, oldest first; older ones are deleted (in the writer's next batch)."""
    since = now - KEEP_S
    rows = await store.fetchall(store.dialect.learned_windows_select, (since, MAX_LOADED))
    store.write_later(store.dialect.learned_windows_expire, (since,))
    return [(str(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]


def save(store: Store, principal: str, upstream: str, model: str, window: int, now: float) -> None:
    """Keep ``window`` for (principal, upstream, model), or the smaller one stored while it is
    fresh. The model's name is stored redacted, as the request log has it (a key sent as the
    model)."""
    row = (principal, upstream, redact_text(model), window, now)
    store.write_later(store.dialect.learned_window_upsert(KEEP_S), row)
