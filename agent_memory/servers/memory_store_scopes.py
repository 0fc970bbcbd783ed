"""``memory_store`` scopes to memory levels and store namespaces: pure functions, no I/O.

A protocol scope is ``{project_id, agent_id?, task_id?}``. All three live in the memory of one
of our projects (scope ``"project"``), as LangGraph store items (:mod:`agent_memory.store`)::

    {project_id: P}                          -> ("projects", pid, "memory_store", P)
    {project_id: P, agent_id: A}             -> ("projects", pid, "memory_store", P, "agent", A)
    {project_id: P, task_id: T}              -> ("projects", pid, "memory_store", P, "task", T)
    {project_id: P, agent_id: A, task_id: T} -> ("projects", pid, "memory_store", P, "agent", A, "task", T)

``pid`` (:func:`project_of`) is ``P`` itself when it is a valid project id of ours, spelled as we
store it (``"webshop"``, ``"acme/web"``): then the plugin shares that project's memory and its
members. Otherwise (spaces, unicode we normalize, punctuation, or an id of ours longer than
:data:`MAX_PROJECT_JSON` characters as ASCII JSON, which the store could not address) the
project is *derived*: ``P`` slugged as the reference plugin does, plus ``.`` and a hash of the
plugin's user and ``P``, so no two protocol projects share a project by accident, and two users
naming their projects alike never meet. A derived id can still be computed by anyone who knows both, so the server claims
it for its user and refuses to use one that someone else owns (:mod:`.memory_store`).

The original ids are segments of the namespace, which the store keeps as JSON, so they
round-trip exactly and ids that look alike after any normalization stay apart; namespaces match
by whole segments, so ``acme`` never covers ``acme-corp``. The store keeps a namespace and key
within :data:`~agent_memory.store.namespaces.MAX_KEY_LENGTH` characters of ASCII JSON, where a
non-ASCII character takes six, so an id (or key) longer than :data:`MAX_SEGMENT_JSON` characters
in that form, or one starting with ``#``, is kept as ``#`` and a hash of it (:func:`segment_of`),
and the originals travel in the item's value (:func:`originals`): every id of up to
:data:`MAX_SCOPE_ID_LENGTH` characters, in any script, fits.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..validation import check_scope_name, check_storable, shown

__all__ = [
    "MARKER", "MAX_SCOPE_ID_LENGTH", "MAX_SEGMENT_JSON", "ScopeRef", "check_scope", "is_derived", "key_of",
    "key_from", "namespace_of", "originals", "project_of", "scope_of", "segment_of",
]

#: the namespace segment that marks the plugin's items inside a project's memory
MARKER = "memory_store"
#: the longest project, agent or task id (and key), in characters
MAX_SCOPE_ID_LENGTH = 256
#: the longest id kept as itself in a namespace, in characters of ASCII JSON (quotes not counted)
MAX_SEGMENT_JSON = 128
#: the longest id of ours used as itself for a project, same measure (longer ones are derived).
#: With three ids and a key at 128 and a project of 256, a namespace and key stay under the store's 1,024.
MAX_PROJECT_JSON = 256

_SLUG_DROP = re.compile(r"[^a-z0-9_-]+")
_SCOPE_KEYS = ("project_id", "agent_id", "task_id")


@dataclass(frozen=True, slots=True)
class ScopeRef:
    """A protocol scope with the ids exactly as the caller sent them."""

    project_id: str
    agent_id: str | None = None
    task_id: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"project_id": self.project_id}
        if self.agent_id is not None:
            out["agent_id"] = self.agent_id
        if self.task_id is not None:
            out["task_id"] = self.task_id
        return out


def check_scope_id(field: str, value: Any) -> str:
    """One id of a scope: a non-empty string of storable text, taken exactly as given."""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {shown(value)}")
    if not value:
        raise InvalidInputError(field, "must not be empty")
    if len(value) > MAX_SCOPE_ID_LENGTH:
        raise InvalidInputError(field, f"is {len(value)} characters long; use at most {MAX_SCOPE_ID_LENGTH}")
    check_storable(field, "the id", value)
    return value


def check_scope(field: str, value: Any) -> ScopeRef:
    """A protocol scope object ``{project_id, agent_id?, task_id?}``."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(field, f"must be an object like {{\"project_id\": \"p\"}}, got {shown(value)}")
    unknown = set(value) - set(_SCOPE_KEYS)
    if unknown:
        raise InvalidInputError(field, f"has unknown keys {sorted(map(str, unknown))}; allowed: "
                                       f"{', '.join(_SCOPE_KEYS)}")
    if "project_id" not in value:
        raise InvalidInputError(field, "needs a project_id")
    project = check_scope_id(f"{field}.project_id", value["project_id"])
    agent, task = (None if value.get(name) is None else check_scope_id(f"{field}.{name}", value[name])
                   for name in ("agent_id", "task_id"))
    return ScopeRef(project, agent, task)


def _json_length(text: str) -> int:
    return len(json.dumps(text)) - 2


def is_derived(project_id: str) -> bool:
    """Whether a protocol project id gets a derived project rather than being one of ours."""
    try:
        ours = check_scope_name("project_id", project_id) == project_id
    except InvalidInputError:
        return True
    return not ours or _json_length(project_id) > MAX_PROJECT_JSON


def project_of(project_id: str, user_id: str) -> str:
    """Our project id for a protocol project id used by ``user_id`` (see the module's docstring)."""
    if not is_derived(project_id):
        return project_id
    slug = _SLUG_DROP.sub("-", project_id.lower()).strip("-")[:64].strip("-") or "p"
    return f"{slug}.{hashlib.sha256(json.dumps([user_id, project_id]).encode('ascii')).hexdigest()[:16]}"


def segment_of(value: str) -> str:
    """How an id or key is kept in a namespace: itself, or ``#`` and its hash when it is long
    as ASCII JSON or starts with ``#`` (so no id kept as itself looks like a hash)."""
    if _json_length(value) <= MAX_SEGMENT_JSON and not value.startswith("#"):
        return value
    return "#" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


def key_of(key: str) -> str:
    """The store key of a protocol key."""
    return segment_of(key)


def namespace_of(scope: ScopeRef, user_id: str) -> tuple[str, ...]:
    """The store namespace of a scope (also the prefix of every scope below it)."""
    namespace: tuple[str, ...] = ("projects", project_of(scope.project_id, user_id), MARKER,
                                  segment_of(scope.project_id))
    if scope.agent_id is not None:
        namespace += ("agent", segment_of(scope.agent_id))
    if scope.task_id is not None:
        namespace += ("task", segment_of(scope.task_id))
    return namespace


def originals(scope: ScopeRef, key: str) -> dict[str, str] | None:
    """What an item's value keeps so its scope and key come back exactly: ``None`` when the
    namespace and key hold every id as itself."""
    ids = {**scope.to_json(), "key": key}
    return None if all(segment_of(value) == value for value in ids.values()) else ids


def scope_of(namespace: Sequence[str], user_id: str, ids: Any = None) -> ScopeRef | None:
    """The scope a namespace of :func:`namespace_of` stands for (``None``: not one of ours).

    ``ids``: the :func:`originals` of an item in that namespace or below it, needed when the
    namespace holds an id as its hash (``None`` is answered without them)."""
    if len(namespace) < 4 or namespace[0] != "projects" or namespace[2] != MARKER:
        return None
    ids = ids if isinstance(ids, Mapping) else {}

    def original(field: str, segment: str) -> str | None:
        if not segment.startswith("#"):
            return segment
        value = ids.get(field)
        return value if isinstance(value, str) and segment_of(value) == segment else None

    project = original("project_id", namespace[3])
    if project is None or namespace[1] != project_of(project, user_id):
        return None
    rest = list(namespace[4:])
    agent = task = None
    if rest[:1] == ["agent"] and len(rest) >= 2:
        agent, rest = original("agent_id", rest[1]), rest[2:]
        if agent is None:
            return None
    if rest[:1] == ["task"] and len(rest) >= 2:
        task, rest = original("task_id", rest[1]), rest[2:]
        if task is None:
            return None
    if rest:
        return None
    return ScopeRef(project, agent, task)


def key_from(stored_key: str, ids: Any = None) -> str | None:
    """The protocol key of a store key (``None``: kept as a hash, and ``ids`` do not say it)."""
    if not stored_key.startswith("#"):
        return stored_key
    value = ids.get("key") if isinstance(ids, Mapping) else None
    return value if isinstance(value, str) and key_of(value) == stored_key else None
