"""Forgetting a user's episodic memory: every thread they own, and every snapshot they have.

:func:`forget_user_threads` hard-deletes, in one transaction, the threads the user
owns (``checkpoint_thread_owner``, see :mod:`.owners`) with all their rows in
LangGraph's ``checkpoints``, ``checkpoint_blobs`` and ``checkpoint_writes``, their
archived checkpoints (``checkpoint_archive``), every user's snapshot of them, and the
owner rows themselves; then the user's own snapshots of threads they do not own. A
thread someone else owns (or nobody does: runs that named no user) is left alone.

It runs on any database: the checkpointer may never have been set up there, or only
LangGraph's tables may exist. One query first asks which tables exist
(``to_regclass``); the others are skipped and left out of the answer. The answer
counts deleted rows per table, plus ``threads``: how many threads the user owned
(always present, 0 when there was no owner table)::

    from agent_memory.db.requests import run
    counts = run(forget_user_threads("alice"), pool, None)   # or await arun(..., async_pool, None)

Two caveats for a system that is running:

* :class:`~.checkpointer.PostgresCheckpointer` remembers in-process which
  ``(thread, user)`` pairs it has already checked (``_checked``), and only
  ``delete_thread``/``prune`` clear that cache (``_forget_owner``). A checkpointer
  that served the forgotten user before still lets them write to their old thread
  ids without a new claim, so a run still in flight, or a later one through the same
  checkpointer, can put checkpoints back, this time with no owner row. Stop the
  user's runs first, and drop the cache: there is no public method for that yet;
  the clean one would be ``PostgresCheckpointer.forget_user(user_id)``, running this
  op and then discarding every cached key whose user is ``user_id`` (only owners
  are ever cached, so the thread ids are not needed). Until it exists, a fresh
  checkpointer (a restart) has an empty cache.
* A forgotten thread id is free again: the next user to run it claims it, as after
  ``delete_thread``.
"""

from __future__ import annotations

from typing import Any

from ..db.requests import Op, Sql
from ..validation import check_identity

__all__ = [
    "FORGET_TABLES",
    "delete_snapshots",
    "delete_thread_rows",
    "existing_tables",
    "forget_user_threads",
    "release_threads",
]

Statement = tuple[str, dict[str, Any]]

OWNER_TABLE = "checkpoint_thread_owner"
SNAPSHOT_TABLE = "session_state_snapshot"
#: tables whose rows belong to a thread, deleted in this order (LangGraph's delete_thread order first)
THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_archive")
#: every table :func:`forget_user_threads` deletes from
FORGET_TABLES = (OWNER_TABLE, *THREAD_TABLES, SNAPSHOT_TABLE)


# --- SQL (pure) ------------------------------------------------------------------------------


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


# --- op --------------------------------------------------------------------------------------


def forget_user_threads(user_id: str) -> Op[dict[str, int]]:
    """Hard-delete ``user_id``'s episodic memory in one transaction (see the module docstring).

    Answers deleted rows per existing table, keyed by table name, plus ``threads`` (threads
    the user owned). Idempotent: a second call answers zeros.
    """
    user = check_identity(user_id).user_id
    rows = yield Sql(*existing_tables(), fetch="all")
    present = {row["name"] for row in rows}
    counts: dict[str, int] = {"threads": 0}
    thread_ids: list[str] = []
    if OWNER_TABLE in present:
        owned = yield Sql(*release_threads(user), fetch="all")
        thread_ids = sorted(row["thread_id"] for row in owned)
        counts["threads"] = counts[OWNER_TABLE] = len(thread_ids)
    for table in THREAD_TABLES:
        if table in present:
            counts[table] = yield Sql(*delete_thread_rows(table, thread_ids), fetch="rowcount")
    if SNAPSHOT_TABLE in present:
        counts[SNAPSHOT_TABLE] = yield Sql(*delete_snapshots(user, thread_ids), fetch="rowcount")
    return counts
