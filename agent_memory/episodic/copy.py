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
from ..queries.episodic import (
    checkpoints_of_runs,
    copy_statements,
    delete_checkpoints_of_runs,
    delete_writes_of_runs,
    thread_has_checkpoints,
)
from . import owners

__all__ = ["copy_statements", "copy_thread", "delete_for_runs", "delete_for_runs_scope"]

#: the checkpoints of runs that a user may delete, as a subquery (pure; built in
#: :mod:`agent_memory.queries.episodic`, like :func:`copy_statements`)
delete_for_runs_scope = checkpoints_of_runs


def copy_thread(source: str, target: str, user: str | None) -> Op[int]:
    """Copy every checkpoint, blob and write of ``source`` to the new thread ``target`` in one
    transaction; answers the checkpoints copied. ``target`` must have no checkpoints yet (a copy
    never merges into an existing history); a copy made for ``user`` belongs to them."""
    if source == target:
        raise InvalidInputError("target_thread_id", "is the source thread; copy into a new thread id")
    taken = yield Sql(*thread_has_checkpoints(target), fetch="one")
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
    yield Sql(*delete_writes_of_runs(ids, user), fetch="rowcount")
    return (yield Sql(*delete_checkpoints_of_runs(ids, user), fetch="rowcount"))

