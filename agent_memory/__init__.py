"""agent-memory: memory that lasts for LangGraph and LangChain agents.

Quick start::

    from agent_memory import MemoryService

    with MemoryService() as memory:          # embedded PostgreSQL + local embeddings
        memory.add_explicit_memory("I prefer dark mode", user_id="alice", memory_type="preference")
        memory.search_memories("which theme?", user_id="alice")
"""

from .config import MemoryConfig
from .errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseError,
    EmbeddedServerError,
    EmbeddingDimensionMismatchError,
    EmbeddingError,
    InvalidInputError,
    MemoryNotFoundError,
    MigrationError,
    MissingIdentityError,
    ModelOutputError,
    PermissionDeniedError,
)
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

__version__ = "0.1.0"

__all__ = [
    "AgentMemoryError",
    "AgentProfiles",
    "AsyncMemoryService",
    "ConfigurationError",
    "Conflict",
    "DatabaseError",
    "Decision",
    "DecisionMethod",
    "EmbeddedServerError",
    "EmbeddingDimensionMismatchError",
    "EmbeddingError",
    "ExtractionReport",
    "Identity",
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
