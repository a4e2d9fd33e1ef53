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
    (
        "m007_session_calls",
        """
        -- A session's hold and save, one round trip each (proxy.store.postgres explains why).
        -- The hold takes the session's session-level advisory lock (waiting at most wait_ms),
        -- then reads in a statement of its own, so with a snapshot taken after the lock is
        -- granted: it sees whatever the previous holder committed. The state comes only when
        -- the stored version is not the caller's (known); the cache report comes along.
        CREATE FUNCTION ctxproxy_hold_session(k BIGINT, sid TEXT, known BIGINT, wait_ms INT)
        RETURNS TABLE (version BIGINT, state TEXT, parent_id TEXT, at DOUBLE PRECISION,
                       prompt_tokens BIGINT, cached_tokens BIGINT, cache_write_tokens BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM set_config('lock_timeout', wait_ms::text, true);
            PERFORM pg_advisory_lock(k);
            RETURN QUERY
            SELECT s.version, CASE WHEN s.version = known THEN NULL ELSE s.state END,
                   s.parent_id, c.at, c.prompt_tokens, c.cached_tokens, c.cache_write_tokens
            FROM (SELECT sid AS id) AS x
            LEFT JOIN sessions s ON s.id = x.id
            LEFT JOIN session_cache c ON c.session_id = x.id;
        END $$;
        -- The save: upsert under a new version, COMMIT, and only then let the lock go (the
        -- next holder, here or on another replica, reads after the commit). Called on its own
        -- (CALL outside a transaction block), as a procedure may commit only then.
        CREATE PROCEDURE ctxproxy_save_session(
            k BIGINT, sid TEXT, parent TEXT, stamp DOUBLE PRECISION, blob TEXT,
            INOUT saved BIGINT DEFAULT NULL
        )
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO sessions AS s (id, parent_id, created_at, updated_at, state, version)
            VALUES (sid, parent, stamp, stamp, blob, nextval('session_versions'))
            ON CONFLICT (id) DO UPDATE SET state = excluded.state,
                updated_at = excluded.updated_at,
                parent_id = COALESCE(excluded.parent_id, s.parent_id), version = excluded.version
            RETURNING s.version INTO saved;
            COMMIT;
            PERFORM pg_advisory_unlock(k);
        END $$;
        """,
    ),
    (
        "m008_lz4_columns",
        """
        -- The big text columns (a session's state is rewritten on every request) compressed with
        -- lz4, several times cheaper than the default pglz (a 90 kB state: 0.8 ms of server CPU
        -- per save instead of 2.7). Values already stored keep theirs. Skipped on a server
        -- without lz4 (built without it, or older than PostgreSQL 14).
        DO $$
        BEGIN
            EXECUTE 'ALTER TABLE sessions ALTER COLUMN state SET COMPRESSION lz4';
            EXECUTE 'ALTER TABLE requests ALTER COLUMN report SET COMPRESSION lz4, '
                'ALTER COLUMN request_body SET COMPRESSION lz4, '
                'ALTER COLUMN forwarded_body SET COMPRESSION lz4, '
                'ALTER COLUMN response_body SET COMPRESSION lz4';
        EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
            RAISE NOTICE 'lz4 compression not available: %', SQLERRM;
        END $$;
        """,
    ),
    (
        "m009_learned_windows",
        """
        CREATE TABLE learned_windows (
            upstream TEXT NOT NULL,
            model TEXT NOT NULL,
            window_tokens BIGINT NOT NULL,
            learned_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (upstream, model)
        );
        """,
    ),
    (
        "m010_save_kept",
        """
        -- ctxproxy_save_session without the unlock: the caller keeps holding the session, for a
        -- next request close behind (proxy.store.postgres: parked connections).
        CREATE PROCEDURE ctxproxy_save_kept(
            sid TEXT, parent TEXT, stamp DOUBLE PRECISION, blob TEXT,
            INOUT saved BIGINT DEFAULT NULL
        )
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO sessions AS s (id, parent_id, created_at, updated_at, state, version)
            VALUES (sid, parent, stamp, stamp, blob, nextval('session_versions'))
            ON CONFLICT (id) DO UPDATE SET state = excluded.state,
                updated_at = excluded.updated_at,
                parent_id = COALESCE(excluded.parent_id, s.parent_id), version = excluded.version
            RETURNING s.version INTO saved;
            COMMIT;
        END $$;
        """,
    ),
    (
        "m011_sessions_hot",
        """
        -- A save rewrites the session's row: with no index on a column it changes (updated_at's
        -- was one) and room left on the row's page, PostgreSQL updates it in place (a HOT
        -- update: no new index entries, less to vacuum). The prune walks the primary key instead.
        DROP INDEX IF EXISTS sessions_updated;
        ALTER TABLE sessions SET (fillfactor = 50);
        """,
    ),
    (
        "m012_principals",
        """
        -- Every request belongs to a principal (proxy.principals); a session is kept under
        -- 'principal/name'. What was stored before belongs to 'legacy', which no request is given.
        ALTER TABLE requests ADD COLUMN principal TEXT NOT NULL DEFAULT 'legacy';
        UPDATE requests SET session_id = 'legacy/' || session_id WHERE session_id IS NOT NULL;
        UPDATE requests SET parent_session_id = 'legacy/' || parent_session_id
            WHERE parent_session_id IS NOT NULL;
        UPDATE sessions SET id = 'legacy/' || id, parent_id = 'legacy/' || parent_id;
        UPDATE session_cache SET session_id = 'legacy/' || session_id;
        CREATE INDEX requests_principal ON requests(principal, created_at);
        -- the server secret: the key of the principals' keyed hashes, made once, shared by replicas
        CREATE TABLE secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO secrets VALUES
            ('principals', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
        """,
    ),
    (
        "m013_response_ids",
        """
        -- the Responses API's response ids relayed to each principal (proxy.server.response_ids)
        CREATE TABLE response_ids (
            principal TEXT NOT NULL,
            id TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (principal, id)
        );
        CREATE INDEX response_ids_created ON response_ids(created_at);
        """,
    ),
    (
        "m014_request_cache",
        """
        -- the request's cache line (proxy.attribution), JSON
        ALTER TABLE requests ADD COLUMN cache TEXT;
        """,
    ),
    (
        "m015_learned_windows_principal",
        """
        -- a learned window is the principal's whose request met the overflow (an error answer
        -- can quote client text); the shared rows are dropped: each principal relearns
        DROP TABLE learned_windows;
        CREATE TABLE learned_windows (
            principal TEXT NOT NULL,
            upstream TEXT NOT NULL,
            model TEXT NOT NULL,
            window_tokens BIGINT NOT NULL,
            learned_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (principal, upstream, model)
        );
        """,
    ),
    (
        "m016_response_session",
        """
        -- the session a relayed response belongs to (proxy.server.response_ids)
        ALTER TABLE response_ids ADD COLUMN session TEXT;
        """,
    ),
    (
        "m017_requests_parent",
        """
        -- /ui's list of the sessions naming one their parent (partial: most rows have none)
        CREATE INDEX requests_parent ON requests(parent_session_id, created_at)
            WHERE parent_session_id IS NOT NULL;
        """,
    ),
]


