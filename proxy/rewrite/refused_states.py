"""States saved by refused requests that could not be put back: a later request of the session
had saved since (it ran on the refused one's state). Should that later request be refused too,
what it ran on is the refused state, and the state before that one goes back instead
(``Engine.take_back``), so the next request runs as if neither had been sent.

One entry a session (its latest such refusal), ``MAX_SESSIONS`` sessions, the oldest let go
first: a miss only leaves the refused state standing, as a lone take_back would."""

from __future__ import annotations

from collections import OrderedDict

from rules.base import SessionState

MAX_SESSIONS = 64  # each holds two states: rare (concurrent refusals), kept few


def _same(a: SessionState, b: SessionState) -> bool:
    return a is b or a.data == b.data


class RefusedStates:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        # scoped session id -> (the state a refused request saved, the state it ran on)
        self._standing: OrderedDict[str, tuple[SessionState, SessionState]] = OrderedDict()

    def note(self, session_id: str, saved: SessionState, before: SessionState) -> None:
        """A refused request's ``saved`` state left standing (a later save on top of it)."""
        self._standing[session_id] = (saved, before)
        self._standing.move_to_end(session_id)
        while len(self._standing) > self.max_sessions:
            self._standing.popitem(last=False)

    def before(self, session_id: str, state: SessionState) -> SessionState:
        """``state``, or the state before it where a refused request saved it."""
        entry = self._standing.get(session_id)
        if entry is None or not _same(entry[0], state):
            return state
        del self._standing[session_id]
        return entry[1]
