"""Each session's per-object memos, kept across its requests: message hashes, token counts, the
validator's checks, section sizes and exit codes, by object identity (``Context.hashes``,
``Context.table``, ``RequestTokens``' tables), and ``Context.derived``'s values with the list
each came from.

An agent's next request holds the same message objects as its last one: the body memory hands
back the parsed messages a request shares with the previous one, the adapters their kept
lowerings, the runner's ``RenderedMessages`` the renderings it kept. With the memos of the
session's last request, such a message is known at once: no serialising, no record lookup, no
hand-over to the request's tables. Entries keep their object (ids are never reused meanwhile)
and hold values derived from that object alone, which never change: nothing edits a message in
place (the rules are pure; every upstream edge serialises what it forwards).

Bounded: a session's memos are dropped once they hold far more entries than its requests need
(renderings replaced, messages gone), and once all are charged more than ``max_bytes`` (their
entries, and the messages they took in) the least recently used sessions of the principal
charged most go first: a tenant's stream of large one-off bodies evicts its own sessions, not
another tenant's (whose next request would run its rules cold: 15 ms became 183 ms). Which one
goes costs O(log principals) (``proxy.fair_lru``), never a walk over other tenants' sessions.
Thread-safe: the pipeline may run in the offload worker while another request of the session
runs on the event loop; a memo filled twice holds the same values."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from proxy.fair_lru import FairLRU
from proxy.principals import split_scoped
from rules.activity import observations
from rules.base import Context, Message
from rules.chain import validator as chain_validator
from rules.context import measure, overlay, shrink, working_set
from rules.entities import seen_calls
from rules.loops import break_loops
from rules.messages import content_hash

# The tables whose values come from one message's content alone: kept across requests. Others
# (an anchor list's index, a ledger's diagnostics) hold objects of one request: made afresh.
KEPT_TABLES = (
    chain_validator.MEMO,
    measure.MEMO,
    observations.EXIT_MEMO,
    observations.OBSERVATION_MEMO,  # a call's: checked against its result object and indices
    break_loops.STEPS_MEMO,  # a result's step: checked against its observation
    shrink.ESTIMATE_MEMO,  # with the options it was made with
    working_set.TASK_TEXT_MEMO,  # a user turn's text, with the limit it was clipped to
)
# ``Context.share``'s names: prune tells inject the anchors of its view, a list it made. Told for
# one request, kept across would mislead a later one sent that very list as the client's (the
# overflow rescue retries the forwarded body: chat's messages are the pipeline's own list), where
# a run with nothing kept works the list's own anchors out.
SHARED = (overlay.MEMO,)
# A session's memos are dropped past this many entries for each object its request handled
# (about 6 for a message: hash, count, its texts' counts, sections, checks), plus a floor.
ENTRIES_PER_OBJECT = 16
ENTRIES_FLOOR = 4096
# What an entry costs beyond the object it keeps (its tuple and dict slot). A message taken in is
# charged ``records.OBJECT_FACTOR`` times its JSON (by the runner, into ``taken_bytes``), so the
# bound holds for large tool results too, whose objects the memos may keep after the byte-bounded
# stores (body memory, kept lowerings) let them go.
ENTRY_BYTES = 160
# the messages ``unknown_share`` reads (spread over the list): ~3 µs, where all 400 took 23
SAMPLES = 16


@dataclass
class ObjectMemos:
    """One session's memos (for one token encoding): each ``id(obj) -> (obj, value)``."""

    hashes: dict[int, tuple[Message, str]] = field(default_factory=dict)
    tables: dict[str, dict[int, tuple[Any, Any]]] = field(
        default_factory=lambda: {name: {} for name in KEPT_TABLES}
    )
    counts: dict[int, tuple[Message, int]] = field(default_factory=dict)
    texts: dict[int, tuple[str, int]] = field(default_factory=dict)
    counted: list[tuple[tuple[Message, ...], int]] = field(default_factory=list)
    # ``Context.derived``'s values by name, each with the last list it was derived from: a list
    # of the very same messages (the same body again, a retry) shares it
    derived: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    taken_bytes: int = 0  # ``records.OBJECT_FACTOR`` × the JSON of the messages taken in so far

    def charge(self) -> int:
        """The bytes these memos are charged: their entries, the messages they took in and the
        keys of the calls track_entities read (a set the size of the state's list, not of the
        request: not counted as entries, which would drop a small request's memos)."""
        return ENTRY_BYTES * self.entries() + self.taken_bytes + seen_calls.held_bytes(self.derived)

    def entries(self) -> int:
        tables = sum(len(t) for t in self.tables.values())
        return len(self.hashes) + tables + len(self.counts) + len(self.texts)

    def changed(self) -> list[Message]:
        """The objects whose content is no longer what it was when memoised: something edited
        them in place (a bug; the strict engine of the tests looks after every request)."""
        return [m for m, known in list(self.hashes.values()) if content_hash(m) != known]

    def attach(self, ctx: Context) -> Context:
        """``ctx`` with these memos as its request's (its other tables made afresh)."""
        for name in SHARED:  # what a request told of a very list is that request's alone
            kept = self.derived.get(name)
            if kept and any(seen.__class__ is list for seen, _ in kept):
                self.derived[name] = [e for e in kept if e[0].__class__ is not list]
        adopt = getattr(ctx.tokens, "adopt", None)
        if adopt is not None:
            adopt(self.counts, self.texts, self.counted)
        return ctx.evolve(hashes=self.hashes, tables=dict(self.tables), memo=self.derived)


