"""The named migrations of ``proxy.store.migrations``, in PostgreSQL's SQL: the same names, in the
same order, each applied once and recorded in ``schema_migrations``. Replicas started together
take turns on a session-level advisory lock, so each migration runs exactly once. Never edit a
migration that has shipped: add a new one here and in ``proxy.store.migrations``."""

from __future__ import annotations

from typing import Any

from proxy.store.migrations import MIGRATIONS as SQLITE_MIGRATIONS

# pg_advisory_lock's two-int key space (apart from the sessions' bigint keys): "ctxp", 1
MIGRATION_LOCK = (0x63747870, 1)

PG_MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_sessions",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            parent_id TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            state TEXT NOT NULL DEFAULT '{}'    -- JSON: rule namespace -> value
        );
        """,
    ),
    (
        "m002_requests",
        """
        CREATE TABLE requests (
            id TEXT PRIMARY KEY,
            created_at DOUBLE PRECISION NOT NULL,
            session_id TEXT,
            parent_session_id TEXT,
            path TEXT,
            model TEXT,
            upstream TEXT,
            stream BIGINT NOT NULL DEFAULT 0,
            status BIGINT,                  -- HTTP status returned; NULL while in flight
            error_type TEXT,
            error TEXT,
            tokens_before BIGINT,
            tokens_after BIGINT,
            sections TEXT,                  -- JSON: section -> {before, after}
            report TEXT,                    -- JSON: the pipeline report
            overhead_ms DOUBLE PRECISION,
            latency_ms DOUBLE PRECISION,
            ttfb_ms DOUBLE PRECISION,
            usage TEXT,                     -- JSON: upstream usage as reported
            prompt_tokens BIGINT,
            completion_tokens BIGINT,
            cached_tokens BIGINT,
            client_disconnected BIGINT NOT NULL DEFAULT 0,
            request_body TEXT,              -- only with capture_payloads, redacted
            forwarded_body TEXT,
            response_body TEXT
        );
        CREATE INDEX requests_session ON requests(session_id, created_at);
        CREATE INDEX requests_created ON requests(created_at);
        """,
    ),
    (
        "m003_session_cache",
        """
        CREATE TABLE session_cache (
            session_id TEXT PRIMARY KEY,
            at DOUBLE PRECISION NOT NULL,
            prompt_tokens BIGINT,
            cached_tokens BIGINT,
            cache_write_tokens BIGINT
        );
        """,
    ),
    (
        "m004_request_protocol",
        "ALTER TABLE requests ADD COLUMN protocol TEXT NOT NULL DEFAULT 'chat';",
    ),
    ("m005_sessions_updated", "CREATE INDEX sessions_updated ON sessions(updated_at);"),
    (
        "m006_shared_store",
        """
        -- versions from one sequence: a session pruned and begun again never reuses one that
        -- a replica may still hold in its cache
        CREATE SEQUENCE session_versions;
        ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE requests ADD COLUMN instance TEXT;
        CREATE INDEX requests_open ON requests(instance) WHERE status IS NULL;
        CREATE TABLE replicas (
            id TEXT PRIMARY KEY,
            started_at DOUBLE PRECISION NOT NULL,
            seen_at DOUBLE PRECISION NOT NULL
        );
        """,
    ),
]


async def apply_pg_migrations(conn: Any) -> list[str]:
    """Apply the migrations not applied yet (an asyncpg connection); returns their names. Two
    replicas starting together serialise here: the second finds them applied."""
    await conn.execute("SELECT pg_advisory_lock($1, $2)", *MIGRATION_LOCK)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
        applied = []
        for name, sql in PG_MIGRATIONS:
            if name in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (name) VALUES ($1)", name)
            applied.append(name)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1, $2)", *MIGRATION_LOCK)


def names_match() -> bool:
    """Both stores know the same migrations, in the same order (a test checks)."""
    return [n for n, _ in PG_MIGRATIONS] == [n for n, _ in SQLITE_MIGRATIONS]
