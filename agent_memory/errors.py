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
    "DatabaseBusyError",
    "DatabaseError",
    "DatabaseUnavailableError",
    "EmbeddedServerError",
    "EmbeddingDimensionMismatchError",
    "EmbeddingError",
    "IdentityConflictError",
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


class IdentityConflictError(ConfigurationError):
    """A run names one identity field twice, in its context and in ``config["configurable"]``,
    with different values; it is refused before anything is read or written.

    ``field`` is the field (``"user_id"``...); ``context_value`` and ``config_value`` the two values
    (``sources`` says where each was read: the platform's authenticated user is one such source,
    and what it names is never overridden by a run's own ``user_id``).
    """

    def __init__(self, field: str, context_value: object, config_value: object, *,
                 sources: tuple[str, str] = ("its context", "config['configurable']"),
                 advice: str | None = None) -> None:
        if advice is None:
            advice = (f"pass {field} in one place only (the context or config['configurable']), or the same value "
                      "in both")
        super().__init__(
            f"the run names two different {field}s: {_short(context_value)} in {sources[0]} and "
            f"{_short(config_value)} in {sources[1]}, so nothing was read or written; {advice}"
        )
        self.field = field
        self.context_value = context_value
        self.config_value = config_value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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


class DatabaseUnavailableError(DatabaseError):
    """The server is down, or the connection to it was lost during the operation.

    ``maybe_applied`` says whether the operation's writes may have reached the
    database anyway (the connection dropped during a commit, or after an earlier
    commit of the same operation): then look before repeating it. When it is
    False, nothing was written and the call can simply be repeated.
    """

    def __init__(self, message: str, *, maybe_applied: bool = False) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class DatabaseBusyError(DatabaseError):
    """The server is up, but no pooled connection became free in time: every one was in use."""


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
