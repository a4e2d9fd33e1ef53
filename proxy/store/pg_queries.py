"""The statements only the PostgreSQL store runs (the ones both stores run, in their two dialects,
are in ``proxy.store.dialect``): a session's hold and save under its advisory lock, the ancestors
of a sub-agent, the replicas' heartbeat, and the retention prune's bounded steps."""

from __future__ import annotations

from proxy.store.dialect import REPLICA_STOPPED as STOPPED

STEP_ROWS = 500  # rows a prune step deletes (one short transaction)
STEP_PAUSE_S = 0.01

# A session's hold and save (migration m007_session_calls): one round trip each. HOLD takes the
# session's advisory lock ($1, waiting at most $4 ms) and returns its version, its state only when
# that version is not the cached one ($3), its parent and its cache report. SAVE upserts the new
# state under a new version, commits, then lets the lock go; LET_GO lets it go without a save.
HOLD = "SELECT * FROM ctxproxy_hold_session($1, $2, $3, $4)"
SAVE = "CALL ctxproxy_save_session($1, $2, $3, $4, $5)"
# The same save keeping the lock (migration m010_save_kept): the session's next request, close
# behind, then needs no HOLD (``PostgresStore`` parks the connection for it a moment).
SAVE_KEPT = "CALL ctxproxy_save_kept($1, $2, $3, $4)"
LET_GO = "SELECT pg_advisory_unlock($1)"

ANCESTORS = """
WITH RECURSIVE up(id, parent_id, state, depth, path) AS (
    SELECT id, parent_id, state, 1, ARRAY[id] FROM sessions WHERE id = $1
  UNION ALL
    SELECT s.id, s.parent_id, s.state, up.depth + 1, up.path || s.id
    FROM up JOIN sessions s ON s.id = up.parent_id
    WHERE up.depth < $2 AND NOT s.id = ANY(up.path)
)
SELECT id, parent_id, state FROM up ORDER BY depth
"""

# A beat is stamped, and a replica's silence measured, by the database's clock: the replicas'
# hosts' clocks may differ by more than the 3 beats a replica may miss (one behind the others
# was taken for stopped at every sweep, its requests in flight marked as its own).
DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
HEARTBEAT = f"""
INSERT INTO replicas (id, started_at, seen_at) VALUES ($1, $2, {DB_NOW})
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at
RETURNING seen_at
"""
GONE = "DELETE FROM replicas WHERE id = $1"
# Replicas silent for $1 seconds are gone: their requests still in flight are marked, not left
# open (``proxy.store.dialect``: a request of one only cut off a while ends as it did).
SWEEP = f"""
WITH dead AS (DELETE FROM replicas WHERE seen_at < {DB_NOW} - $1 RETURNING id),
marked AS (
    UPDATE requests SET status = 503, error_type = '{STOPPED}',
        error = 'The ctxproxy replica serving this request stopped before it completed.'
    WHERE status IS NULL AND instance IN (SELECT id FROM dead) RETURNING 1
)
SELECT count(*) FROM marked
"""

PRUNE_REQUESTS = """
DELETE FROM requests WHERE id IN (
    SELECT id FROM requests WHERE created_at < $1 ORDER BY created_at LIMIT $2
) RETURNING id
"""
# the response ids relayed (proxy.server.response_ids) go with the log rows of their time
PRUNE_RESPONSE_IDS = """
DELETE FROM response_ids WHERE ctid IN (
    SELECT ctid FROM response_ids WHERE created_at < $1 ORDER BY created_at LIMIT $2
) RETURNING id
"""
# Idle sessions (not saved since $1) among the next $3 after id $2, in key order: updated_at has
# no index (a save then is a HOT update, migration m011), so the prune walks the primary key, a
# bounded step at a time; ``last`` is where the next step starts (NULL: the end).
PRUNE_SESSIONS = """
WITH scanned AS (SELECT id, updated_at FROM sessions WHERE id > $2 ORDER BY id LIMIT $3),
picked AS (
    SELECT id FROM sessions
    WHERE id IN (SELECT id FROM scanned WHERE updated_at < $1) AND updated_at < $1
    FOR UPDATE SKIP LOCKED
),
gone AS (DELETE FROM sessions s USING picked WHERE s.id = picked.id RETURNING s.id),
cache AS (
    DELETE FROM session_cache c USING gone WHERE c.session_id = gone.id RETURNING c.session_id
)
SELECT CASE WHEN (SELECT count(*) FROM scanned) = $3 THEN (SELECT max(id) FROM scanned) END
    AS last, ARRAY(SELECT id FROM gone) AS gone, (SELECT count(*) FROM cache) AS cached
"""
# a cache report whose session has no state row (or lost it), by its own time
PRUNE_ORPHAN_CACHE = """
DELETE FROM session_cache WHERE session_id IN (
    SELECT c.session_id FROM session_cache c
    WHERE c.at < $1 AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id)
    LIMIT $2
) RETURNING session_id AS id
"""
