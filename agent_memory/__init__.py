"""agent-memory: memory that lasts for LangGraph and LangChain agents.

Quick start::

    from agent_memory import MemoryService

    with MemoryService() as memory:          # embedded PostgreSQL + local embeddings
        memory.add_explicit_memory("I prefer dark mode", user_id="alice", memory_type="preference")
        memory.search_memories("which theme?", user_id="alice")
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
    from .extraction.pipeline import ExtractionReport, Outcome
    from .formatting import format_memories_for_prompt
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
        Role,
        Scope,
        SearchResult,
        Source,
        Status,
        Visibility,
    )
    from .ops import ImportResult
    from .profiles.store import AgentProfiles, Profile
    from .service import AsyncMemoryService, MemoryService

# Everything but the errors is imported on first use, so that ``agent-memory --help`` and other
# light uses don't pay for LangChain (a second or more); ``from agent_memory import X`` is unchanged.
_LAZY: dict[str, str] = {
    "AgentProfiles": ".profiles.store",
    "AsyncMemoryService": ".service",
    "Conflict": ".models",
    "Decision": ".models",
    "DecisionMethod": ".models",
    "ExtractionReport": ".extraction.pipeline",
    "Identity": ".models",
    "ImportResult": ".ops",
    "Membership": ".models",
    "MemoryConfig": ".config",
    "MemoryItem": ".models",
    "MemoryService": ".service",
    "MemoryStats": ".models",
    "MemoryType": ".models",
    "MemoryVersion": ".models",
    "NewMemory": ".models",
    "Outcome": ".extraction.pipeline",
    "Profile": ".profiles.store",
    "Proposal": ".models",
    "Rejection": ".models",
    "RejectionReason": ".models",
    "Resource": ".models",
    "ResourceKind": ".models",
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
    "AgentMemoryError",
    "AgentProfiles",
    "AsyncMemoryService",
    "ConfigurationError",
    "Conflict",
    "DatabaseBusyError",
    "DatabaseError",
    "DatabaseUnavailableError",
    "Decision",
    "DecisionMethod",
    "EmbeddedServerError",
    "EmbeddingDimensionMismatchError",
    "EmbeddingError",
    "ExtractionReport",
    "Identity",
    "IdentityConflictError",
    "ImportResult",
    "InvalidInputError",
    "Membership",
    "MemoryConfig",
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
    "PermissionDeniedError",
    "Profile",
    "Proposal",
    "Rejection",
    "RejectionReason",
    "Resource",
    "ResourceKind",
    "Role",
    "Scope",
    "SearchResult",
    "Source",
    "Status",
    "Visibility",
    "format_memories_for_prompt",
]
