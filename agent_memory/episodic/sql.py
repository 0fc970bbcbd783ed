"""The SQL of episodic memory, built by pure functions that return ``(query, params)``.

Nothing here does I/O, so the sync and async paths share every statement and
tests can read them. LangGraph's own tables (``checkpoints``,
``checkpoint_blobs``, ``checkpoint_writes``) are only ever touched by the
archive and restore statements, each a single statement so that what moves,
moves together on one snapshot of the database.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

__all__ = [
    "archive_checkpoints",
    "forget_threads",
    "list_snapshots",
    "load_snapshot",
    "restore_thread",
    "upsert_snapshot",
]

Statement = tuple[str, dict[str, Any]]

# --- session_state_snapshot --------------------------------------------------------------

_SNAPSHOT_COLUMNS = (
    "user_id, thread_id, project_id, title, message_count, checkpoint_id, snapshot, created_at, updated_at"
)


def upsert_snapshot(
    *, user_id: str, thread_id: str, project_id: str | None, title: str | None, message_count: int,
    checkpoint_id: str | None, snapshot: dict[str, Any],
) -> Statement:
    """Write a session's snapshot. The title is kept once set: summarization may later
    replace the first user message, but a session should not change its name."""
    return (
        f"""
        INSERT INTO session_state_snapshot
            (user_id, thread_id, project_id, title, message_count, checkpoint_id, snapshot)
        VALUES (%(user_id)s, %(thread_id)s, %(project_id)s, %(title)s, %(message_count)s,
                %(checkpoint_id)s, %(snapshot)s)
        ON CONFLICT (user_id, thread_id) DO UPDATE SET
            project_id    = EXCLUDED.project_id,
            title         = coalesce(session_state_snapshot.title, EXCLUDED.title),
            message_count = EXCLUDED.message_count,
            checkpoint_id = coalesce(EXCLUDED.checkpoint_id, session_state_snapshot.checkpoint_id),
            snapshot      = EXCLUDED.snapshot,
            updated_at    = clock_timestamp()
        RETURNING {_SNAPSHOT_COLUMNS}
        """,
        {
            "user_id": user_id, "thread_id": thread_id, "project_id": project_id, "title": title,
            "message_count": message_count, "checkpoint_id": checkpoint_id, "snapshot": Jsonb(snapshot),
        },
    )


def load_snapshot(*, user_id: str, thread_id: str) -> Statement:
    query = (
        f"SELECT {_SNAPSHOT_COLUMNS} FROM session_state_snapshot "
        "WHERE user_id = %(user_id)s AND thread_id = %(thread_id)s"
    )
    return query, {"user_id": user_id, "thread_id": thread_id}


def list_snapshots(*, user_id: str, project_id: str | None, limit: int, offset: int) -> Statement:
    """The user's sessions, most recently active first (optionally one project's)."""
    project = " AND project_id = %(project_id)s" if project_id is not None else ""
    query = (
        f"SELECT {_SNAPSHOT_COLUMNS} FROM session_state_snapshot "
        f"WHERE user_id = %(user_id)s{project} "
        "ORDER BY updated_at DESC, thread_id LIMIT %(limit)s OFFSET %(offset)s"
    )
    return query, {"user_id": user_id, "project_id": project_id, "limit": limit, "offset": offset}


def forget_threads(thread_ids: list[str], *, snapshots: bool) -> list[Statement]:
    """What a deleted (or pruned) thread leaves behind in our tables: its archived
    checkpoints, which a restore would otherwise bring back, and (``snapshots``) every
    user's snapshot of it."""
    statements = [("DELETE FROM checkpoint_archive WHERE thread_id = ANY(%(ids)s)", {"ids": thread_ids})]
    if snapshots:
        statements.append(("DELETE FROM session_state_snapshot WHERE thread_id = ANY(%(ids)s)", {"ids": thread_ids}))
        statements.append(("DELETE FROM checkpoint_thread_owner WHERE thread_id = ANY(%(ids)s)", {"ids": thread_ids}))
    return statements


def claim_thread(thread_id: str, user_id: str) -> Statement:
    """The owner of ``thread_id``: ``user_id`` if the thread had none (it is claimed now), else
    whoever claimed it first. One statement, so two first runs cannot both win."""
    query = """
        WITH claimed AS (
            INSERT INTO checkpoint_thread_owner (thread_id, user_id) VALUES (%(t)s, %(u)s)
            ON CONFLICT (thread_id) DO NOTHING RETURNING user_id
        )
        SELECT user_id FROM claimed
        UNION ALL SELECT user_id FROM checkpoint_thread_owner WHERE thread_id = %(t)s
        LIMIT 1"""
    return query, {"t": thread_id, "u": user_id}


