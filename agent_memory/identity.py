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

Under LangGraph Platform (``langgraph dev``, a deployment) the platform's auth handler
authenticates each request and puts the user in ``configurable["langgraph_auth_user"]``. That
user is a source above the other two: its ``identity`` is the ``user_id``, and its
``project_id``, ``team_id`` and ``org_id`` fields, when the handler returns them, are those ids
(:data:`AUTH_CLAIMS`). A client sends ``configurable`` and ``context`` itself, so a ``user_id``
(or a claimed id) there that differs from the authenticated one is refused with
:class:`IdentityConflictError`, never preferred: an authenticated user cannot speak for another
by naming them. Ids the auth user does not claim (a project it left open, the session, the
thread) come from the run as usual.

langmem's tools fill their namespaces from ``configurable["langgraph_user_id"]``; that key is
read as a spelling of ``user_id`` (the two must agree when both are given), so a langmem tool
invoked directly with ``config`` outside a graph acts for the same user as its namespace.

The checkpointer only ever sees ``config``; LangGraph puts the run's
``Runtime`` (and so its context) there under ``__pregel_runtime`` before the
first checkpoint is loaded, so the checkpointer reads the context from it
(:func:`run_context`). A call outside a run (``agent.get_state(config)``) has
no context and reads ``configurable`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from .errors import IdentityConflictError, InvalidInputError, MissingIdentityError
from .models import Identity
from .validation import check_id, check_identity

__all__ = [
    "AUTH_CLAIMS",
    "AUTH_USER_KEY",
    "HOW_TO_PASS_IDENTITY",
    "IDENTITY_FIELDS",
    "RUNTIME_KEY",
    "authenticated_fields",
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
#: where LangGraph Platform puts the user its auth handler authenticated, in ``config["configurable"]``
AUTH_USER_KEY = "langgraph_auth_user"
#: the platform's plain-text copy of that user's identity (used when the user object is absent)
_AUTH_USER_ID_KEY = "langgraph_auth_user_id"
#: the authenticated user's fields read as ids, besides its ``identity`` (the ``user_id``)
AUTH_CLAIMS = ("project_id", "team_id", "org_id")
#: langmem's name for the user in ``configurable``, read as a spelling of ``user_id``
_LANGMEM_USER_KEY = "langgraph_user_id"
_AUTH_SOURCE = "the platform's authenticated user (config['configurable']['langgraph_auth_user'])"

HOW_TO_PASS_IDENTITY = (
    "pass it with the run, e.g. agent.invoke(inputs, config={'configurable': "
    "{'user_id': 'alice', 'project_id': 'apollo', 'thread_id': 'session-1'}}), "
    "or as the agent's context (context=MyContext(user_id='alice')); on LangGraph Platform, an auth handler's "
    "user is the run's user"
)


def _get(source: Any, name: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _claim(user: Any, name: str) -> Any:
    """A field of an authenticated user: a mapping's key, an item of the platform's user proxy
    (custom fields the auth handler returned), or an attribute (``BaseUser.identity``)."""
    if isinstance(user, Mapping):
        return user.get(name)
    try:
        return user[name]
    except Exception:  # noqa: BLE001 - not subscriptable, or no such item: try the attribute
        pass
    try:
        return getattr(user, name, None)
    except Exception:  # noqa: BLE001 - a BaseUser property may raise NotImplementedError
        return None


def authenticated_fields(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the platform's auth handler established for this run: ``{"user_id": identity,
    "project_id": ..., "team_id": ..., "org_id": ...}`` (``None`` where the user claims none), or
    ``None`` when the run has no authenticated user."""
    configurable = _configurable(config)
    user = configurable.get(AUTH_USER_KEY)
    identity = _claim(user, "identity") if user is not None else None
    if identity is None:
        identity = configurable.get(_AUTH_USER_ID_KEY)
    if identity is None:
        return None
    if not isinstance(identity, str) or not identity:
        raise InvalidInputError("user_id", f"the platform's authenticated user has identity {identity!r}, which is "
                                           "not a user id: make the auth handler return a non-empty string identity")
    claims: dict[str, Any] = {"user_id": identity}
    for name in AUTH_CLAIMS:
        claims[name] = _claim(user, name) if user is not None else None
    return claims


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
        if name == "user_id":
            from_config = _config_user(configurable)
        if from_context is not None and from_config is not None and not _same(from_context, from_config):
            raise IdentityConflictError(name, from_context, from_config)
        fields[name] = from_context if from_context is not None else from_config
    authenticated = authenticated_fields(config)
    for name, claimed in (authenticated or {}).items():
        if claimed is None:
            continue
        given = fields[name]
        if given is not None and not _same(claimed, given):
            raise IdentityConflictError(
                name, claimed, given, sources=(_AUTH_SOURCE, "the run's config or context"),
                advice=f"an authenticated user's {name} cannot be chosen by the run: leave {name} out of the run "
                       "(it is read from the authenticated user) or pass the same value")
        fields[name] = claimed
    thread = fields.pop("thread_id")
    if fields["session_id"] is None:
        fields["session_id"] = thread
    return fields


def _config_user(configurable: Mapping[str, Any]) -> Any:
    """``configurable``'s user: ``user_id``, or langmem's ``langgraph_user_id`` (they must agree)."""
    user, langmem_user = configurable.get("user_id"), configurable.get(_LANGMEM_USER_KEY)
    if user is not None and langmem_user is not None and not _same(user, langmem_user):
        raise IdentityConflictError(
            "user_id", langmem_user, user,
            sources=("config['configurable']['langgraph_user_id']", "config['configurable']['user_id']"),
            advice="pass the user once, or the same value under both keys")
    return user if user is not None else langmem_user


@overload
def identity_from(config: Mapping[str, Any] | None, context: Any = None, *,
                  required: Literal[True] = True) -> Identity: ...
@overload
def identity_from(config: Mapping[str, Any] | None, context: Any = None, *, required: bool) -> Identity | None: ...
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
