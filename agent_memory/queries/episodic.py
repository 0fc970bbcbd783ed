"""Episodic memory beyond what the checkpointer itself runs (that SQL is
:mod:`agent_memory.episodic.sql`): forgetting a user's threads, copying a thread, and deleting
the checkpoints of runs. LangGraph's tables may be missing on a database the checkpointer
never set up; :func:`existing_tables` says which are there.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tables import user_tables
from .types import Statement

__all__ = [
    "FORGET_TABLES",
    "OWNER_TABLE",
    "SNAPSHOT_TABLE",
    "THREAD_TABLES",
    "checkpoints_of_runs",
    "copy_statements",
    "delete_checkpoints_of_runs",
    "delete_snapshots",
    "delete_thread_rows",
    "delete_writes_of_runs",
    "existing_tables",
    "release_threads",
    "thread_has_checkpoints",
]

#: every table forgetting a user's episodic memory deletes from, in that order
FORGET_TABLES = tuple(t.name for t in user_tables(forget="episodic"))
#: who owns each thread
OWNER_TABLE = "checkpoint_thread_owner"
#: one snapshot per user and thread
SNAPSHOT_TABLE = "session_state_snapshot"
#: tables whose rows belong to a thread (no user column), deleted in this order (LangGraph's
#: delete_thread order first)
THREAD_TABLES = tuple(t.name for t in user_tables(forget="episodic") if not t.user_columns)

#: LangGraph's checkpoint tables and their columns other than ``thread_id``
_COPIED: tuple[tuple[str, str], ...] = (
    ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"),
    ("checkpoint_blobs", "checkpoint_ns, channel, version, type, blob"),
    ("checkpoint_writes", "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path"),
)


def existing_tables(names: tuple[str, ...] = FORGET_TABLES) -> Statement:
    """Which of ``names`` exist (resolved on the search path, as every statement here is)."""
    return (
        "SELECT name FROM unnest(%(names)s::text[]) AS name WHERE to_regclass(name) IS NOT NULL",
        {"names": list(names)},
    )


def release_threads(user_id: str) -> Statement:
    """Delete the user's owner rows, answering the thread ids they owned. Deleting first locks
    them: a concurrent claim of one of these ids waits for this transaction and then finds
    the thread empty."""
    return (
        f"DELETE FROM {OWNER_TABLE} WHERE user_id = %(user_id)s RETURNING thread_id",
        {"user_id": user_id},
    )


def delete_thread_rows(table: str, thread_ids: list[str]) -> Statement:
    """Delete every row of ``thread_ids`` (all namespaces) from one of :data:`THREAD_TABLES`."""
    if table not in THREAD_TABLES:
        raise ValueError(f"{table!r} is not a per-thread checkpoint table; expected one of {THREAD_TABLES}")
    return f"DELETE FROM {table} WHERE thread_id = ANY(%(ids)s)", {"ids": thread_ids}


def delete_snapshots(user_id: str, thread_ids: list[str]) -> Statement:
    """Every snapshot of ``thread_ids`` (whoever it belongs to) and every snapshot of the user."""
    return (
        f"DELETE FROM {SNAPSHOT_TABLE} WHERE user_id = %(user_id)s OR thread_id = ANY(%(ids)s)",
        {"user_id": user_id, "ids": thread_ids},
    )


def thread_has_checkpoints(thread_id: str) -> Statement:
    """Whether ``thread_id`` has a checkpoint (``taken``)."""
    return "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = %s) AS taken", (thread_id,)


def copy_statements(source: str, target: str) -> list[Statement]:
    """One ``INSERT ... SELECT`` per LangGraph table, copying ``source``'s rows to ``target``
    (checkpoints first: the first statement's row count is the checkpoints copied)."""
    return [
        (f"INSERT INTO {table} (thread_id, {columns}) SELECT %s, {columns} FROM {table} WHERE thread_id = %s",
         (target, source))
        for table, columns in _COPIED
    ]


def checkpoints_of_runs(run_ids: Sequence[str], user: str | None) -> Statement:
    """The checkpoints of ``run_ids`` that ``user`` may delete (in threads they own; every
    thread when None), as a subquery."""
    query = "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id FROM checkpoints c"
    if user is None:
        return query + " WHERE c.metadata->>'run_id' = ANY(%s)", (list(run_ids),)
    return (query + " JOIN checkpoint_thread_owner o ON o.thread_id = c.thread_id"
            " WHERE c.metadata->>'run_id' = ANY(%s) AND o.user_id = %s", (list(run_ids), user))


def delete_writes_of_runs(run_ids: Sequence[str], user: str | None) -> Statement:
    """Delete the writes of :func:`checkpoints_of_runs`."""
    scope, params = checkpoints_of_runs(run_ids, user)
    return (f"DELETE FROM checkpoint_writes w USING ({scope}) d WHERE w.thread_id = d.thread_id"
            " AND w.checkpoint_ns = d.checkpoint_ns AND w.checkpoint_id = d.checkpoint_id", params)


def delete_checkpoints_of_runs(run_ids: Sequence[str], user: str | None) -> Statement:
    """Delete the checkpoints of :func:`checkpoints_of_runs` (their writes first)."""
    scope, params = checkpoints_of_runs(run_ids, user)
    return (f"DELETE FROM checkpoints x USING ({scope}) d WHERE x.thread_id = d.thread_id"
            " AND x.checkpoint_ns = d.checkpoint_ns AND x.checkpoint_id = d.checkpoint_id", params)
