"""Who may use a thread.

LangGraph keys checkpoints by ``thread_id`` alone, so without a check a user who
sends another user's thread id would load that user's conversation. The first
user to run a thread owns it (``checkpoint_thread_owner``); the checkpointer
refuses the thread to everyone else before reading or writing anything. A run
says who it is the way every agent-memory run does
(:func:`agent_memory.identity.thread_and_user`: ``user_id`` in
``config["configurable"]`` or in the agent's context, which must agree).

A call that names no user (plain LangGraph use, or ``agent.get_state(config)``
without a ``user_id``) may use threads nobody owns; a thread that has an owner
is refused to it (:func:`needs_user`), unless the checkpointer was built with
``require_user=False`` for a single-tenant app.
"""

from __future__ import annotations

from ..db.requests import Op, Sql
from ..errors import DatabaseError, PermissionDeniedError
from ..identity import thread_and_user
from . import sql

__all__ = ["claim_thread", "needs_user", "owner_of", "refusal", "thread_and_user", "unscoped_listing"]


def claim_thread(thread_id: str, user_id: str) -> Op[str]:
    """The thread's owner, claiming it for ``user_id`` if it has none."""
    for _ in range(2):  # a claim committed by another session during ours shows on the second look
        row = yield Sql(*sql.claim_thread(thread_id, user_id), fetch="one")
        if row is not None:
            return row["user_id"]
    raise DatabaseError(f"could not read or claim the owner of thread {thread_id!r}; try again")


def owner_of(thread_id: str) -> Op[str | None]:
    """The thread's owner, or ``None`` when nobody has claimed it (nothing is claimed here)."""
    row = yield Sql(*sql.thread_owner(thread_id), fetch="one")
    return None if row is None else row["user_id"]


def refusal(thread_id: str) -> PermissionDeniedError:
    return PermissionDeniedError(
        f"thread {thread_id!r} belongs to another user, so its checkpoints were neither read nor written; "
        "give every user thread ids of their own (e.g. f'{user_id}:{uuid4()}')"
    )


def needs_user(thread_id: str, how: str = "config") -> PermissionDeniedError:
    """The refusal of a call that names no user on a thread that has an owner."""
    where = ("pass user_id=... (the owner's id)" if how == "argument" else
             "pass the owner's user_id with the call, e.g. config={'configurable': "
             "{'thread_id': ..., 'user_id': 'alice'}} (or context=MyContext(user_id='alice') in a run)")
    return PermissionDeniedError(
        f"thread {thread_id!r} belongs to a user, and this call names none, so nothing was read or written; "
        f"{where}; or build PostgresCheckpointer(require_user=False) for a single-tenant app"
    )


def unscoped_listing() -> PermissionDeniedError:
    return PermissionDeniedError(
        "listing checkpoints without a thread_id would read every user's threads, so nothing was listed; "
        "pass config={'configurable': {'thread_id': ..., 'user_id': ...}}, or build "
        "PostgresCheckpointer(require_user=False) for a single-tenant app"
    )
