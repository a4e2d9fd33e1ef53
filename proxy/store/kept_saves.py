"""Session saves the SQLite store keeps in memory apart from its writer's queue: those the full
queue did not take (held, queued again once there is room) and those whose batch the database
did not take (kept until a later save of the session is written). Each is the session's latest,
also in the store's unwritten saves, which ``load_state`` reads once the state cache let the
session go. Bounded: past ``bound`` sessions the principal holding most loses its oldest
(``proxy.fair_lru``), so one tenant's many sessions saved while the database is locked or
failing do not push out another tenant's save."""

from __future__ import annotations

from collections.abc import Callable

from proxy.fair_lru import FairLRU
from proxy.principals import split_scoped
from proxy.store.batch import SaveState


class KeptSaves:
    """session id -> its save kept, oldest first; ``unwritten``: the store's unwritten saves
    (each save kept is there too, until let go); ``lost``: told of each one the bound let go."""

    def __init__(
        self,
        bound: int,
        unwritten: dict[str, SaveState],
        lost: Callable[[], None] | None = None,
    ) -> None:
        self._unwritten = unwritten
        self._lost = lost
        self._saves: FairLRU[str, SaveState] = FairLRU(bound, on_evict=self._evicted)

    def __len__(self) -> int:
        return len(self._saves)

    def keep(self, save: SaveState) -> None:
        """Keep ``save`` (the newest kept), in place of one its session had kept."""
        session_id = save.session_id
        self._saves.pop(session_id)
        self._unwritten[session_id] = save
        self._saves.put(session_id, save, split_scoped(session_id)[0])

    def drop(self, session_id: str) -> None:
        """Keep the session's save no longer (a later one is queued or written)."""
        self._saves.pop(session_id)

    def oldest(self) -> SaveState | None:
        """The save kept longest, no longer kept; None when none is."""
        session_id = self._saves.first()
        return None if session_id is None else self._saves.pop(session_id)

    def _evicted(self, session_id: str, save: SaveState) -> None:
        if self._unwritten.get(session_id) is save:
            del self._unwritten[session_id]
        if self._lost is not None:
            self._lost()
