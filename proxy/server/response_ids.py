"""The Responses API's stored responses, kept to their principal: a request may continue one
(``previous_response_id``) only if the proxy relayed that response to the same principal. In
``auth.mode: keys`` every principal's calls go upstream with the server's one key, so without
this check anyone who learns a response id could continue (and so read) another's conversation;
in passthrough each credential is a principal of its own, so the check holds there too (and
several clients sharing one ``api_key_env`` upstream key are kept apart). An unknown id and
another principal's get the same answer, which tells nothing of whose an id is.

The ids relayed are read from the answer, where the Responses API writes them (the response
object's first key, ``"id"``): a whole answer's body (read whole if ``id`` is not first), a
stream's ``response.created`` (the first event; ``response.completed`` repeats it). A stream is
scanned only until the id is found, at most its first ``SCAN_LIMIT`` bytes. An answer to a
request sent with ``store: false`` is not recorded: the provider keeps no response to continue.

Kept in memory, at most ``PER_PRINCIPAL`` ids for each principal (its least recently used going
first) and ``TOTAL`` in all, the principal holding most losing first (``response_id_memory``;
about 200 bytes an id with Python's containers: ~4 MB when full), and in the store's
``response_ids`` table (migration m013), written off the request's path by the store's writer and
read (one primary-key lookup) only on a miss in memory, so that replicas sharing a PostgreSQL
store, and a restarted proxy, know them. The memory is a cache of the table: a conversation
continues its latest response, so the ids in use are about as many as the conversations going
on. Rows expire with the request log (``store.retention_days``, ``proxy.store.retention``); an id
older than that is refused from memory too. A store that cannot be read refuses (503), never lets
an id through unchecked."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from proxy.errors import BadRequest, ProxyError
from proxy.protocols.body import echo_id
from proxy.rewrite.session_key import named_session
from proxy.server.response_id_memory import IdMemory

if TYPE_CHECKING:
    from proxy.settings import Settings
    from proxy.store.base import Store

PER_PRINCIPAL = 1_000
TOTAL = 20_000
SCAN_LIMIT = 1 << 20  # a stream's bytes scanned for its id at most
LOOKUP_TIMEOUT_S = 2.0
# PostgreSQL: a miss is read again after each of these waits, in case the replica that relayed
# the id has it still queued (its writer commits every 20 ms or so, later while another tenant
# loads it: one wait of 0.25 s refused 2 of 670 continuations on the other replica with 400)
RETRY_S = (0.05, 0.25, 1.0)
DAY_S = 86_400.0
PARAM = "previous_response_id"
# An answer relayed with ``store: false``: no ``previous_response_id`` continues it, but a cache
# diagnosis may compare with it (``provider_refs``), so it is kept under this prefix.
UNSTORED = "unstored:"
log = logging.getLogger("ctxproxy.response_ids")

_ID = rb'"id"\s{0,8}:\s{0,8}"([^"\\\s\x00-\x1f\x7f]{1,256})"'
# A whole answer: the response object, ``id`` its first key.
_BODY_ID = re.compile(rb"\A\s*\{\s*" + _ID)
# A stream's events: ``"response": {"id": …`` (a quote inside a JSON string is escaped, so this
# is a key; every event with a "response" key carries the response object).
_EVENT_ID = re.compile(rb'"response"\s{0,8}:\s{0,8}\{\s{0,8}' + _ID)
_CARRY = 320  # bytes kept between chunks: a match cut by a chunk's end is still found
# An id as kept: what the patterns above take (no quote, backslash, space or control character).
_KEPT_ID = re.compile(r'[^"\\\s\x00-\x1f\x7f]{1,256}')


class Relayed(NamedTuple):
    """A response id as kept: when it was relayed, and in which session (None: not known, a
    row kept before sessions were)."""

    at: float
    session: str | None


class CannotVerify(ProxyError):
    """The store could not be read to check a ``previous_response_id``: refused, not forwarded."""

    status = 503
    error_type = "server_error"
    code = "store_unavailable"


def _sql(store: Store) -> tuple[str, str]:
    """(insert, select) in the store's dialect."""
    m = store.dialect.mark
    insert = (
        "INSERT INTO response_ids (principal, id, created_at, session) "
        f"VALUES ({m(1)}, {m(2)}, {m(3)}, {m(4)}) ON CONFLICT (principal, id) DO NOTHING"
    )
    select = (
        f"SELECT created_at, session FROM response_ids WHERE principal = {m(1)} AND id = {m(2)}"
    )
    return insert, select


class _Lru(IdMemory[Relayed]):
    """(principal, id) -> when relayed and in which session: at most ``per_principal`` ids
    each, ``total`` in all, the principal holding most losing its least recently used first."""