def thread_owner(thread_id: str) -> Statement:
    """The owner of ``thread_id`` (no row when nobody has claimed it), claiming nothing."""
    return "SELECT user_id FROM checkpoint_thread_owner WHERE thread_id = %(t)s", {"t": thread_id}


# --- checkpoint_archive ------------------------------------------------------------------

# Which checkpoints stay hot, per (thread, namespace): the latest one (what get_tuple loads
# and a run resumes from), and its parent when it predates checkpoint format v4 (it reads its
# pending sends from there, as in langgraph's own prune). Threads that use a DeltaChannel are
# never archived: their latest value is rebuilt from older checkpoints' writes. The test for
# them mirrors PRUNE_DELTA_THREADS_SQL in langgraph.checkpoint.postgres.base.
_ARCHIVE_SQL = """
WITH scope AS (
    SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata
    FROM checkpoints
    {thread_filter}
),
heads AS (
    SELECT DISTINCT ON (thread_id, checkpoint_ns)
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, (checkpoint ->> 'v')::int AS v
    FROM scope
    ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC
),
kept AS (
    SELECT thread_id, checkpoint_ns, checkpoint_id FROM heads
    UNION
    SELECT thread_id, checkpoint_ns, parent_checkpoint_id FROM heads
    WHERE v < 4 AND parent_checkpoint_id IS NOT NULL
),
delta_threads AS (
    SELECT thread_id FROM scope
    WHERE metadata ? 'counters_since_delta_snapshot' OR metadata ? 'delta_writes_versioned'
    UNION
    SELECT s.thread_id
    FROM scope s
    CROSS JOIN LATERAL jsonb_each(s.checkpoint -> 'channel_values') AS v
    WHERE v.value = 'true'::jsonb AND EXISTS (
        SELECT 1 FROM checkpoint_blobs b
        WHERE b.thread_id = s.thread_id AND b.checkpoint_ns = s.checkpoint_ns
          AND b.channel = v.key AND b.version = s.checkpoint -> 'channel_versions' ->> v.key
    )
),
old AS (
    SELECT s.* FROM scope s
    WHERE (s.checkpoint ->> 'ts')::timestamptz < %(cutoff)s
      AND NOT EXISTS (
          SELECT 1 FROM kept k
          WHERE k.thread_id = s.thread_id AND k.checkpoint_ns = s.checkpoint_ns
            AND k.checkpoint_id = s.checkpoint_id
      )
),
targets AS (
    SELECT * FROM old WHERE thread_id NOT IN (SELECT thread_id FROM delta_threads)
),
-- Blobs are keyed by (thread, namespace, channel, version) and shared by every checkpoint
-- whose channel_versions name that version: only those no staying checkpoint names may go.
-- Each goes with one archived checkpoint that names it (its "owner").
target_refs AS (
    SELECT t.thread_id, t.checkpoint_ns, v.key AS channel, v.value AS version,
           min(t.checkpoint_id) AS owner
    FROM targets t
    CROSS JOIN LATERAL jsonb_each_text(t.checkpoint -> 'channel_versions') AS v
    GROUP BY 1, 2, 3, 4
),
staying_refs AS (
    SELECT DISTINCT s.thread_id, s.checkpoint_ns, v.key AS channel, v.value AS version
    FROM scope s
    CROSS JOIN LATERAL jsonb_each_text(s.checkpoint -> 'channel_versions') AS v
    WHERE NOT EXISTS (
        SELECT 1 FROM targets t
        WHERE t.thread_id = s.thread_id AND t.checkpoint_ns = s.checkpoint_ns
          AND t.checkpoint_id = s.checkpoint_id
    )
),
garbage AS (
    SELECT r.* FROM target_refs r
    WHERE NOT EXISTS (
        SELECT 1 FROM staying_refs k
        WHERE k.thread_id = r.thread_id AND k.checkpoint_ns = r.checkpoint_ns
          AND k.channel = r.channel AND k.version = r.version
    )
),
moved_blobs AS (
    DELETE FROM checkpoint_blobs b
    USING garbage g
    WHERE b.thread_id = g.thread_id AND b.checkpoint_ns = g.checkpoint_ns
      AND b.channel = g.channel AND b.version = g.version
    RETURNING b.thread_id, b.checkpoint_ns, g.owner, b.channel, b.version, b.type, b.blob
),
moved_writes AS (
    DELETE FROM checkpoint_writes w
    USING targets t
    WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = t.checkpoint_ns
      AND w.checkpoint_id = t.checkpoint_id
    RETURNING w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx,
              w.channel, w.type, w.blob
),
moved_checkpoints AS (
    DELETE FROM checkpoints c
    USING targets t
    WHERE c.thread_id = t.thread_id AND c.checkpoint_ns = t.checkpoint_ns
      AND c.checkpoint_id = t.checkpoint_id
    RETURNING c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,
              c.checkpoint, c.metadata
),
blobs_by_owner AS (
    SELECT thread_id, checkpoint_ns, owner AS checkpoint_id,
           jsonb_agg(jsonb_build_object(
               'channel', channel, 'version', version, 'type', type, 'blob', encode(blob, 'base64')
           ) ORDER BY channel, version) AS blobs
    FROM moved_blobs
    GROUP BY 1, 2, 3
),
writes_by_checkpoint AS (
    SELECT thread_id, checkpoint_ns, checkpoint_id,
           jsonb_agg(jsonb_build_object(
               'task_id', task_id, 'task_path', task_path, 'idx', idx, 'channel', channel,
               'type', type, 'blob', encode(blob, 'base64')
           ) ORDER BY task_id, idx) AS writes
    FROM moved_writes
    GROUP BY 1, 2, 3
),
archived AS (
    INSERT INTO checkpoint_archive AS a
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata,
         checkpoint_ts, blobs, writes)
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint,
           c.metadata, (c.checkpoint ->> 'ts')::timestamptz,
           coalesce(b.blobs, '[]'::jsonb), coalesce(w.writes, '[]'::jsonb)
    FROM moved_checkpoints c
    LEFT JOIN blobs_by_owner b USING (thread_id, checkpoint_ns, checkpoint_id)
    LEFT JOIN writes_by_checkpoint w USING (thread_id, checkpoint_ns, checkpoint_id)
    -- Only if the same checkpoint was archived, put back by hand and archived again:
    -- keep everything either copy holds rather than lose a blob.
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
        type = EXCLUDED.type,
        checkpoint = EXCLUDED.checkpoint,
        metadata = EXCLUDED.metadata,
        checkpoint_ts = EXCLUDED.checkpoint_ts,
        blobs = a.blobs || EXCLUDED.blobs,
        writes = a.writes || EXCLUDED.writes,
        archived_at = now()
    RETURNING a.thread_id
)
SELECT
    (SELECT count(DISTINCT thread_id) FROM archived) AS threads,
    (SELECT count(*) FROM archived) AS checkpoints,
    (SELECT count(*) FROM moved_blobs) AS blobs,
    (SELECT count(*) FROM moved_writes) AS writes,
    (SELECT count(DISTINCT o.thread_id) FROM old o WHERE o.thread_id IN (SELECT thread_id FROM delta_threads))
        AS skipped_threads
"""


