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
from .formatting import format_memories_for_prompt
from .models import (
    Decision,
    DecisionMethod,
    Identity,
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
    Scope,
    SearchResult,
    Source,
    Status,
    Visibility,
)
from .extraction.pipeline import ExtractionReport, Outcome
from .ops import ImportResult
from .profiles.store import AgentProfiles, Profile
from .service import AsyncMemoryService, MemoryService

__version__ = "0.1.0"

__all__ = [
    "AgentMemoryError",
    "AgentProfiles",
    "Decision",
    "DecisionMethod",
    "ExtractionReport",
    "AsyncMemoryService",
    "ConfigurationError",
    "DatabaseError",
    "EmbeddedServerError",
    "EmbeddingDimensionMismatchError",
    "EmbeddingError",
    "Identity",
    "ImportResult",
    "InvalidInputError",
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
    "Scope",
    "SearchResult",
    "Source",
    "Status",
    "Visibility",
    "format_memories_for_prompt",
]