class ResponseIds:
    """The ids relayed to each principal (``note``, ``recorder``) and the check (``require``)."""

    def __init__(
        self,
        store: Store,
        retention_days: float = 0.0,
        per_principal: int = PER_PRINCIPAL,
        total: int = TOTAL,
    ) -> None:
        self.store = store
        self.keep_s = retention_days * DAY_S if retention_days > 0 else None
        self.memory = _Lru(per_principal, total)
        self._insert, self._select = _sql(store)

    def note(
        self, principal: str, rid: str, now: float | None = None, session: str | None = None
    ) -> None:
        """``rid`` was relayed to ``principal`` (in its ``session``, the client's name of it):
        known here at once, in the store soon."""
        at = time.time() if now is None else now
        if self.memory.put(principal, rid, Relayed(at, session)):
            self.store.write_later(self._insert, (principal, rid, at, session))

    async def known(self, principal: str, rid: str, now: float | None = None) -> bool:
        """Whether ``rid`` was relayed to ``principal`` (within the retention)."""
        return await self.relayed(principal, rid, now) is not None

    async def relayed(self, principal: str, rid: str, now: float | None = None) -> Relayed | None:
        """When and in which session ``rid`` was relayed to ``principal`` (within the
        retention); None when it was not."""
        if _KEPT_ID.fullmatch(rid) is None:  # never kept: not looked up
            return None
        now = time.time() if now is None else now
        oldest = now - self.keep_s if self.keep_s is not None else 0.0
        kept = self.memory.get(principal, rid)
        if kept is not None:
            return kept if kept.at >= oldest else None
        waits = (0.0, *RETRY_S) if self.store.kind == "postgresql" else (0.0,)
        for wait in waits:
            if wait:
                await asyncio.sleep(wait)
            try:
                async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                    row = await self.store.fetchrow(self._select, (principal, rid))
            except Exception as exc:
                log.warning("previous_response_id: the store could not be read: %r", exc)
                raise CannotVerify(
                    "The proxy cannot check previous_response_id now; retry later.", param=PARAM
                ) from None
            if row is not None:
                at = float(row[0])
                if at < oldest:
                    return None
                session = row[1] if isinstance(row[1], str) else None
                kept = Relayed(at, session)
                self.memory.put(principal, rid, kept)  # already stored: no write
                return kept
        return None

    async def require(self, principal: str, body: dict[str, Any]) -> str | None:
        """Raise the Responses API's own error unless the body's ``previous_response_id``, if
        any, was relayed to ``principal``; the session (the client's name of it) the continued
        response was relayed in, if known."""
        rid = body.get(PARAM)
        if rid is None:
            return None
        if not isinstance(rid, str):
            raise BadRequest(f"'{PARAM}' must be a string.", param=PARAM)
        kept = await self.relayed(principal, rid)
        if kept is None:
            shown = echo_id(rid)
            raise BadRequest(
                f"Previous response with id '{shown}' not found for this client.",
                param=PARAM,
                code="previous_response_not_found",
            )
        return kept.session

    def recorder(
        self, principal: str, body: dict[str, Any], status: int, session: str | None = None
    ) -> Recorder | None:
        """What reads the id of the answer to ``body`` (in ``session``); None when there is
        none to keep (an error). One of ``store: false`` is kept as ``UNSTORED``: a comparison
        may name it, a continuation may not."""
        if not 200 <= status < 300:
            return None
        return Recorder(self, principal, session, UNSTORED if body.get("store") is False else "")


class Recorder:
    """Reads one answer's response id, whole (``answer``) or streamed (``feed``), and notes it."""

    __slots__ = ("_carry", "_ids", "_prefix", "_principal", "_scanned", "_session", "done")

    def __init__(
        self, ids: ResponseIds, principal: str, session: str | None = None, prefix: str = ""
    ) -> None:
        self._ids = ids
        self._principal = principal
        self._session = session
        self._prefix = prefix
        self._carry = b""
        self._scanned = 0
        self.done = False

    def answer(self, body: bytes) -> None:
        self.done = True
        found = _BODY_ID.match(body)
        if found is not None:
            self._note(found.group(1))
            return
        try:  # not written id first: read the whole answer
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
        if isinstance(obj, dict) and obj.get("object") == "response":
            rid = obj.get("id")
            if isinstance(rid, str) and _KEPT_ID.fullmatch(rid):
                self._ids.note(self._principal, self._prefix + rid, session=self._session)

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return
        data = self._carry + chunk if self._carry else chunk
        found = _EVENT_ID.search(data)
        if found is not None:
            self.done = True
            self._carry = b""
            self._note(found.group(1))
            return
        self._scanned += len(chunk)
        if self._scanned >= SCAN_LIMIT:
            self.done = True
            self._carry = b""
        else:
            self._carry = data[-_CARRY:]

    def _note(self, found: bytes) -> None:
        rid = found.decode("utf-8", "replace")
        self._ids.note(self._principal, self._prefix + rid, session=self._session)


async def continued_session(
    ids: ResponseIds | None, principal: str, headers: Mapping[str, str], body: dict[str, Any]
) -> str | None:
    """``ResponseIds.require`` (``ids`` None: the check is off, nothing required), and the
    session the request is in when it continues a response (``continuing``)."""
    if ids is None:
        return None
    return continuing(await ids.require(principal, body), headers, body)


def continuing(
    session: str | None, headers: Mapping[str, str], body: Mapping[str, Any]
) -> str | None:
    """The session a request continuing a response (``session``: the one it was relayed in) is
    in: that one, unless the request names its own (a header, ``metadata``, ``user`` …). A
    continuation carries no first system and user message, so the hash of them that names an
    unnamed conversation named every chain's continuations alike: one session for them all."""
    if session is None or named_session(headers, body) is not None:
        return None
    return session


def response_ids_for(settings: Settings, store: Store) -> ResponseIds | None:
    """The check as configured (``auth.check_previous_response_id``); None when it is off."""
    if not settings.auth.check_previous_response_id:
        return None
    return ResponseIds(store, settings.store.retention_days)
