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
    PermissionDeniedError,
)
from .formatting import format_memories_for_prompt
from .models import (
    Identity,
    MemoryItem,
    MemoryStats,
    MemoryType,
    NewMemory,
    Rejection,
    RejectionReason,
    Scope,
    SearchResult,
    Source,
    Status,
    Visibility,
)
from .ops import ImportResult
from .service import AsyncMemoryService, MemoryService

__version__ = "0.1.0"

__all__ = [
    "AgentMemoryError",
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
    "MigrationError",
    "MissingIdentityError",
    "NewMemory",
    "PermissionDeniedError",
    "Rejection",
    "RejectionReason",
    "Scope",
    "SearchResult",
    "Source",
    "Status",
    "Visibility",
    "format_memories_for_prompt",
]
