"""The async calls made on a store at once, run as one batch (as LangGraph's async stores do).

``await store.aput(...)`` from a thousand tasks gathered together was a thousand transactions,
each waiting for a pool connection (issue 28: 69 calls/s where LangGraph's store does thousands,
and ``DatabaseBusyError`` past the pool's timeout). LangGraph's ``AsyncBatchedBaseStore`` queues
every call made in one event-loop tick and runs them as one ``abatch``; this module does the
same for :class:`~agent_memory.store.AgentMemoryStore`, with two differences that matter to us:

- each call keeps the identity of its caller (read when it was made, in the caller's context:
  a LangGraph run's user), so calls of different users share a transaction, never an identity;
  repeated calls are merged (LangGraph's own rule: a later put to a key replaces an earlier one,
  equal reads are read once) only among calls of the same caller;
- a call that fails fails alone: the batch runs each write under a savepoint
  (:func:`each_alone`), so a refused put gives its caller the error and the others their results
  (a read refused before its statement is its caller's alone too; one the database refuses ends
  the batch, as any failure ends LangGraph's).
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

import psycopg
from langgraph.store.base import Op, Result

from .. import queries
from ..db.failures import database_error
from ..db.requests import Commit, Sql
from ..db.requests import Op as Operation
from ..errors import DatabaseError
from ..models import Identity

try:  # LangGraph's rule for merging repeated calls; private, so its absence only costs the merge
    from langgraph.store.base.batch import _dedupe_ops as _langgraph_dedupe
except ImportError:  # pragma: no cover - a LangGraph without it
    _langgraph_dedupe = None  # type: ignore[assignment]

__all__ = ["Gatherer", "each_alone"]

Outcome = Result | BaseException


class _Owner(Protocol):
    def _run_gathered(self, ops: list[Op], callers: list[Identity | None]) -> Awaitable[list[Outcome]]: ...


class Gatherer:
    """One queue per event loop; a task on that loop takes every call queued by the time it
    runs and hands them to ``owner._run_gathered`` as one batch (one at a time: while a batch
    runs, the next gathers)."""

    def __init__(self, owner: _Owner) -> None:
        self._owner = weakref.ref(owner)  # the queue's task must not keep the store alive
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()

    async def submit(self, op: Op, caller: Identity | None) -> Result:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue(asyncio.Queue())
        future: asyncio.Future[Result] = loop.create_future()
        queue.calls.put_nowait((future, op, caller))
        if queue.task is None or queue.task.done():  # the task runs once this tick's calls are queued
            queue.task = loop.create_task(_drain(queue.calls, self._owner), name="agent-memory-store-batches")
        return await future


@dataclass(slots=True)
class _Queue:
    """One loop's calls waiting for a batch, and the task that runs them (None: no task yet)."""

    calls: asyncio.Queue[tuple[asyncio.Future[Result], Op, Identity | None]]
    task: asyncio.Task[None] | None = None


def _merged(ops: list[Op], callers: list[Identity | None]) -> tuple[list[int] | None, list[Op], list[Identity | None]]:
    """LangGraph's merge of repeated calls, when every call is the same caller's."""
    if _langgraph_dedupe is None or len(ops) < 2 or any(c != callers[0] for c in callers):
        return None, ops, callers
    listen, merged = _langgraph_dedupe(ops)
    return listen, merged, [callers[0]] * len(merged)


async def _drain(queue: asyncio.Queue[Any], owner: weakref.ref[_Owner]) -> None:
    """Run what is queued, batch after batch, and end when nothing is (the next call starts
    another task): no task is left pending when a loop ends."""
    while not queue.empty():
        calls = []
        while not queue.empty():
            calls.append(queue.get_nowait())
        calls = [c for c in calls if not c[0].done()]  # cancelled while waiting: not run
        store = owner()
        if store is None:
            for future, _, _ in calls:
                future.cancel()
            return
        if not calls:
            continue
        listen, ops, callers = _merged([c[1] for c in calls], [c[2] for c in calls])
        try:
            outcomes = await store._run_gathered(ops, callers)
        except Exception as exc:  # the batch as a whole failed (the database is down, ...): every call says so
            outcomes = [exc] * len(ops)
        del store
        if listen is not None:
            outcomes = [outcomes[i] for i in listen]
        for (future, _, _), outcome in zip(calls, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


def each_alone(steps: Sequence[Operation[Any] | BaseException],
               writes: Sequence[bool] | None = None) -> Operation[list[Outcome]]:
    """Run ``steps`` in order in one transaction, each write under a savepoint: a step that
    raises undoes its own writes and gives its error as its outcome, and the next step goes on.
    A step given as an exception (refused before it ran) is that outcome.

    ``writes`` (default: every step) says which steps write. A read runs without a savepoint
    (two round trips fewer): a read refused before its statement is its caller's error alone,
    but a statement of a read that the database refuses leaves the transaction unusable, so
    that error ends the batch (every caller hears it, as in LangGraph's own batches). A database
    that is down or a lost connection is not thrown in by the driver: it ends the batch too."""
    outcomes: list[Outcome] = []
    try:
        for i, step in enumerate(steps):
            if isinstance(step, BaseException):
                outcomes.append(step)
                continue
            if writes is not None and not writes[i]:
                try:
                    outcomes.append((yield from step))
                except (psycopg.Error, DatabaseError):
                    raise  # the transaction may be aborted: nothing after it could run
                except Exception as exc:  # noqa: BLE001 - refused before any statement failed
                    outcomes.append(exc)
                continue
            yield Sql(*queries.op_savepoint("set"), fetch="none")
            try:
                outcome = yield from _kept_savepoint(step)
            except Exception as exc:  # noqa: BLE001 - the op's own failure, given to its caller
                yield Sql(*queries.op_savepoint("undo"), fetch="none")
                outcomes.append(database_error(exc) if isinstance(exc, psycopg.Error) else exc)
                continue
            yield Sql(*queries.op_savepoint("release"), fetch="none")
            outcomes.append(outcome)
        return outcomes
    finally:
        for step in steps:
            if not isinstance(step, BaseException):
                step.close()


def _kept_savepoint(step: Operation[Any]) -> Operation[Any]:
    """``step``'s requests, with the savepoint set again after any ``Commit`` it asks for (a
    commit ends the savepoint; what was committed stays, whatever happens next)."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = step.throw(error) if error is not None else step.send(answer)
        except StopIteration as stop:
            return stop.value
        answer, error = None, None
        try:
            answer = yield request
        except Exception as exc:  # the driver's: thrown into the step at its request
            error = exc
            continue
        if isinstance(request, Commit):
            yield Sql(*queries.op_savepoint("set"), fetch="none")
