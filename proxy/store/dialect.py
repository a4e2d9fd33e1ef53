"""Every SQL statement whose text differs between SQLite and PostgreSQL, in one place: bind marks
(``?`` against ``$1``), the request-log queries (indexed, LIMITed), the upserts of our writers,
and the values PostgreSQL's typed columns need (SQLite stores what it gets)."""

from __future__ import annotations

import sqlite3
from functools import cached_property, lru_cache
from typing import Any

# PostgreSQL's types of the request log's columns (proxy.store.pg_migrations builds them).
_FLOAT_COLUMNS = frozenset({"created_at", "overhead_ms", "latency_ms", "ttfb_ms"})
_INT_COLUMNS = frozenset(
    {
        "stream", "status", "tokens_before", "tokens_after", "prompt_tokens",
        "completion_tokens", "cached_tokens", "client_disconnected",
    }
)  # fmt: skip


# The request log's columns but the captured payloads (``capture_payloads``), for the pages that
# list rows (tests/proxy/store/test_listed_columns.py holds it to the table's)
PAYLOAD_COLUMNS = ("request_body", "forwarded_body", "response_body")
LISTED_COLUMNS = (
    "id", "created_at", "session_id", "parent_session_id", "path", "model", "upstream", "stream",
    "status", "error_type", "error", "tokens_before", "tokens_after", "sections", "report",
    "overhead_ms", "latency_ms", "ttfb_ms", "usage", "prompt_tokens", "completion_tokens",
    "cached_tokens", "client_disconnected", "protocol", "instance", "principal", "cache",
)  # fmt: skip


