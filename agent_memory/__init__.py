"""agent-memory: memory that lasts for LangGraph and LangChain agents.

Quick start::

    from agent_memory import MemoryService

    with MemoryService() as memory:          # embedded PostgreSQL + local embeddings
        alice = memory.for_user("alice")
        alice.add("I prefer dark mode", memory_type="preference")
        alice.search("which theme?")
"""

from typing import TYPE_CHECKING, Any

from .errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseBusyError,
    DatabaseError,
    DatabaseUnavailableError,
    EmbeddedServerError,
    EmbeddingDimensionMismatchError,
    EmbeddingError,
    IdentityConflictError,
    InvalidInputError,
    MemoryNotFoundError,
    MigrationError,
    MissingIdentityError,
    ModelOutputError,
    PermissionDeniedError,
)

if TYPE_CHECKING:
    from .config import MemoryConfig
    from .documents import DocumentReport, PassageHit
    from .extraction.pipeline import ExtractionReport, Outcome
    from .formatting import format_memories_for_prompt
    from .handles import AsyncMemoryHandle, MemoryHandle
    from .models import (
        Conflict,
        Decision,
        DecisionMethod,
        Identity,
        Membership,
        MemoryItem,
        MemoryStats,
        MemoryType,
        MemoryVersion,
        NewMemory,
        Proposal,
        Rejection,
        RejectionReason,
        Resource,
        ResourceKind,
        Retention,
        Role,
        Scope,
        SearchResult,
        Source,
        Status,
        Visibility,
    )
    from .ops import AddManyReport
    from .reports import MaintenanceReport, Report
    from .rights import DeleteReport, ForgetReport, ImportReport
    from .profiles.store import AgentProfiles, Profile
    from .service import AsyncMemoryService, MemoryService

# Everything but the errors is imported on first use, so that ``agent-memory --help`` and other
# light uses don't pay for LangChain (a second or more); ``from agent_memory import X`` is unchanged.
_LAZY: dict[str, str] = {
    "AddManyReport": ".ops",
    "AgentProfiles": ".profiles.store",
    "AsyncMemoryHandle": ".handles",
    "AsyncMemoryService": ".service",
    "Conflict": ".models",
    "Decision": ".models",
    "DecisionMethod": ".models",
    "DeleteReport": ".rights",
    "DocumentReport": ".documents",
    "ExtractionReport": ".extraction.pipeline",
    "ForgetReport": ".rights",
    "Identity": ".models",
    "ImportReport": ".rights",
    "MaintenanceReport": ".reports",
    "Membership": ".models",
    "MemoryConfig": ".config",
    "MemoryHandle": ".handles",
    "MemoryItem": ".models",
    "MemoryService": ".service",
    "MemoryStats": ".models",
    "MemoryType": ".models",
    "MemoryVersion": ".models",
    "NewMemory": ".models",
    "Outcome": ".extraction.pipeline",
    "PassageHit": ".documents",
    "Profile": ".profiles.store",
    "Proposal": ".models",
    "Rejection": ".models",
    "RejectionReason": ".models",
    "Report": ".reports",
    "Resource": ".models",
    "ResourceKind": ".models",
    "Retention": ".models",
    "Role": ".models",
    "Scope": ".models",
    "SearchResult": ".models",
    "Source": ".models",
    "Status": ".models",
    "Visibility": ".models",
    "format_memories_for_prompt": ".formatting",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_memory' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "AddManyReport",
    "AgentMemoryError",
    "AgentProfiles",
    "AsyncMemoryHandle",
    "AsyncMemoryService",
    "ConfigurationError",
    "Conflict",
    "DatabaseBusyError",
    "DatabaseError",
    "DatabaseUnavailableError",
    "Decision",
    "DecisionMethod",
    "DeleteReport",
    "DocumentReport",
    "EmbeddedServerError",
    "EmbeddingDimensionMismatchError",
    "EmbeddingError",
    "ExtractionReport",
    "ForgetReport",
    "Identity",
    "IdentityConflictError",
    "ImportReport",
    "InvalidInputError",
    "MaintenanceReport",
    "Membership",
    "MemoryConfig",
    "MemoryHandle",
    "MemoryItem",
    "MemoryNotFoundError",
    "MemoryService",
    "MemoryStats",
    "MemoryType",
    "MemoryVersion",
    "MigrationError",
    "MissingIdentityError",
    "ModelOutputError",
    "NewMemory",
    "Outcome",
    "PassageHit",
    "PermissionDeniedError",
    "Profile",
    "Proposal",
    "Rejection",
    "RejectionReason",
    "Report",
    "Resource",
    "ResourceKind",
    "Retention",
    "Role",
    "Scope",
    "SearchResult",
    "Source",
    "Status",
    "Visibility",
    "format_memories_for_prompt",
]
