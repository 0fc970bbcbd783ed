"""The package's value types: enums for the closed vocabularies and frozen records.

These carry no behaviour beyond small conveniences; validation of what a
caller passes in lives in :mod:`agent_memory.validation`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

__all__ = [
    "Identity",
    "MemoryItem",
    "MemoryStats",
    "MemoryType",
    "NewMemory",
    "Rejection",
    "RejectionReason",
    "Scope",
    "SearchResult",
    "Source",
    "Status",
    "Visibility",
]


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:  # "fact", not "MemoryType.FACT", in messages and prompts
        return self.value

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class MemoryType(_StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    SKILL = "skill"
    HABIT = "habit"
    EVENT = "event"
    CONTEXT = "context"
    CONSTRAINT = "constraint"
    DECISION = "decision"


class Scope(_StrEnum):
    """Where a memory applies; its ``scope_id`` is the matching id of the caller."""

    SESSION = "session"
    PROJECT = "project"
    USER = "user"


class Source(_StrEnum):
    USER = "user"
    AI = "ai"
    KNOWLEDGE_BASE = "knowledge_base"
    PROJECT_RESOURCE = "project_resource"


class Visibility(_StrEnum):
    """Who may read a project memory. User and session memories are always private to their owner."""

    PUBLIC = "public"
    MEMBERS = "members"
    OWNER_ONLY = "owner_only"


class Status(_StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    SUPERSEDED = "superseded"


class RejectionReason(_StrEnum):
    EMPTY = "empty"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    LOW_CONFIDENCE = "low_confidence"
    SENSITIVE = "sensitive"
    RATE_LIMITED = "rate_limited"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking. Always comes from the run's configuration, never from a model.

    ``project_id`` and ``session_id`` are optional: without them the caller
    simply has no project or session memories.
    """

    user_id: str
    project_id: str | None = None
    session_id: str | None = None

    def scope_id(self, scope: Scope) -> str | None:
        """The id a memory of ``scope`` written by this caller is filed under."""
        if scope is Scope.USER:
            return self.user_id
        if scope is Scope.PROJECT:
            return self.project_id
        return self.session_id


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to be written: what a caller proposes, already validated."""

    content: str
    memory_type: MemoryType = MemoryType.FACT
    scope: Scope = Scope.USER
    confidence: float = 1.0
    source: Source = Source.USER
    source_id: str | None = None
    visibility: Visibility = Visibility.MEMBERS
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A stored memory, as read back from the database.

    ``deduplicated`` is not stored: it is True when a save matched an existing
    active item, which is what the save returned instead of writing a second row.
    """

    id: UUID
    content: str
    memory_type: MemoryType
    scope: Scope
    scope_id: str
    user_id: str
    project_id: str | None
    session_id: str | None
    source: Source
    source_id: str | None
    confidence: float
    visibility: Visibility
    status: Status
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None
    access_count: int
    metadata: dict[str, Any]
    deduplicated: bool = False


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One ranked hit. ``score`` is the final ranking score; its parts are kept for inspection."""

    item: MemoryItem
    score: float
    similarity: float
    keyword: float

    @property
    def id(self) -> UUID:
        return self.item.id

    @property
    def content(self) -> str:
        return self.item.content


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why the gate refused a memory. Nothing was written.

    ``message`` is safe to show to a user or a model: for sensitive content it
    names the kind of secret, never the secret.
    """

    reason: RejectionReason
    message: str
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """What a caller's memory holds (only what the caller may see)."""

    total: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    by_status: dict[str, int]
    last_write: datetime | None
    extractions_remaining: int | None
    storage_bytes: int
