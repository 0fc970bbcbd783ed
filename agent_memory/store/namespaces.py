"""Namespaces to memory levels, and store keys: pure functions, no I/O.

A namespace's first segment names a level and its second the id there; what follows is the
caller's own folders::

    ("memories", user_id, *rest)    -> that user's memories       (scope "user")
    ("sessions", session_id, *rest) -> the caller's session memories (scope "session")
    ("projects", project_id, *rest) -> that project's memories    (scope "project")
    ("teams", team_id, *rest)       -> that team's memories       (scope "team")
    ("orgs", org_id, *rest)         -> that org's memories        (scope "org")

A namespace whose first segment is none of these (LangGraph code's own, e.g. ``("docs",
"v1")``) is the caller's own: it lives under their memories, behind the segment
:data:`OWN_MARK` (:func:`own_namespace`; ``("docs", "v1")`` -> ``("memories", user_id, "~",
"docs", "v1")``), and reads give it back as it was written (:func:`as_given`). With no caller
known it is refused, as any namespace is.

An item's key in the database is the JSON array of its namespace and key
(:func:`encode_key`): JSON quotes and escapes every segment, so no segment can end early
and forge another, and a prefix of whole segments is a prefix of the text
(:func:`key_prefix`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import InvalidNamespaceError as LangGraphNamespaceError

from ..errors import InvalidInputError, MissingIdentityError, PermissionDeniedError
from ..models import Identity, Scope
from ..validation import check_id, check_scope_name, check_storable, shown

__all__ = [
    "InvalidNamespaceError",
    "MAX_KEY_LENGTH",
    "NAMESPACE_ROOTS",
    "Target",
    "check_key",
    "check_own_labels",
    "OWN_MARK",
    "as_given",
    "check_segments",
    "own_namespace",
    "encode_key",
    "key_prefix",
    "resolve",
]

#: the first segment of a namespace, per level
NAMESPACE_ROOTS: dict[Scope, str] = {
    Scope.USER: "memories", Scope.SESSION: "sessions", Scope.PROJECT: "projects", Scope.TEAM: "teams",
    Scope.ORG: "orgs",
}
_LEVELS = {root: scope for scope, root in NAMESPACE_ROOTS.items()}

#: the longest encoded key (namespace and key as JSON), in characters
MAX_KEY_LENGTH = 1024
#: the most segments a namespace may have
MAX_DEPTH = 32

_HOW = ("start it with 'memories', 'sessions', 'projects', 'teams' or 'orgs' and the id there, e.g. "
        "('memories', user_id) or ('projects', project_id, 'notes')")


class InvalidNamespaceError(InvalidInputError, LangGraphNamespaceError):
    """A store namespace (or prefix) is malformed or names no level of memory; nothing was
    done. Also LangGraph's ``InvalidNamespaceError`` (and a ``ValueError``), so code written
    for LangGraph's stores catches it as it catches theirs. Defined here, not in
    :mod:`agent_memory.errors`, so that importing the library does not import LangGraph's store."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a namespace (or a prefix of one) lives: who acts (``identity``), on which level
    (``scope``; ``None``: every level the caller may read) and, for a level, with what id."""

    identity: Identity
    scope: Scope | None


def check_segments(field: str, segments: Any) -> tuple[str, ...]:
    """A namespace (or prefix/suffix) as a tuple of non-empty, storable strings."""
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence):
        raise InvalidNamespaceError(field, f"must be a tuple of strings, got {type(segments).__name__}")
    if len(segments) > MAX_DEPTH:
        raise InvalidNamespaceError(field, f"has {len(segments)} segments; use at most {MAX_DEPTH}")
    out = []
    for i, segment in enumerate(segments):
        if not isinstance(segment, str):
            raise InvalidNamespaceError(field, f"segment {i} must be a string, got {shown(segment)}")
        if not segment:
            raise InvalidNamespaceError(field, f"segment {i} is empty; namespaces are made of non-empty strings")
        try:
            check_storable(field, f"segment {i}", segment)
        except InvalidInputError as exc:
            raise InvalidNamespaceError(field, str(exc).removeprefix(f"{field}: ")) from None
        out.append(segment)
    return tuple(out)


#: the segment after ``("memories", user_id)`` under which the caller's namespaces that name no
#: level live (see the module's docstring)
OWN_MARK = "~"


def own_namespace(namespace: tuple[str, ...], caller: Identity | None, field: str = "namespace") -> tuple[str, ...]:
    """Where ``namespace`` lives: itself when it starts with a level (or is empty, or starts
    with ``"*"`` in a listing), else the caller's ``("memories", user_id, "~", *namespace)``.
    Pure; with no caller known, refused with :class:`MissingIdentityError`."""
    if not namespace or namespace[0] in _LEVELS or namespace[0] == "*":
        return namespace
    return ("memories", _need(caller, field).user_id, OWN_MARK, *namespace)


def check_own_labels(namespace: tuple[str, ...]) -> None:
    """LangGraph's rules for a namespace given to ``put``: no label holds a period, and the first
    is not ``"langgraph"`` (reserved). Ours keeps them for the namespaces that name no level
    (LangGraph code's own, which LangGraph's stores would refuse); a level's id may hold a period
    (``("memories", "alice@example.com")``). As in LangGraph, ``batch`` does not check them."""
    if namespace and namespace[0] not in _LEVELS:
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError("namespace", "the first label 'langgraph' is reserved (as in LangGraph's "
                                                     "stores); start the namespace with another one")
        for i, segment in enumerate(namespace):
            if "." in segment:
                raise InvalidNamespaceError("namespace", f"segment {i} ({segment!r}) holds a period, which "
                                                         "LangGraph's stores refuse in namespace labels; use "
                                                         "another character, or start the namespace with a level")


def as_given(namespace: tuple[str, ...], caller: Identity | None) -> tuple[str, ...]:
    """The reverse of :func:`own_namespace`, for what reads answer: the caller's own namespaces
    that name no level are given back as they were written; every other namespace as it is."""
    if (caller is not None and len(namespace) > 3 and namespace[0] == "memories" and namespace[2] == OWN_MARK
            and namespace[1] == caller.user_id):
        return namespace[3:]
    return namespace


def check_key(key: Any) -> str:
    """An item's key: a non-empty, storable string."""
    if not isinstance(key, str):
        raise InvalidInputError("key", f"must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidInputError("key", "must not be empty")
    check_storable("key", "the key", key)
    return key


def encode_key(namespace: Sequence[str], key: str) -> str:
    """The database key of ``key`` in ``namespace``: their JSON array (one spelling per item)."""
    text = json.dumps([*namespace, key])
    if len(text) > MAX_KEY_LENGTH:
        raise InvalidInputError("key", f"the namespace and key are {len(text)} characters as JSON; keep them under "
                                       f"{MAX_KEY_LENGTH}")
    return text


def key_prefix(prefix: Sequence[str]) -> str:
    """The text every database key under ``prefix`` (whole segments) starts with:
    ``("memories", "al")`` gives ``["memories", "al", `` which ``["memories", "alice", ...`` does
    not start with."""
    return json.dumps(list(prefix))[:-1] + ", "


def _level(namespace: Sequence[str], field: str) -> Scope:
    scope = _LEVELS.get(namespace[0])
    if scope is None:
        raise InvalidNamespaceError(field, f"{namespace[0]!r} is not a level of memory: {_HOW}")
    return scope


def resolve(namespace: Sequence[str], caller: Identity | None, *, trusted: bool, exact: bool,
            field: str = "namespace") -> Target:
    """Who acts on ``namespace`` and on which level (``exact``: an item's namespace, which
    needs a level and its id; otherwise a search prefix, which may stop earlier).

    The caller is the run's identity (or the store's fixed one). ``("memories", uid)`` of another
    user is refused unless the store is ``trusted`` (server code that authenticated the user and
    names them in the namespace: then it acts as ``uid``). Sessions, projects, teams and orgs act
    as the caller with that id, under the same access rules as every other entry point.
    """
    if exact and len(namespace) < 2:
        raise InvalidNamespaceError(field, f"{tuple(namespace)!r} names no level and id: {_HOW}")
    if not namespace:
        return Target(_need(caller, field), None)
    scope = _level(namespace, field)
    if len(namespace) == 1:
        if scope is Scope.SESSION:
            caller = _need(caller, field)
            if caller.session_id is None:
                raise InvalidInputError(field, "('sessions',) needs a session in the run: name one, "
                                               "('sessions', session_id)")
        return Target(_need(caller, field), scope)
    where = f"{field}[1]"
    if scope is Scope.USER:
        user = check_id(where, namespace[1])
        if caller is not None and caller.user_id == user:
            return Target(caller, scope)
        if not trusted:
            if caller is None:
                raise MissingIdentityError(
                    f"{field}: the store does not know who is calling (no user_id in the run's config or "
                    "context, and none given to AgentMemoryStore); pass one, or build the store with "
                    "trusted=True if your server code chooses the namespaces")
            raise PermissionDeniedError(
                f"{field}: {tuple(namespace[:2])!r} is another user's memory; a store acts for the run's user "
                f"({caller.user_id!r}) unless it was built with trusted=True")
        return Target(Identity(user_id=user), scope)
    caller = _need(caller, field)
    if scope is Scope.SESSION:
        return Target(dataclasses.replace(caller, session_id=check_id(where, namespace[1])), scope)
    scope_id = check_scope_name(where, namespace[1])
    if scope_id != namespace[1]:
        raise InvalidInputError(where, f"spell the id as it is stored: {scope_id!r}")
    name = {Scope.PROJECT: "project_id", Scope.TEAM: "team_id", Scope.ORG: "org_id"}[scope]
    return Target(dataclasses.replace(caller, **{name: scope_id}), scope)


def _need(caller: Identity | None, field: str) -> Identity:
    if caller is None:
        raise MissingIdentityError(
            f"{field}: the store does not know who is calling: pass user_id in the run's config or context "
            "(config={'configurable': {'user_id': 'alice'}}), or give AgentMemoryStore(memory, caller=...)")
    return caller
