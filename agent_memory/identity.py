"""Whose run this is: one reading of a run's identity for every layer.

A run names its user (and optionally project, session, team, org and thread) in
``config["configurable"]`` or in the agent's context object (a dataclass,
pydantic model or mapping with ``user_id``/``project_id``/... attributes). The
memory middleware, the memory tools, extraction, session snapshots and the
checkpointer all ask :func:`read_identity_fields`, so they cannot disagree on
whose data a run touches.

When both sources name a field, they must agree: a run with
``context={"user_id": "eve"}`` and ``configurable={"user_id": "alice"}`` is
refused with :class:`~agent_memory.errors.IdentityConflictError` instead of
letting one layer read alice's thread while another writes into eve's
sessions. Neither source "wins", because either precedence lets someone who
controls one of them speak for the other.

The checkpointer only ever sees ``config``; LangGraph puts the run's
``Runtime`` (and so its context) there under ``__pregel_runtime`` before the
first checkpoint is loaded, so the checkpointer reads the context from it
(:func:`run_context`). A call outside a run (``agent.get_state(config)``) has
no context and reads ``configurable`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import IdentityConflictError, InvalidInputError, MissingIdentityError
from .models import Identity
from .validation import check_id, check_identity

__all__ = [
    "HOW_TO_PASS_IDENTITY",
    "IDENTITY_FIELDS",
    "RUNTIME_KEY",
    "identity_from",
    "read_identity_fields",
    "run_context",
    "thread_and_user",
]

IDENTITY_FIELDS = ("user_id", "project_id", "session_id", "team_id", "org_id")
#: the fields compared between context and config: the identity, and the thread the session defaults to
_RUN_FIELDS = (*IDENTITY_FIELDS, "thread_id")
#: where LangGraph keeps the run's Runtime, and so its context, in ``config["configurable"]``
RUNTIME_KEY = "__pregel_runtime"

HOW_TO_PASS_IDENTITY = (
    "pass it with the run, e.g. agent.invoke(inputs, config={'configurable': "
    "{'user_id': 'alice', 'project_id': 'apollo', 'thread_id': 'session-1'}}), "
    "or as the agent's context (context=MyContext(user_id='alice'))"
)


def _get(source: Any, name: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _configurable(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    configurable = (config or {}).get("configurable") if isinstance(config, Mapping) else None
    return configurable if isinstance(configurable, Mapping) else {}


def run_context(config: Mapping[str, Any] | None) -> Any:
    """The context of the LangGraph run ``config`` belongs to, or ``None`` outside a run."""
    return getattr(_configurable(config).get(RUNTIME_KEY), "context", None)


def _same(a: Any, b: Any) -> bool:
    """Two spellings of one id: equal, or equal as text (thread id ``7`` and ``"7"``)."""
    return a == b or (not isinstance(a, bool) and not isinstance(b, bool) and str(a) == str(b))


def read_identity_fields(config: Mapping[str, Any] | None, context: Any = None) -> dict[str, Any]:
    """The raw identity fields of a run (``user_id``, ``project_id``, ``session_id``, ``team_id``,
    ``org_id``), unvalidated (``None`` when absent). ``session_id`` defaults to the thread id.

    ``context`` is the run's context; ``None`` reads it from ``config`` (:func:`run_context`).
    A field named by both with different values raises :class:`IdentityConflictError`.
    """
    configurable = _configurable(config)
    if context is None:
        context = run_context(config)
    fields: dict[str, Any] = {}
    for name in _RUN_FIELDS:
        from_context, from_config = _get(context, name), configurable.get(name)
        if from_context is not None and from_config is not None and not _same(from_context, from_config):
            raise IdentityConflictError(name, from_context, from_config)
        fields[name] = from_context if from_context is not None else from_config
    thread = fields.pop("thread_id")
    if fields["session_id"] is None:
        fields["session_id"] = thread
    return fields


def identity_from(config: Mapping[str, Any] | None, context: Any = None, *, required: bool = True) -> Identity | None:
    """The run's validated :class:`Identity` (see :func:`read_identity_fields`).

    Without a ``user_id`` this raises :class:`MissingIdentityError` saying how to
    pass one, or returns ``None`` when ``required`` is false (memory is then
    simply skipped for the run). A malformed id raises :class:`InvalidInputError`.
    """
    fields = read_identity_fields(config, context)
    if fields["user_id"] is None:
        if not required:
            return None
        raise MissingIdentityError(
            "this run has no user_id, so agent-memory does not know whose memory to use: "
            f"{HOW_TO_PASS_IDENTITY}; or build the middleware with require_user=False to run without memory"
        )
    session = fields["session_id"]
    if session is not None and not isinstance(session, str):
        fields["session_id"] = str(session)  # thread ids are often ints or UUIDs
    try:
        return check_identity(fields["user_id"], fields["project_id"], fields["session_id"], fields["team_id"],
                              fields["org_id"])
    except InvalidInputError as exc:
        detail = str(exc).partition(": ")[2]
        raise InvalidInputError(exc.field, f"{detail} (read from the run's config or context)") from None


def thread_and_user(config: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """``(thread_id, user_id)`` of a checkpointer call, each ``None`` when the call names none.

    The thread is LangGraph's (``configurable["thread_id"]``, as text); the user is read exactly
    as the middleware reads it, from ``configurable`` and the run's context, and validated the
    same way, so the owner the checkpointer checks is the user whose memory the run uses.
    """
    fields = read_identity_fields(config)
    thread = _configurable(config).get("thread_id")
    user = fields["user_id"]
    if user is not None:
        try:
            user = check_id("user_id", user)
        except InvalidInputError as exc:
            detail = str(exc).partition(": ")[2]
            raise InvalidInputError("user_id", f"{detail} (read from the run's config or context)") from None
    return (None if thread is None else str(thread)), user
