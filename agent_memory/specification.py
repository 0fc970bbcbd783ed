"""The specification's service methods, for code written against the memory design this package implements.

The design names seven methods on ``MemoryService``: ``add_explicit_memory``,
``search_memories``, ``validate_memory``, ``check_duplicate``, ``check_rate_limit``,
``get_profile_for_agent`` and ``format_memories_for_prompt``, each taking the caller's
``user_id`` / ``project_id`` / ``session_id`` as keywords. Code ported from that design
finds them here. Each is one call of the handle (``service.for_user(...)``): there is no
second implementation, so the gate, the permissions and the tenancy are the handle's.
The two that need no identity and no I/O (``validate_memory`` and
``format_memories_for_prompt``) live on both services already (``service._Common``).

:class:`SpecificationMethods` is mixed into :class:`~agent_memory.MemoryService`,
:class:`AsyncSpecificationMethods` into :class:`~agent_memory.AsyncMemoryService`
(the same signatures, each ``async def`` returning what the blocking one returns).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .models import MemoryItem, Rejection, SearchResult
from .profiles.store import AgentProfiles

if TYPE_CHECKING:
    from .handles import AsyncMemoryHandle, MemoryHandle
    from .models import Identity

__all__ = ["SPECIFICATION_METHODS", "AsyncSpecificationMethods", "SpecificationMethods"]

#: the specification's method names, in its order (all on both services)
SPECIFICATION_METHODS = (
    "add_explicit_memory", "search_memories", "validate_memory", "check_duplicate", "check_rate_limit",
    "get_profile_for_agent", "format_memories_for_prompt",
)


class SpecificationMethods:
    """The specification's methods on :class:`~agent_memory.MemoryService` (blocking)."""

    def for_user(
        self, user_id: str | Identity, *, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryHandle:
        raise NotImplementedError  # pragma: no cover - the service defines it

    def add_explicit_memory(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        memory_type: str = "fact", scope: str = "user", confidence: float = 1.0, source: str = "user",
        source_id: str | None = None, visibility: str = "members", metadata: Mapping[str, Any] | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryItem | Rejection:
        """Save a memory the user asked for ("remember that ..."): the gate (length, confidence,
        secrets), deduplication (the existing item comes back with ``deduplicated=True``), then
        the write. A :class:`Rejection` says why nothing was stored. ``scope`` ``"project"``
        needs ``project_id`` and a role that may write it (:class:`PermissionDeniedError`).

        The handle's :meth:`~agent_memory.handles.MemoryHandle.add`, for ``user_id`` in
        ``project_id`` / ``session_id``."""
        return self.for_user(user_id, project_id=project_id, session_id=session_id, team_id=team_id,
                             org_id=org_id).add(
            content, memory_type=memory_type, scope=scope, confidence=confidence, source=source,
            source_id=source_id, visibility=visibility, metadata=metadata)

    def search_memories(
        self, query: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        k: int = 5, memory_type: Any = None, scope: Any = None, min_relevance: float | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> builtins.list[SearchResult]:
        """Semantic retrieval over every level ``user_id`` may read (session, user, project,
        teams, orgs), merged and ranked (similarity, confidence and the level's priority), the
        top ``k`` best first. ``memory_type`` / ``scope``: one value or a list.

        The handle's :meth:`~agent_memory.handles.MemoryHandle.search`."""
        return self.for_user(user_id, project_id=project_id, session_id=session_id, team_id=team_id,
                             org_id=org_id).search(
            query, k=k, memory_type=memory_type, scope=scope, min_relevance=min_relevance)

    def check_duplicate(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        scope: str = "user", team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryItem | None:
        """The active memory of ``scope`` that ``content`` duplicates (cosine similarity at or
        above ``MEMORY_DUPLICATE_THRESHOLD``, 0.85), or ``None`` when it is new.

        The handle's :meth:`~agent_memory.handles.MemoryHandle.find_duplicate`."""
        return self.for_user(user_id, project_id=project_id, session_id=session_id, team_id=team_id,
                             org_id=org_id).find_duplicate(content, scope=scope)

    def check_rate_limit(
        self, *, user_id: str, session_id: str, project_id: str | None = None,
    ) -> bool:
        """Whether the session may run one more automatic extraction now: ``True`` while it had
        fewer than ``MEMORY_MAX_EXTRACTIONS`` runs (3) in the last
        ``MEMORY_EXTRACTION_WINDOW_HOURS`` (24). It only looks; nothing is counted. Without a
        session (``session_id=None``) nothing is counted either, so it answers ``True``.

        The handle's :meth:`~agent_memory.handles.MemoryHandle.extraction_budget` (how many are left)."""
        left = self.for_user(user_id, project_id=project_id, session_id=session_id).extraction_budget()
        return left is None or left > 0

    def get_profile_for_agent(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
    ) -> AgentProfiles:
        """The user profile and (with ``project_id``) the project profile for the system prompt:
        ``.user_text`` and ``.project_text`` are the sections to append (empty fields left out).

        The handle's :meth:`~agent_memory.handles.MemoryHandle.profiles`."""
        return self.for_user(user_id, project_id=project_id, session_id=session_id).profiles()


class AsyncSpecificationMethods:
    """The specification's methods on :class:`~agent_memory.AsyncMemoryService`: as
    :class:`SpecificationMethods`, each awaited."""

    def for_user(
        self, user_id: str | Identity, *, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> AsyncMemoryHandle:
        raise NotImplementedError  # pragma: no cover - the service defines it

    async def add_explicit_memory(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        memory_type: str = "fact", scope: str = "user", confidence: float = 1.0, source: str = "user",
        source_id: str | None = None, visibility: str = "members", metadata: Mapping[str, Any] | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryItem | Rejection:
        """:meth:`SpecificationMethods.add_explicit_memory`, awaited."""
        return await self.for_user(user_id, project_id=project_id, session_id=session_id, team_id=team_id,
                                   org_id=org_id).add(
            content, memory_type=memory_type, scope=scope, confidence=confidence, source=source,
            source_id=source_id, visibility=visibility, metadata=metadata)

    async def search_memories(
        self, query: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        k: int = 5, memory_type: Any = None, scope: Any = None, min_relevance: float | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> builtins.list[SearchResult]:
        """:meth:`SpecificationMethods.search_memories`, awaited."""
        return await self.for_user(user_id, project_id=project_id, session_id=session_id, team_id=team_id,
                                   org_id=org_id).search(
            query, k=k, memory_type=memory_type, scope=scope, min_relevance=min_relevance)

    async def check_duplicate(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        scope: str = "user", team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryItem | None:
        """:meth:`SpecificationMethods.check_duplicate`, awaited."""
        return await self.for_user(user_id, project_id=project_id, session_id=session_id, team_id=team_id,
                                   org_id=org_id).find_duplicate(content, scope=scope)

    async def check_rate_limit(
        self, *, user_id: str, session_id: str, project_id: str | None = None,
    ) -> bool:
        """:meth:`SpecificationMethods.check_rate_limit`, awaited."""
        left = await self.for_user(user_id, project_id=project_id, session_id=session_id).extraction_budget()
        return left is None or left > 0

    async def get_profile_for_agent(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
    ) -> AgentProfiles:
        """:meth:`SpecificationMethods.get_profile_for_agent`, awaited."""
        return await self.for_user(user_id, project_id=project_id, session_id=session_id).profiles()
