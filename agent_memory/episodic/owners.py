"""Who may use a thread.

LangGraph keys checkpoints by ``thread_id`` alone, so without a check a user who
sends another user's thread id would load that user's conversation. The first
user to run a thread owns it (``checkpoint_thread_owner``); the checkpointer
refuses the thread to everyone else before reading or writing anything. A run
says who it is the way every agent-memory run does: ``user_id`` in
``config["configurable"]`` or in the agent's context. Runs that name no user
(plain LangGraph use) are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..db.requests import Op, Sql
from ..errors import DatabaseError, PermissionDeniedError
from . import sql

__all__ = ["claim_thread", "refusal", "thread_and_user"]

_RUNTIME_KEY = "__pregel_runtime"  # where LangGraph keeps the run's Runtime (and its context)


def _user_of(context: Any) -> Any:
    if isinstance(context, Mapping):
        return context.get("user_id")
    return getattr(context, "user_id", None)


def thread_and_user(config: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``(thread_id, user_id)`` of a checkpointer call, or ``None`` when either is missing."""
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    user = configurable.get("user_id")
    if user is None:
        user = _user_of(getattr(configurable.get(_RUNTIME_KEY), "context", None))
    if thread is None or user is None:
        return None
    return str(thread), str(user).strip()  # the same spelling validation.check_id gives the memory layer


def claim_thread(thread_id: str, user_id: str) -> Op[str]:
    """The thread's owner, claiming it for ``user_id`` if it has none."""
    for _ in range(2):  # a claim committed by another session during ours shows on the second look
        row = yield Sql(*sql.claim_thread(thread_id, user_id), fetch="one")
        if row is not None:
            return row["user_id"]
    raise DatabaseError(f"could not read or claim the owner of thread {thread_id!r}; try again")


def refusal(thread_id: str) -> PermissionDeniedError:
    return PermissionDeniedError(
        f"thread {thread_id!r} belongs to another user, so its checkpoints were neither read nor written; "
        "give every user thread ids of their own (e.g. f'{user_id}:{uuid4()}')"
    )
