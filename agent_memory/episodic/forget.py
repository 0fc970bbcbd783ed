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
  ``(thread, user)`` pairs it has already checked. Running this op directly leaves
  that cache as it was, so a checkpointer that served the forgotten user could still
  let a run in flight write to their old thread ids without a new claim. Call
  ``PostgresCheckpointer.forget_user(user_id=...)`` on the checkpointer your agents
  hold instead: it runs this op and then drops every cached claim of the user. Stop the
  user's runs first either way.
* A forgotten thread id is free again: the next user to run it claims it, as after
  ``delete_thread``.
"""

from __future__ import annotations

from ..db.requests import Op, Sql
from ..queries.episodic import (
    FORGET_TABLES,
    OWNER_TABLE,
    SNAPSHOT_TABLE,
    THREAD_TABLES,
    delete_snapshots,
    delete_thread_rows,
    existing_tables,
    release_threads,
)
from ..validation import check_identity

# the statements (re-exported here) are built in :mod:`agent_memory.queries.episodic`; the tables
# are those of :data:`agent_memory.queries.USER_DATA_TABLES` with ``forget="episodic"``
__all__ = [
    "FORGET_TABLES",
    "OWNER_TABLE",
    "SNAPSHOT_TABLE",
    "THREAD_TABLES",
    "delete_snapshots",
    "delete_thread_rows",
    "existing_tables",
    "forget_user_threads",
    "release_threads",
]


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
