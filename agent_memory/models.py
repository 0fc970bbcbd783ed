"""The package's value types: enums for the closed vocabularies and frozen records.

These carry no behaviour beyond small conveniences; validation of what a
caller passes in lives in :mod:`agent_memory.validation`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

__all__ = [
    "MEMORY_TYPE_NAME",
    "ROLES",
    "SHARED_SCOPES",
    "Conflict",
    "Decision",
    "DecisionMethod",
    "Identity",
    "InjectedTurn",
    "Membership",
    "MemoryItem",
    "MemoryStats",
    "MemoryType",
    "MemoryVersion",
    "NewMemory",
    "Proposal",
    "RecallCount",
    "Rejection",
    "RejectionReason",
    "Retention",
    "Resource",
    "ResourceKind",
    "Role",
    "Scope",
    "SearchResult",
    "Source",
    "Status",
    "Visibility",
]


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:  # "fact", not "MemoryType.FACT", in messages and prompts
        return str(self.value)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


#: what the name of a memory type looks like, built-in or custom (``MemoryConfig.custom_memory_types``)
MEMORY_TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{1,31}")


class MemoryType(_StrEnum):
    """What kind of memory an item is: the eight built-in types, and the custom types a
    deployment adds (``MemoryConfig.custom_memory_types``). A custom type is a member made on
    first use (``MemoryType("incident")``), so a stored memory of any well-formed type reads
    back whatever the reading process's config says; which types a caller may *write* or filter
    by is checked against the config (:mod:`agent_memory.memory_types`). Iterating the class
    gives the built-in ones."""

    PREFERENCE = "preference"
    FACT = "fact"
    SKILL = "skill"
    HABIT = "habit"
    EVENT = "event"
    CONTEXT = "context"
    CONSTRAINT = "constraint"
    DECISION = "decision"

    @classmethod
    def _missing_(cls, value: object) -> MemoryType | None:
        if not isinstance(value, str) or MEMORY_TYPE_NAME.fullmatch(value) is None:
            return None
        member = str.__new__(cls, value)
        member._name_ = value.upper()
        member._value_ = value
        return cls._value2member_map_.setdefault(value, member)  # type: ignore[return-value]

    @property
    def builtin(self) -> bool:
        """Whether this is one of the eight built-in types (not a deployment's custom type)."""
        return self._name_ in type(self).__members__


class Scope(_StrEnum):
    """Where a memory applies (its *level*); its ``scope_id`` is the matching id of the caller.

    Session, user and project memories are the caller's own level; team and org memories are
    shared by their members and rank below them (see ``MemoryConfig.scope_priority``).
    """

    SESSION = "session"
    PROJECT = "project"
    USER = "user"
    TEAM = "team"
    ORG = "org"


#: the scopes that have members and roles (a user or session belongs to one person)
SHARED_SCOPES = (Scope.PROJECT, Scope.TEAM, Scope.ORG)


class Role(_StrEnum):
    """A member's role in a project (owner, admin, editor, viewer), a team (lead, member) or an
    org (admin, member). What each may do is :mod:`agent_memory.access`'s permission matrix."""

    OWNER = "owner"
    ADMIN = "admin"
    EDITOR = "editor"
    VIEWER = "viewer"
    LEAD = "lead"
    MEMBER = "member"


#: the roles each shared scope knows, most powerful first
ROLES: dict[Scope, tuple[Role, ...]] = {
    Scope.PROJECT: (Role.OWNER, Role.ADMIN, Role.EDITOR, Role.VIEWER),
    Scope.TEAM: (Role.LEAD, Role.MEMBER),
    Scope.ORG: (Role.ADMIN, Role.MEMBER),
}


class Source(_StrEnum):
    """Who or what a memory came from; ``source_id`` then names the :class:`Resource` when there is one.

    USER: the user said it through the API. AI: the agent saved it (``memory_save``).
    CONVERSATION: extracted automatically from a session's conversation.
    KNOWLEDGE_BASE / PROJECT_RESOURCE: taken from a document or a project resource.
    """

    USER = "user"
    AI = "ai"
    KNOWLEDGE_BASE = "knowledge_base"
    PROJECT_RESOURCE = "project_resource"
    CONVERSATION = "conversation"


class ResourceKind(_StrEnum):
    """The raw material memories come from (layer 1 of long-term memory)."""

    CONVERSATION = "conversation"
    DOCUMENT = "document"
    PROJECT_RESOURCE = "project_resource"


class Decision(_StrEnum):
    """What consolidation did with a proposed memory, given the similar ones already stored.

    ADD: new. UPDATE: the same fact with more detail, revised in place (old wording kept in its
    history). SUPERSEDE: it contradicts an older item, which becomes ``superseded``. NONE: known.
    """

    ADD = "add"
    UPDATE = "update"
    SUPERSEDE = "supersede"
    NONE = "none"


class DecisionMethod(_StrEnum):
    """Who made a consolidation decision: the configured LLM, or similarity thresholds without one."""

    LLM = "llm"
    SIMILARITY = "similarity"
    USER = "user"


class Visibility(_StrEnum):
    """Who may read a shared memory. PUBLIC: the project's members and everyone the project is
    shared with; MEMBERS: the members of its project, team or org; OWNER_ONLY: its creator.
    User and session memories are always private to their owner."""

    PUBLIC = "public"
    MEMBERS = "members"
    OWNER_ONLY = "owner_only"


class Retention(_StrEnum):
    """What maintenance (``MemoryService.maintain``) may do with a memory. KEEP: never archive
    it; DECAY: archive it once its salience has faded and it went unused, where the operator
    turned that on (``archive_below``); EPHEMERAL: archive it once it went unused for
    ``ephemeral_days``."""

    KEEP = "keep"
    DECAY = "decay"
    EPHEMERAL = "ephemeral"


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
    DUPLICATE = "duplicate"
    NOT_PERMITTED = "not_permitted"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking. Always comes from the run's configuration, never from a model.

    ``project_id`` and ``session_id`` are optional: without them the caller
    simply has no project or session memories. Team and org memories are read from every
    team and org the user is a member of, or only from ``team_id``/``org_id`` when given;
    those two also name where a team or org memory is written.
    """

    user_id: str
    project_id: str | None = None
    session_id: str | None = None
    team_id: str | None = None
    org_id: str | None = None

    def kwargs(self) -> dict[str, str | None]:
        """The identity as the keyword arguments every service method takes."""
        return {"user_id": self.user_id, "project_id": self.project_id, "session_id": self.session_id,
                "team_id": self.team_id, "org_id": self.org_id}

    def scope_id(self, scope: Scope) -> str | None:
        """The id a memory of ``scope`` written by this caller is filed under."""
        if scope is Scope.USER:
            return self.user_id
        if scope is Scope.PROJECT:
            return self.project_id
        if scope is Scope.TEAM:
            return self.team_id
        if scope is Scope.ORG:
            return self.org_id
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
    key: str | None = None  # unique in its scope: put by key replaces, get by key finds
    expires_at: datetime | None = None  # invisible to every read from then on, deleted by a sweep
    retention: Retention = Retention.DECAY
    valid_from: datetime | None = None  # when the fact began to hold (event time); None: when it is recorded
    context: str | None = None  # the text around it where it was learned (neighbouring turns or passages)
    position: int | None = None  # its place in its source (``source_id``): a transcript's turn number


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
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: UUID | None = None
    version: int = 1
    key: str | None = None
    expires_at: datetime | None = None
    retention: Retention = Retention.DECAY
    recorded_at: datetime | None = None  # record time: when the memory learned the fact
    known_to: datetime | None = None  # record time: when it stopped holding it (superseded)
    context: str | None = None  # the text around it where it was learned (None: added by hand)
    position: int | None = None  # its place in its source (``source_id``), e.g. a transcript's turn


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
    def level(self) -> Scope:
        """The level the memory lives at (session, user, project, team or org)."""
        return self.item.scope

    @property
    def scope_id(self) -> str:
        return self.item.scope_id

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
class RecallCount:
    """One memory and how often it was recalled (found by a search or injected), and when last;
    ``state``: ``candidate``, ``active`` or ``core`` (ten recalls an hour or more apart; never
    faded), as :mod:`agent_memory.lifecycle` says."""

    memory_id: UUID
    content: str
    recalls: int
    last_used: datetime | None
    state: str = "candidate"


@dataclass(frozen=True, slots=True)
class InjectedTurn:
    """What the agent middleware put in the prompt in one turn of the session (the memories the
    caller may still see; ``count`` all of them)."""

    at: datetime
    count: int
    memories: tuple[RecallCount, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """What a caller's memory holds (only what the caller may see), and what it is doing.

    recalls / last_used: how often the active memories were recalled, and the last time one was;
    most_recalled / least_recalled: the three recalled most and least. With a session:
    extractions_remaining and extraction_runs (runs left and used in the window),
    extraction_waits (times a run was due but the runs were used up), turns_waiting (messages
    kept for the next run) and recently_injected (what the middleware injected, newest last).
    """

    total: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    by_status: dict[str, int]
    last_write: datetime | None
    extractions_remaining: int | None
    storage_bytes: int
    recalls: int = 0
    last_used: datetime | None = None
    most_recalled: tuple[RecallCount, ...] = ()
    least_recalled: tuple[RecallCount, ...] = ()
    extraction_runs: int | None = None
    extraction_waits: int = 0
    turns_waiting: int = 0
    recently_injected: tuple[InjectedTurn, ...] = ()


@dataclass(frozen=True, slots=True)
class Proposal:
    """A memory an extractor proposes from a conversation, before the gate and consolidation.

    ``evidence`` is the text it was read from, kept for the record (never injected).
    """

    content: str
    memory_type: MemoryType = MemoryType.FACT
    scope: Scope = Scope.USER
    confidence: float = 0.9
    evidence: str | None = None
    valid_from: datetime | None = None  # when the fact began to hold, if the user said so


@dataclass(frozen=True, slots=True)
class Resource:
    """Raw material memories come from: a session's conversation, a document, a project resource.

    A conversation's ``content`` is the transcript extraction has read so far, and ``cursor``
    the id of the last message it read.
    """

    id: UUID
    kind: ResourceKind
    user_id: str
    scope: Scope
    scope_id: str
    project_id: str | None
    session_id: str | None
    external_id: str | None
    title: str | None
    content: str
    metadata: dict[str, Any]
    cursor: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """One step of a memory's history: a wording it had, or an item of a supersession chain.

    ``current`` is True for the wording an item has now. ``valid_from``/``valid_to`` bound when
    the fact held (``valid_to`` None: still holds); ``recorded_until`` is when this wording was
    replaced by an UPDATE (None for the current wording). ``visibility``: who could read this
    wording while it held (a history shows a reader only the wordings they could read then).

    ``change``, ``decided_by``, ``reason`` and ``changed_by`` say how THIS wording came to be:
    ``add`` / ``supersede`` for an item's first wording, ``update`` / ``edit`` for a later one;
    who decided it (the model, the similarity thresholds, or a person), why, and which user's
    call made the change (the item's creator for its first wording).
    """

    memory_id: UUID
    version: int
    content: str
    memory_type: MemoryType
    status: Status
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_until: datetime | None
    current: bool
    change: str | None = None
    decided_by: DecisionMethod | None = None
    reason: str | None = None
    superseded_by: UUID | None = None
    visibility: Visibility | None = None
    changed_by: str | None = None


@dataclass(frozen=True, slots=True)
class Membership:
    """One user's role in a project, team or org."""

    scope: Scope
    scope_id: str
    user_id: str
    role: Role
    added_by: str | None
    added_at: datetime


@dataclass(frozen=True, slots=True)
class Conflict:
    """Memories at different levels that speak to the same subject but say different things
    (org "use Jest", team "use Vitest", user "prefers Bun test").

    ``items`` are ordered by precedence, most specific first: ``items[0]`` is the one that
    applies, and ``order`` spells the precedence that decided it (``"user > team > org"``).
    """

    items: tuple[MemoryItem, ...]
    order: str

    @property
    def winner(self) -> MemoryItem:
        return self.items[0]
