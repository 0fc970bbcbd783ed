"""Copying a thread and deleting the checkpoints of runs, on PostgreSQL, with ownership kept.

LangGraph's ``PostgresSaver`` raises ``NotImplementedError`` for both, which our checkpointer
used to forward, so LangChain's conformance suite took them for supported and failed. Both
are plain statements over LangGraph's three tables, written as ops like the rest of the
episodic layer and driven by the checkpointer's sync or async connection.

Ownership: copying reads the source, so the caller must be allowed to read it (checked by
the checkpointer before this runs); the copy is a new thread owned by the caller. Deleting
by run id touches only threads the caller owns (every thread only for a checkpointer built
with ``require_user=False``), since run ids are not secret and must not reach another
user's history.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..db.requests import Op, Sql
from ..errors import InvalidInputError
from . import owners

__all__ = ["copy_statements", "copy_thread", "delete_for_runs", "delete_for_runs_scope"]

#: LangGraph's checkpoint tables and their columns other than ``thread_id``
_TABLES: tuple[tuple[str, str], ...] = (
    ("checkpoints", "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"),
    ("checkpoint_blobs", "checkpoint_ns, channel, version, type, blob"),
    ("checkpoint_writes", "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path"),
)


def copy_statements(source: str, target: str) -> list[tuple[str, tuple[str, str]]]:
    """One ``INSERT ... SELECT`` per table, copying ``source``'s rows to ``target`` (pure)."""
    return [
        (f"INSERT INTO {table} (thread_id, {columns}) SELECT %s, {columns} FROM {table} WHERE thread_id = %s",
         (target, source))
        for table, columns in _TABLES
    ]


def copy_thread(source: str, target: str, user: str | None) -> Op[int]:
    """Copy every checkpoint, blob and write of ``source`` to the new thread ``target`` in one
    transaction; answers the checkpoints copied. ``target`` must have no checkpoints yet (a copy
    never merges into an existing history); a copy made for ``user`` belongs to them."""
    if source == target:
        raise InvalidInputError("target_thread_id", "is the source thread; copy into a new thread id")
    taken = yield Sql("SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = %s) AS taken", (target,),
                      fetch="one")
    if taken["taken"] or (yield from owners.owner_of(target)) not in (None, user):
        raise InvalidInputError(
            "target_thread_id", f"thread {target!r} already exists; copy into a new thread id (e.g. a fresh uuid4)"
        )
    copied = 0
    for query, params in copy_statements(source, target):
        n = yield Sql(query, params, fetch="rowcount")
        copied = copied or n  # the first statement counts the checkpoints
    if copied and user is not None:
        yield from owners.claim_thread(target, user)
    return copied


def delete_for_runs(run_ids: Sequence[str], user: str | None) -> Op[int]:
    """Delete the checkpoints whose metadata names one of ``run_ids``, with their writes, in
    threads ``user`` owns (in every thread when ``user`` is None: the checkpointer allows that
    only with ``require_user=False``); answers how many checkpoints went."""
    ids = [str(r) for r in run_ids]
    if not ids:
        return 0
    scope, params = delete_for_runs_scope(ids, user)
    yield Sql(
        f"DELETE FROM checkpoint_writes w USING ({scope}) d WHERE w.thread_id = d.thread_id"
        " AND w.checkpoint_ns = d.checkpoint_ns AND w.checkpoint_id = d.checkpoint_id",
        params, fetch="rowcount",
    )
    return (yield Sql(
        f"DELETE FROM checkpoints x USING ({scope}) d WHERE x.thread_id = d.thread_id"
        " AND x.checkpoint_ns = d.checkpoint_ns AND x.checkpoint_id = d.checkpoint_id",
        params, fetch="rowcount",
    ))


def delete_for_runs_scope(run_ids: list[str], user: str | None) -> tuple[str, tuple[object, ...]]:
    """The checkpoints of ``run_ids`` that ``user`` may delete, as a subquery (pure)."""
    query = "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id FROM checkpoints c"
    if user is None:
        return query + " WHERE c.metadata->>'run_id' = ANY(%s)", (run_ids,)
    return (query + " JOIN checkpoint_thread_owner o ON o.thread_id = c.thread_id"
            " WHERE c.metadata->>'run_id' = ANY(%s) AND o.user_id = %s", (run_ids, user))
