"""Named migrations, each applied once, in order. The schema is what these build; read them to
know it. Never edit a migration that has shipped: add a new one."""

from __future__ import annotations

import sqlite3

import aiosqlite

MIGRATIONS: list[tuple[str, str]] = []


def migration(name: str, sql: str) -> None:
    MIGRATIONS.append((name, sql))


migration(
    "m001_sessions",
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        parent_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        state TEXT NOT NULL DEFAULT '{}'   -- JSON: rule namespace -> value
    );
    """,
)

migration(
    "m002_requests",
    """
    CREATE TABLE requests (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        session_id TEXT,
        parent_session_id TEXT,
        path TEXT,
        model TEXT,
        upstream TEXT,
        stream INTEGER NOT NULL DEFAULT 0,
        status INTEGER,                 -- HTTP status returned to the client; NULL while in flight
        error_type TEXT,
        error TEXT,
        tokens_before INTEGER,
        tokens_after INTEGER,
        sections TEXT,                  -- JSON: section -> {before, after}
        report TEXT,                    -- JSON: the pipeline report
        overhead_ms REAL,
        latency_ms REAL,
        ttfb_ms REAL,
        usage TEXT,                     -- JSON: upstream usage as reported
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cached_tokens INTEGER,
        client_disconnected INTEGER NOT NULL DEFAULT 0,
        request_body TEXT,              -- only with capture_payloads, redacted
        forwarded_body TEXT,            -- only with capture_payloads, redacted
        response_body TEXT              -- only with capture_payloads, redacted
    );
    CREATE INDEX requests_session ON requests(session_id, created_at);
    CREATE INDEX requests_created ON requests(created_at);
    """,
)

migration(
    "m003_session_cache",
    """
    CREATE TABLE session_cache (        -- the upstream's cache report on a session's latest request
        session_id TEXT PRIMARY KEY,
        at REAL NOT NULL,               -- that request's created_at
        prompt_tokens INTEGER,
        cached_tokens INTEGER,          -- read from the provider's cache
        cache_write_tokens INTEGER      -- written to it (Anthropic)
    );
    """,
)

migration(
    "m004_request_protocol",
    """
    -- the inbound protocol: chat (Chat Completions), anthropic (Messages), responses (Responses)
    ALTER TABLE requests ADD COLUMN protocol TEXT NOT NULL DEFAULT 'chat';
    """,
)

migration(
    "m005_sessions_updated",
    """
    -- the retention prune finds idle sessions by it (store.session_ttl_days)
    CREATE INDEX sessions_updated ON sessions(updated_at);
    """,
)


migration(
    "m006_shared_store",
    """
    -- what replicas sharing one store need (PostgreSQL; SQLite keeps the same schema):
    -- a session's version, bumped by every save, tells a replica its cached state is stale
    ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    -- the process that logged a request (its rows left in flight when it dies are marked)
    ALTER TABLE requests ADD COLUMN instance TEXT;
    CREATE INDEX requests_open ON requests(instance) WHERE status IS NULL;
    CREATE TABLE replicas (             -- the live processes, by their heartbeat
        id TEXT PRIMARY KEY,
        started_at REAL NOT NULL,
        seen_at REAL NOT NULL
    );
    """,
)

migration(
    "m007_session_calls",
    """
    -- PostgreSQL only (its session hold and save functions): nothing to do in SQLite
    """,
)

migration(
    "m008_lz4_columns",
    """
    -- PostgreSQL only (lz4 compression of its big text columns): nothing to do in SQLite
    """,
)

migration(
    "m009_learned_windows",
    """
    -- the windows upstreams stated in their "prompt too long" errors (proxy.store.learned_windows)
    CREATE TABLE learned_windows (
        upstream TEXT NOT NULL,
        model TEXT NOT NULL,
        window_tokens INTEGER NOT NULL,
        learned_at REAL NOT NULL,
        PRIMARY KEY (upstream, model)
    );
    """,
)

migration(
    "m010_save_kept",
    """
    -- PostgreSQL only (its save that keeps the session held): nothing to do in SQLite
    """,
)

migration(
    "m011_sessions_hot",
    """
    -- PostgreSQL only (HOT updates of sessions: its updated_at index dropped). SQLite keeps the
    -- index: it has no HOT to win (an update rewrites the row's b-tree cell either way), its saves
    -- are batched off the request path, and its prune finds idle sessions by it
    """,
)


migration(
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
    -- the server secret: the key of the principals' keyed hashes, made once
    CREATE TABLE secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO secrets VALUES ('principals', lower(hex(randomblob(32))));
    """,
)

migration(
    "m013_response_ids",
    """
    -- the Responses API's response ids relayed to each principal: a previous_response_id is
    -- forwarded only for one of the request's own (proxy.server.response_ids); pruned with the
    -- request log
    CREATE TABLE response_ids (
        principal TEXT NOT NULL,
        id TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (principal, id)
    );
    CREATE INDEX response_ids_created ON response_ids(created_at);
    """,
)

migration(
    "m014_request_cache",
    """
    -- the request's cache line (proxy.attribution): hit, partial hit or miss, its cause and the
    -- tokens re-billed, the input cost against sending direct, a compaction's payback (JSON)
    ALTER TABLE requests ADD COLUMN cache TEXT;
    """,
)

migration(
    "m015_learned_windows_principal",
    """
    -- a learned window is the principal's whose request met the overflow: an error answer can
    -- quote client text, so a shared one let a tenant shrink every tenant's window. The shared
    -- rows are dropped (no principal to give them); each principal's next overflow relearns.
    DROP TABLE learned_windows;
    CREATE TABLE learned_windows (
        principal TEXT NOT NULL,
        upstream TEXT NOT NULL,
        model TEXT NOT NULL,
        window_tokens INTEGER NOT NULL,
        learned_at REAL NOT NULL,
        PRIMARY KEY (principal, upstream, model)
    );
    """,
)

migration(
    "m016_response_session",
    """
    -- the session a relayed response belongs to: a request continuing it (previous_response_id)
    -- and naming no session of its own is in that one (proxy.server.response_ids)
    ALTER TABLE response_ids ADD COLUMN session TEXT;
    """,
)

migration(
    "m017_requests_parent",
    """
    -- /ui's session page lists the sessions naming it their parent, all of them, by this index
    -- (partial: a request with no parent, nearly all, costs it nothing)
    CREATE INDEX requests_parent ON requests(parent_session_id, created_at)
        WHERE parent_session_id IS NOT NULL;
    """,
)


async def apply_migrations(db: aiosqlite.Connection) -> list[str]:
    """Apply the migrations not applied yet; returns their names. One write transaction taken
    before reading what is applied, so two processes starting together take turns (the second
    waits for the lock, up to the busy timeout, then finds them applied)."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    await db.commit()
    await db.execute("BEGIN IMMEDIATE")
    try:
        async with db.execute("SELECT name FROM _migrations") as cur:
            done = {row[0] for row in await cur.fetchall()}
        applied = []
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            for statement in _split(sql):
                await db.execute(statement)
            await db.execute("INSERT INTO _migrations VALUES (?, datetime('now'))", (name,))
            applied.append(name)
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
    return applied


def _split(script: str) -> list[str]:
    """A migration's statements, one by one (SQLite's own tokenizer finds their ends)."""
    out, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending)
            pending = ""
    return out
