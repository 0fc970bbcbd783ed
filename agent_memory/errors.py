"""One exception tree for the whole package.

Every error the library raises on purpose is an :class:`AgentMemoryError`, and
each subclass also inherits the builtin a caller would naturally catch
(``ValueError``, ``LookupError``, ``PermissionError``), so ``except ValueError``
keeps working for people who don't know our names.  Messages are lowercase,
say what happened, and say what to do about it.
"""

from __future__ import annotations

__all__ = [
    "AgentMemoryError",
    "ConfigurationError",
    "DatabaseError",
    "EmbeddedServerError",
    "EmbeddingDimensionMismatchError",
    "EmbeddingError",
    "InvalidInputError",
    "MemoryNotFoundError",
    "MigrationError",
    "MissingIdentityError",
    "ModelOutputError",
    "PermissionDeniedError",
]


class AgentMemoryError(Exception):
    """Base class of every error raised by agent-memory."""


class ConfigurationError(AgentMemoryError, ValueError):
    """A setting (argument or environment variable) has a value that can't work."""


class MissingIdentityError(ConfigurationError):
    """A run reached the memory layer without saying whose memory it is (no ``user_id``)."""


class InvalidInputError(AgentMemoryError, ValueError):
    """An argument to a public call is malformed; nothing was written.

    ``field`` names the offending argument so tools can echo it back to a model.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class MemoryNotFoundError(AgentMemoryError, LookupError):
    """No memory with that id is visible to the caller."""


class PermissionDeniedError(AgentMemoryError, PermissionError):
    """The caller's identity does not allow the action."""


class DatabaseError(AgentMemoryError, RuntimeError):
    """The database could not be reached or used."""


class EmbeddedServerError(DatabaseError):
    """The embedded PostgreSQL server could not be started or stopped."""


class MigrationError(DatabaseError):
    """The schema could not be brought up to date."""


class EmbeddingDimensionMismatchError(ConfigurationError):
    """The database was created for embeddings of another size than the configured embedder makes."""


class EmbeddingError(AgentMemoryError, RuntimeError):
    """The embedding model could not be loaded or run."""


class ModelOutputError(AgentMemoryError, RuntimeError):
    """A chat model used by the memory layer (extraction, consolidation, profiles) did not answer
    with the structured output it was asked for."""