def archive_checkpoints(*, cutoff: datetime, thread_id: str | None) -> Statement:
    """Move checkpoints saved before ``cutoff`` (all threads, or one) into ``checkpoint_archive``."""
    thread_filter = "WHERE thread_id = %(thread_id)s" if thread_id is not None else ""
    return _ARCHIVE_SQL.format(thread_filter=thread_filter), {"cutoff": cutoff, "thread_id": thread_id}


_RESTORE_SQL = """
WITH moved AS (
    DELETE FROM checkpoint_archive WHERE thread_id = %(thread_id)s
    RETURNING thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata,
              blobs, writes
),
restored_checkpoints AS (
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata)
    SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM moved
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING
    RETURNING 1
),
restored_blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT m.thread_id, m.checkpoint_ns, e ->> 'channel', e ->> 'version', e ->> 'type',
           decode(e ->> 'blob', 'base64')
    FROM moved m
    CROSS JOIN LATERAL jsonb_array_elements(m.blobs) AS e
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING 1
),
restored_writes AS (
    INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
    SELECT m.thread_id, m.checkpoint_ns, m.checkpoint_id, e ->> 'task_id', e ->> 'task_path',
           (e ->> 'idx')::int, e ->> 'channel', e ->> 'type', decode(e ->> 'blob', 'base64')
    FROM moved m
    CROSS JOIN LATERAL jsonb_array_elements(m.writes) AS e
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    RETURNING 1
)
SELECT
    (SELECT count(*) > 0 FROM moved)::int AS threads,
    (SELECT count(*) FROM restored_checkpoints) AS checkpoints,
    (SELECT count(*) FROM restored_blobs) AS blobs,
    (SELECT count(*) FROM restored_writes) AS writes,
    0 AS skipped_threads
"""


def restore_thread(thread_id: str) -> Statement:
    """Put every archived checkpoint of ``thread_id`` back, with its blobs and writes.
    Rows already hot (a restore racing a restore) are left as they are."""
    return _RESTORE_SQL, {"thread_id": thread_id}