class SessionMemos:
    """The memos of the sessions seen last, least recently used first."""

    def __init__(self, max_bytes: int = 64_000_000) -> None:
        self.max_bytes = max_bytes
        # (session, encoding) -> its memos, charged what they hold (bounded by bytes alone)
        self._memos: FairLRU[tuple[str, str | None], ObjectMemos] = FairLRU(sys.maxsize, max_bytes)
        self._lock = threading.Lock()

    def take(self, session: str, encoding: str | None) -> ObjectMemos:
        """The session's memos for the encoding (new ones the first time)."""
        key = (session, encoding)
        with self._lock:
            memos = self._memos.get(key)
            if memos is None:
                memos = ObjectMemos()
                self._memos.put(key, memos, _principal(key))  # charged once settled
            return memos

    def peek(self, session: str, encoding: str | None) -> ObjectMemos | None:
        with self._lock:
            return self._memos.peek((session, encoding))

    def unknown_share(self, session: str, encoding: str | None, messages: list[Message]) -> float:
        """The share of ``messages`` the session's memos (for ``encoding``) do not know as
        objects: what of them the rules would work cold (all of them, with no memos). Read from
        ``SAMPLES`` spread over the list: the body memory hands back one kept body's objects,
        which the session's memos know all of (its own) or none of (another's)."""
        memos = self.peek(session, encoding)
        if memos is None or not messages:
            return 1.0
        sample = messages[:: max(1, len(messages) // SAMPLES)]
        known = sum(map(memos.hashes.__contains__, map(id, sample)))  # in C
        return 1.0 - known / len(sample)

    def settle(self, session: str, encoding: str | None, memos: ObjectMemos, objects: int) -> None:
        """After a request that handled ``objects`` messages: charge the session what its memos
        hold, drop them when far larger than the request needs, then keep the bound."""
        key = (session, encoding)
        entries, held = memos.entries(), memos.charge()
        with self._lock:
            if self._memos.peek(key) is not memos:
                return  # dropped meanwhile: nothing to charge
            if entries > ENTRIES_PER_OBJECT * objects + ENTRIES_FLOOR:
                self._memos.pop(key)
            else:  # then over the bound, the principal charged most loses its least recent
                self._memos.put(key, memos, _principal(key), held)

    def forget(self, session: str) -> int:
        """Drop the session's memos (for every encoding); how many were dropped."""
        with self._lock:
            keys = [k for k in self._memos if k[0] == session]
            for key in keys:
                self._memos.pop(key)
            return len(keys)

    @property
    def held_bytes(self) -> int:
        return self._memos.held_bytes

    def __len__(self) -> int:
        return len(self._memos)


def _principal(key: tuple[str, str | None]) -> str:
    return split_scoped(key[0])[0]