class Dialect:
    """SQLite's SQL; ``PostgresDialect`` overrides what differs. A statement's text is written
    once, on first use (the cache report's upsert is queued with every request)."""

    name = "sqlite"

    def mark(self, i: int) -> str:
        """The bind mark of the ``i``-th parameter (from 1)."""
        return "?"

    def marks(self, n: int, start: int = 1) -> str:
        return ", ".join(self.mark(i) for i in range(start, start + n))

    def coerce(self, row: dict[str, Any]) -> dict[str, Any]:
        """A row's values as the database's columns take them."""
        return row

    def unreadable(self, exc: BaseException) -> bool:
        """Whether a read failed because the data cannot be read (a table missing, a damaged
        file), not for a while (a lock): a session's own state then reads as empty, so traffic
        goes on and the error is logged. PostgreSQL's faults are handled where they arise."""
        return isinstance(exc, sqlite3.DatabaseError) and not transient(exc)

    def insert_request(self, columns: tuple[str, ...]) -> str:
        return _insert_request(self, columns)

    def update_request(self, columns: tuple[str, ...]) -> str:
        return _update_request(self, columns)

    @cached_property
    def upsert_session(self) -> str:
        m = self.marks(5)
        return (
            f"INSERT INTO sessions (id, parent_id, created_at, updated_at, state) VALUES ({m}) "
            "ON CONFLICT(id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at, "
            "parent_id=COALESCE(sessions.parent_id, excluded.parent_id), "
            "version=sessions.version + 1"
        )

    @cached_property
    def feedback_upsert(self) -> str:
        m = self.marks(5)
        return (
            "INSERT INTO session_cache (session_id, at, prompt_tokens, cached_tokens, "
            f"cache_write_tokens) VALUES ({m}) ON CONFLICT(session_id) DO UPDATE SET "
            "at=excluded.at, prompt_tokens=excluded.prompt_tokens, "
            "cached_tokens=excluded.cached_tokens, cache_write_tokens=excluded.cache_write_tokens "
            "WHERE excluded.at >= session_cache.at"
        )

    @cached_property
    def feedback_select(self) -> str:
        return (
            "SELECT at, prompt_tokens, cached_tokens, cache_write_tokens FROM session_cache "
            f"WHERE session_id = {self.mark(1)}"
        )

    least = "MIN"  # the smaller of two values (SQLite's scalar MIN; PostgreSQL's LEAST)

    def unindexed(self, column: str) -> str:
        """``column`` in a condition that must not pick its index (SQLite's unary ``+``: it has
        no statistics to prefer a more selective one by)."""
        return f"+{column}"

    def learned_window_upsert(self, keep_s: float) -> str:
        """A window learned for (principal, upstream, model): the smaller of the stored one and
        this one, unless the stored one is older than ``keep_s`` (a provider may have raised
        it)."""
        m = self.marks(5)
        return (
            "INSERT INTO learned_windows (principal, upstream, model, window_tokens, learned_at) "
            f"VALUES ({m}) ON CONFLICT(principal, upstream, model) DO UPDATE SET "
            "window_tokens = CASE "
            f"WHEN learned_windows.learned_at < excluded.learned_at - {float(keep_s)!r} "
            f"THEN excluded.window_tokens ELSE {self.least}(learned_windows.window_tokens, "
            "excluded.window_tokens) END, learned_at = excluded.learned_at"
        )

    @cached_property
    def learned_windows_select(self) -> str:
        """``$2`` windows learned since ``$1``, newest last: each principal's newest first, then
        each one's second newest and so on (past the bound the principal holding most loses its
        oldest, as ``LearnedWindows`` does in memory; taken newest first across principals, one
        tenant's 1,100 windows learned later left out another's one at every start). A starting
        replica keeps what was learned last."""
        return (
            "SELECT principal, upstream, model, window_tokens FROM (SELECT principal, upstream, "
            "model, window_tokens, learned_at FROM (SELECT principal, upstream, model, "
            "window_tokens, learned_at, ROW_NUMBER() OVER (PARTITION BY principal ORDER BY "
            f"learned_at DESC) AS nth FROM learned_windows WHERE learned_at >= {self.mark(1)}) "
            f"AS ranked ORDER BY nth, learned_at DESC LIMIT {self.mark(2)}) AS recent "
            "ORDER BY learned_at"
        )

    @cached_property
    def child_sessions(self) -> str:
        """The sessions naming ``$1`` their parent (by its index), each with its requests and
        first time, first first, at most ``$2``."""
        m = self.mark
        return (
            "SELECT session_id, COUNT(*) AS requests, MIN(created_at) AS first_seen FROM requests "
            f"WHERE parent_session_id = {m(1)} AND session_id IS NOT NULL "
            f"GROUP BY session_id ORDER BY first_seen LIMIT {m(2)}"
        )

    @cached_property
    def session_requests(self) -> str:
        """How many requests session ``$1`` has (by its index)."""
        return f"SELECT COUNT(*) FROM requests WHERE session_id = {self.mark(1)}"

    @cached_property
    def learned_windows_expire(self) -> str:
        return f"DELETE FROM learned_windows WHERE learned_at < {self.mark(1)}"

    @cached_property
    def get_request(self) -> str:
        return f"SELECT * FROM requests WHERE id = {self.mark(1)}"

    def list_requests(
        self,
        session: str | None,
        model: str | None,
        status: int | None,
        limit: int,
        after_created: float | None,
        principal: str | None = None,
        bodies: bool = True,
    ) -> tuple[str, list[Any]]:
        """Newest first, by the (session_id, created_at), (principal, created_at) or created_at
        index: a session's rows by its own (a scoped id has one principal). Without ``bodies``,
        the captured payloads stay in the table (a page of rows would read up to 32 MiB each)."""
        where: list[str] = []
        params: list[Any] = []
        who = "principal" if session is None else self.unindexed("principal")
        filters = (("session_id", session), (who, principal), ("model", model), ("status", status))
        for column, value in filters:
            if value is not None:
                params.append(value)
                where.append(f"{column} = {self.mark(len(params))}")
        if after_created is not None:
            params.append(after_created)
            where.append(f"created_at > {self.mark(len(params))}")
        sql = f"SELECT {'*' if bodies else ', '.join(LISTED_COLUMNS)} FROM requests"
        if where:
            sql += " WHERE " + " AND ".join(where)
        params.append(limit)
        sql += f" ORDER BY created_at DESC LIMIT {self.mark(len(params))}"
        return sql, params

    def tools_tokens(self, when: str) -> str:
        """A row's tools schema tokens (``sections``' ``tools`` section; 0 without one)."""
        return f"COALESCE(json_extract(sections, '$.tools.{when}'), 0)"

    @cached_property
    def loops_count(self) -> str:
        """How many loops break_loops noted on a row (its report's ``loops``; 0 without)."""
        return "COALESCE(json_array_length(report, '$.loops'), 0)"

    @cached_property
    def billed_sums(self) -> str:
        """The billed input (messages plus the tools schema) summed, as the pages show it."""
        return ", ".join(
            f"CAST(SUM(COALESCE(tokens_{w}, 0) + {self.tools_tokens(w)}) AS BIGINT) AS billed_{w}"
            for w in ("before", "after")
        )

    @cached_property
    def list_sessions(self) -> str:
        """A scoped session id has one principal: MAX picks it."""
        return (
            "SELECT session_id, MAX(principal) AS principal, COUNT(*) AS requests, "
            "MAX(created_at) AS last_seen, MIN(created_at) AS first_seen, "
            "SUM(tokens_before) AS tokens_before, SUM(tokens_after) AS tokens_after, "
            f"{self.billed_sums} "
            "FROM requests WHERE session_id IS NOT NULL "
            f"GROUP BY session_id ORDER BY last_seen DESC LIMIT {self.mark(1)}"
        )

    def recent_session_ids(
        self, scan: int, limit: int, principal: str | None = None
    ) -> tuple[str, list[Any]]:
        """Sessions of the latest ``scan`` requests (of ``principal`` when given, by its index),
        newest first, at most ``limit``."""
        params: list[Any] = [] if principal is None else [principal]
        who = "" if principal is None else f"WHERE principal = {self.mark(1)} "
        params += [scan, limit]
        return (
            "SELECT session_id FROM (SELECT session_id, created_at FROM requests "
            f"{who}ORDER BY created_at DESC LIMIT {self.mark(len(params) - 1)}) AS recent "
            "WHERE session_id IS NOT NULL GROUP BY session_id "
            f"ORDER BY MAX(created_at) DESC LIMIT {self.mark(len(params))}"
        ), params

    def session_totals(self, n: int) -> tuple[str, bool]:
        """Totals of ``n`` sessions, each with its principal; (sql, whether the ids go as one
        array parameter)."""
        return (
            "SELECT session_id, MAX(principal) AS principal, COUNT(*) AS requests, "
            "MAX(created_at) AS last_seen, SUM(tokens_before) AS tokens_before, "
            "SUM(tokens_after) AS tokens_after, SUM(cached_tokens) AS cached_tokens, "
            f"SUM({self.loops_count}) AS loops, {self.billed_sums} "
            f"FROM requests WHERE session_id IN ({self.marks(n)}) "
            "GROUP BY session_id ORDER BY last_seen DESC",
            False,
        )


