"""The writes both stores' writer tasks take, as data, and how a batch of them becomes as few
statements as it takes (in the store's SQL dialect): a request inserted and finished in the same
batch is one INSERT; only the last state of a session is written, and only the newest of a
row's upserts (``Statement.key``); rows are redacted and their
JSON columns encoded here, in the writer task, off the request's path."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from proxy.store.dialect import Dialect
from proxy.store.state_bytes import stored_state
from rules.base import SessionState
from rules.redact import redact, redact_text

if TYPE_CHECKING:
    from _typeshed import SupportsKeysAndGetItem

JSON_COLUMNS = ("sections", "report", "usage", "cache")
# Columns holding client text as it came (the rest are numbers, ours, or redacted at the source).
CLIENT_TEXT_COLUMNS = ("model", "path")
Groups = list[tuple[str, list[tuple[Any, ...]]]]
# Rows a writer encodes (redacted, JSON columns written) before it lets the event loop run again:
# ~40 µs each for the 20-message request's row, so a request waits at most about this many.
ROWS_PER_TURN = 2
# told of each state written: (session id, the state saved, the state stored, its JSON's bytes)
Written = Callable[[str, SessionState, SessionState, int], None]


@dataclass(frozen=True)
class Insert:
    row: dict[str, Any]


@dataclass(frozen=True)
class Finish:
    request_id: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class SaveState:
    session_id: str
    state: SessionState
    parent_id: str | None
    at: float
    since: float  # the first of the saves coalesced into this one (a new row's created_at)


@dataclass(frozen=True)
class Statement:
    sql: str
    params: tuple[Any, ...]
    # An upsert of one row (``key``) whose newest value wins (the greatest ``order``): in a
    # batch, only that one is run (a session's cache report, once per request of it).
    key: str | None = None
    order: float = 0.0


WriteOp = Insert | Finish | SaveState | Statement


def statements(
    ops: list[Any],
    dialect: Dialect,
    max_state_bytes: int | None = None,
    written: Written | None = None,
) -> tuple[Groups, int]:
    """A batch as (sql, rows) groups, in an order that keeps its meaning, and the number of rows
    that could not be encoded (each lost alone). Ops of other kinds are left out. A state is
    stored within ``max_state_bytes`` (``state_bytes.stored_state``); ``written`` is told."""
    steps = _statements(ops, dialect, max_state_bytes, written)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


async def paced_statements(
    ops: list[Any],
    dialect: Dialect,
    max_state_bytes: int | None = None,
    written: Written | None = None,
    rows_per_turn: int = ROWS_PER_TURN,
    pause: Callable[[], Awaitable[None]] | None = None,
) -> tuple[Groups, int]:
    """``statements``, giving the event loop back before every ``rows_per_turn`` rows encoded:
    a batch's redaction and encoding (tens of µs a request row, a 20 ms batch holds many) is
    spread over the loop's idle moments instead of landing on one request's time. ``pause``:
    how (``proxy.store.lull``: until no request is being handled); one turn of the loop if
    not given."""
    steps = _statements(ops, dialect, max_state_bytes, written)
    wait = pause or _one_turn
    encoded = 0
    while True:
        if encoded % rows_per_turn == 0:
            await wait()
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        encoded += 1


async def _one_turn() -> None:
    await asyncio.sleep(0)


def _statements(
    ops: list[Any],
    dialect: Dialect,
    max_state_bytes: int | None,
    written: Written | None,
) -> Generator[None, None, tuple[Groups, int]]:
    """``statements``' work, pausing (a bare ``yield``) after each row or state it encodes."""
    inserts: dict[str, dict[str, Any]] = {}
    finishes: dict[str, dict[str, Any]] = {}
    states: dict[str, SaveState] = {}
    queued: list[Statement] = []
    newest: dict[tuple[str, str], int] = {}  # a keyed statement's place in ``queued``
    for op in ops:
        if isinstance(op, Statement):
            if op.key is None:
                queued.append(op)
                continue
            at = newest.setdefault((op.sql, op.key), len(queued))
            if at == len(queued):
                queued.append(op)
            elif op.order >= queued[at].order:
                queued[at] = op
        elif isinstance(op, Insert):
            inserts[op.row["id"]] = op.row
        elif isinstance(op, Finish):
            target = inserts.get(op.request_id)
            if target is not None:
                target.update(op.fields)
            else:
                finishes.setdefault(op.request_id, {}).update(op.fields)
        elif isinstance(op, SaveState):
            earlier = states.pop(op.session_id, None)
            if earlier is not None:
                parent = earlier.parent_id if earlier.parent_id is not None else op.parent_id
                op = SaveState(op.session_id, op.state, parent, op.at, earlier.since)
            states[op.session_id] = op
    groups: dict[str, list[tuple[Any, ...]]] = {}
    lost = 0
    for row in inserts.values():
        try:
            encoded = dialect.coerce(encode_row(row))
        except (TypeError, ValueError):  # a value that cannot be encoded: that row is lost
            lost += 1
            continue
        groups.setdefault(dialect.insert_request(tuple(encoded)), []).append(
            tuple(encoded.values())
        )
        yield
    for request_id, fields in finishes.items():
        try:
            encoded = dialect.coerce(encode_row(fields))
        except (TypeError, ValueError):
            lost += 1
            continue
        groups.setdefault(dialect.update_request(tuple(encoded)), []).append(
            (*encoded.values(), request_id)
        )
        yield
    for save in states.values():
        try:
            if max_state_bytes is None:
                stored, data = save.state, orjson.dumps(save.state.to_json())
            else:
                stored, data = stored_state(save.state, max_state_bytes)
            blob = data.decode()
        except (TypeError, ValueError):
            lost += 1
            continue
        if written is not None:
            written(save.session_id, save.state, stored, len(data))
        groups.setdefault(dialect.upsert_session, []).append(
            (save.session_id, save.parent_id, save.since, save.at, blob)
        )
        yield
    for statement in queued:  # in the order queued
        groups.setdefault(statement.sql, []).append(statement.params)
    return list(groups.items()), lost