# A migration's statements (and the wait for another replica's) may take long on a large table:
# not bound by the connection's statement timeout
MIGRATION_TIMEOUT_S = 24 * 3600.0


async def apply_pg_migrations(conn: Any) -> list[str]:
    """Apply the migrations not applied yet (an asyncpg connection); returns their names. Two
    replicas starting together serialise here: the second finds them applied."""
    wait = MIGRATION_TIMEOUT_S
    await conn.execute("SELECT pg_advisory_lock($1, $2)", *MIGRATION_LOCK, timeout=wait)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
            timeout=wait,
        )
        rows = await conn.fetch("SELECT name FROM schema_migrations", timeout=wait)
        done = {r["name"] for r in rows}
        applied = []
        for name, sql in PG_MIGRATIONS:
            if name in done:
                continue
            async with conn.transaction():
                await conn.execute(sql, timeout=wait)
                await conn.execute(
                    "INSERT INTO schema_migrations (name) VALUES ($1)", name, timeout=wait
                )
            applied.append(name)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1, $2)", *MIGRATION_LOCK, timeout=wait)


def names_match() -> bool:
    """Both stores know the same migrations, in the same order (a test checks)."""
    return [n for n, _ in PG_MIGRATIONS] == [n for n, _ in SQLITE_MIGRATIONS]