def transient(exc: BaseException) -> bool:
    """A SQLite error that waiting mends: the file locked or busy (another process's
    transaction), a statement interrupted."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text or "interrupted" in text


class PostgresDialect(Dialect):
    name = "postgresql"
    least = "LEAST"

    def unreadable(self, exc: BaseException) -> bool:
        return False

    def mark(self, i: int) -> str:
        return f"${i}"

    def tools_tokens(self, when: str) -> str:
        return f"COALESCE((sections::jsonb #>> '{{tools,{when}}}')::numeric, 0)"

    @cached_property
    def loops_count(self) -> str:
        return (
            "COALESCE(CASE WHEN jsonb_typeof(report::jsonb -> 'loops') = 'array' "
            "THEN jsonb_array_length(report::jsonb -> 'loops') END, 0)"
        )

    def unindexed(self, column: str) -> str:
        return column  # the planner's statistics choose

    def coerce(self, row: dict[str, Any]) -> dict[str, Any]:
        """Numbers as the typed columns take them (asyncpg does not convert), text without NUL
        (PostgreSQL's text cannot hold one)."""
        out = {}
        for key, value in row.items():
            if value is None:
                pass
            elif key in _FLOAT_COLUMNS:
                value = float(value)
            elif key in _INT_COLUMNS:
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError(f"{key} is not a whole number: {value!r}")
                value = int(value)
            elif isinstance(value, str) and "\x00" in value:
                value = value.replace("\x00", "\ufffd")
            out[key] = value
        return out

    def session_totals(self, n: int) -> tuple[str, bool]:
        sql, _ = super().session_totals(1)
        return sql.replace("IN ($1)", "= ANY($1::text[])"), True


@lru_cache(maxsize=256)
def _insert_request(dialect: Dialect, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO requests ({', '.join(columns)}) VALUES ({dialect.marks(len(columns))})"


# The error of a request whose replica the others took for stopped (PostgreSQL's heartbeat sweep,
# ``proxy.store.pg_queries.SWEEP``); a replica only cut off from the database a while, or whose
# beats were late, still ends the request: its finish clears the mark.
REPLICA_STOPPED = "replica_stopped"
_UNMARKED = f"CASE WHEN error_type = '{REPLICA_STOPPED}' THEN NULL ELSE {{}} END"


@lru_cache(maxsize=256)
def _update_request(dialect: Dialect, columns: tuple[str, ...]) -> str:
    sets = [f"{c} = {dialect.mark(i)}" for i, c in enumerate(columns, 1)]
    if "status" in columns:  # the request's own end: not the sweep's guess
        unset = [c for c in ("error_type", "error") if c not in columns]
        sets += [f"{c} = {_UNMARKED.format(c)}" for c in unset]
    return f"UPDATE requests SET {', '.join(sets)} WHERE id = {dialect.mark(len(columns) + 1)}"


SQLITE = Dialect()
POSTGRES = PostgresDialect()