def encode_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row as stored: client text redacted, JSON columns encoded."""
    out = dict(row)
    for col in CLIENT_TEXT_COLUMNS:
        if isinstance(out.get(col), str):
            out[col] = redact_text(out[col])
    for col in ("report", "cache"):  # rules (and a provider's diagnosis) copy client text
        if isinstance(out.get(col), dict):
            out[col] = redact(out[col])
    for col in JSON_COLUMNS:
        if col in out and out[col] is not None and not isinstance(out[col], str):
            out[col] = orjson.dumps(out[col]).decode()
    return out


def decode_row(row: SupportsKeysAndGetItem[str, Any]) -> dict[str, Any]:
    """A row as read (a mapping, an asyncpg Record or a sqlite3 Row), its JSON columns decoded."""
    out = dict(row)
    for col in JSON_COLUMNS:
        if isinstance(out.get(col), str):
            out[col] = orjson.loads(out[col])
    return out


# Rows decoded on the event loop at most; more (a /ui page of a 1,000-turn session: ~60 ms of
# JSON) are decoded on a worker thread, so one page view does not hold every tenant's requests.
DECODED_ON_LOOP = 32


async def decode_rows(rows: list[Any]) -> list[dict[str, Any]]:
    """``decode_row`` of each row, off the loop past ``DECODED_ON_LOOP`` rows."""
    if len(rows) <= DECODED_ON_LOOP:
        return [decode_row(r) for r in rows]
    return await asyncio.to_thread(lambda: [decode_row(r) for r in rows])


class BatchWindow:
    """The writer's wait for what the next few ms bring, cut short once the store closes: what
    is queued is then written at once, and a shutdown does not wait out the window. As cheap as
    ``asyncio.sleep`` (one future, one timer), which it replaces."""

    def __init__(self) -> None:
        self.closed = False
        self._waiting: asyncio.Future[None] | None = None

    async def wait(self, seconds: float) -> None:
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        waiting = self._waiting = loop.create_future()
        timer = loop.call_later(seconds, _end, waiting)
        try:
            await waiting
        finally:
            timer.cancel()
            self._waiting = None

    def close(self) -> None:
        self.closed = True
        if self._waiting is not None:
            _end(self._waiting)


def _end(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_result(None)
