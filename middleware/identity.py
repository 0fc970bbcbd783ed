"""Whose memory a run uses: read from the run's config or context, never from the model.

A run names its user (and optionally project, session, team and org) in
``config["configurable"]`` or in the agent's context object (a dataclass,
pydantic model or mapping with ``user_id``/``project_id``/``session_id``/
``team_id``/``org_id`` attributes). The session defaults to the run's ``thread_id``, so one thread
is one session. Context wins over configurable when both are given, because
the context is the typed, per-run channel LangGraph recommends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_memory.errors import InvalidInputError, MissingIdentityError
from agent_memory.models import Identity
from agent_memory.validation import check_identity

__all__ = ["HOW_TO_PASS_IDENTITY", "identity_from", "read_identity_fields"]

_FIELDS = ("user_id", "project_id", "session_id", "team_id", "org_id")

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


def read_identity_fields(config: Mapping[str, Any] | None, context: Any = None) -> dict[str, Any]:
    """The raw identity fields of a run (``user_id``, ``project_id``, ``session_id``, ``team_id``,
    ``org_id``), unvalidated (``None`` when absent)."""
    configurable = (config or {}).get("configurable") or {}
    fields = {}
    for name in _FIELDS:
        value = _get(context, name)
        fields[name] = value if value is not None else configurable.get(name)
    if fields["session_id"] is None:
        fields["session_id"] = _get(context, "thread_id") or configurable.get("thread_id")
    return fields


def identity_from(config: Mapping[str, Any] | None, context: Any = None, *, required: bool = True) -> Identity | None:
    """The run's validated :class:`Identity`.

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
