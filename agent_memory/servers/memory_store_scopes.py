"""``memory_store`` scopes to memory levels and store namespaces: pure functions, no I/O.

A protocol scope is ``{project_id, agent_id?, task_id?}``. All three live in the memory of one
of our projects (scope ``"project"``), as LangGraph store items (:mod:`agent_memory.store`)::

    {project_id: P}                          -> ("projects", pid, "memory_store", P)
    {project_id: P, agent_id: A}             -> ("projects", pid, "memory_store", P, "agent", A)
    {project_id: P, task_id: T}              -> ("projects", pid, "memory_store", P, "task", T)
    {project_id: P, agent_id: A, task_id: T} -> ("projects", pid, "memory_store", P, "agent", A, "task", T)

``pid`` (:func:`project_of`) is ``P`` itself when it is a valid project id of ours, spelled as we
store it (``"webshop"``, ``"acme/web"``): then the plugin shares that project's memory and its
members. Otherwise (spaces, unicode we normalize, punctuation) it is ``P`` slugged as the
reference plugin does, plus ``.`` and a hash of ``P``, so no two protocol projects share a
project by accident. The original ids are segments of the namespace, which the store keeps as
JSON, so they round-trip exactly and ids that look alike after any normalization stay apart;
namespaces match by whole segments, so ``acme`` never covers ``acme-corp``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..validation import check_scope_name, check_storable, shown

__all__ = ["MARKER", "MAX_SCOPE_ID_LENGTH", "ScopeRef", "check_scope", "namespace_of", "project_of", "scope_of"]

#: the namespace segment that marks the plugin's items inside a project's memory
MARKER = "memory_store"
#: the longest project, agent or task id, in characters
MAX_SCOPE_ID_LENGTH = 256

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


def project_of(project_id: str) -> str:
    """Our project id for a protocol project id (see the module's docstring)."""
    try:
        if check_scope_name("project_id", project_id) == project_id:
            return project_id
    except InvalidInputError:
        pass
    slug = _SLUG_DROP.sub("-", project_id.lower()).strip("-")[:64].strip("-") or "p"
    return f"{slug}.{hashlib.sha256(project_id.encode('utf-8')).hexdigest()[:16]}"


def namespace_of(scope: ScopeRef) -> tuple[str, ...]:
    """The store namespace of a scope (also the prefix of every scope below it)."""
    namespace: tuple[str, ...] = ("projects", project_of(scope.project_id), MARKER, scope.project_id)
    if scope.agent_id is not None:
        namespace += ("agent", scope.agent_id)
    if scope.task_id is not None:
        namespace += ("task", scope.task_id)
    return namespace


def scope_of(namespace: Sequence[str]) -> ScopeRef | None:
    """The scope a namespace of :func:`namespace_of` stands for (``None``: not one of ours)."""
    if len(namespace) < 4 or namespace[0] != "projects" or namespace[2] != MARKER:
        return None
    project = namespace[3]
    if namespace[1] != project_of(project):
        return None
    rest = list(namespace[4:])
    agent = task = None
    if rest[:1] == ["agent"] and len(rest) >= 2:
        agent, rest = rest[1], rest[2:]
    if rest[:1] == ["task"] and len(rest) >= 2:
        task, rest = rest[1], rest[2:]
    if rest:
        return None
    return ScopeRef(project, agent, task)
