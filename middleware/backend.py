"""One handle on the memory service for code that runs both sync and async.

Agents are invoked with ``invoke`` and ``ainvoke`` alike, so middleware,
tools and nodes need both paths. A :class:`MemoryBackend` wraps a blocking
:class:`~agent_memory.MemoryService` (used directly when sync, and from a
worker thread when async, as LangGraph's store bridges ``abatch``) and/or an
:class:`~agent_memory.AsyncMemoryService` (used natively when async, and on
its own event loop when a blocking call comes from a thread: see
:mod:`agent_memory.sync_bridge`). With nothing given it opens the default
service (``DATABASE_URL`` or the embedded PostgreSQL, local embeddings) on
first use, so building an agent is cheap.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings

from agent_memory.config import MemoryConfig
from agent_memory.db.requests import Op
from agent_memory.errors import ConfigurationError
from agent_memory.models import Identity
from agent_memory.principal import PrincipalOps
from agent_memory.service import AsyncMemoryService, MemoryService
from agent_memory.sync_bridge import run_async, run_blocking

__all__ = ["MemoryBackend", "MemoryLike"]

MemoryLike = MemoryService | AsyncMemoryService | str | None
T = TypeVar("T")


class MemoryBackend:
    """Runs memory operations sync (:meth:`run`) or async (:meth:`arun`) on whichever service it has."""

    def __init__(
        self, memory: MemoryLike | MemoryBackend = None, *, config: MemoryConfig | None = None,
        embeddings: Embeddings | None = None,
    ) -> None:
        if memory is not None and not isinstance(memory, (MemoryService, AsyncMemoryService, str)):
            raise ConfigurationError(
                "memory must be a MemoryService, an AsyncMemoryService, a database URL or None "
                f"(the default database), got {type(memory).__name__}"
            )
        if isinstance(memory, (MemoryService, AsyncMemoryService)) and (config is not None or embeddings is not None):
            raise ConfigurationError(
                "config and embeddings are for a service the middleware opens itself (memory=None or a "
                "database URL); a MemoryService you pass already has its own: set them there"
            )
        self._sync: MemoryService | None = memory if isinstance(memory, MemoryService) else None
        self._async: AsyncMemoryService | None = memory if isinstance(memory, AsyncMemoryService) else None
        self._dsn = memory if isinstance(memory, str) else None
        self._config = config
        self._embeddings = embeddings
        self._lock = threading.Lock()
        self._owned: MemoryService | None = None

    @classmethod
    def of(cls, memory: MemoryLike | MemoryBackend, **kwargs: Any) -> MemoryBackend:
        return memory if isinstance(memory, MemoryBackend) else cls(memory, **kwargs)

    @property
    def service(self) -> MemoryService | AsyncMemoryService:
        """The service in use (the blocking one is opened now if none was given)."""
        return self._async if self._async is not None and self._sync is None else self.sync_service()

    @property
    def has_sync(self) -> bool:
        """Whether a blocking service is at hand (anything but an AsyncMemoryService alone, whose
        blocking calls :meth:`run` sends to that service's event loop)."""
        return self._async is None or self._sync is not None

    @property
    def config(self) -> MemoryConfig:
        return self.service.config

    @property
    def known_config(self) -> MemoryConfig:
        """The config without opening anything: the given service's, or the one a service opened
        here will have (for what is decided when an agent is built, like the tools' schemas)."""
        service = self._sync if self._sync is not None else self._async
        if service is not None:
            return service.config
        return self._config if self._config is not None else MemoryConfig.from_env()

    def sync_service(self) -> MemoryService:
        if self._sync is None:
            if self._async is not None:
                raise ConfigurationError(
                    "this memory was given an AsyncMemoryService, which only works with ainvoke/astream; "
                    "pass a MemoryService (or nothing, for the default) to also run invoke/stream"
                )
            with self._lock:
                if self._sync is None:
                    self._sync = self._owned = MemoryService(
                        self._dsn, config=self._config, embeddings=self._embeddings
                    )
        return self._sync

    def ops(self, identity: Identity) -> PrincipalOps:
        """``identity``'s memory as operations, to run with :meth:`run` or :meth:`arun`: the
        middleware and the tools build a call once and run it either way, with its true type."""
        return self.service.for_user(identity).ops

    def run(self, op: Op[T]) -> T:
        """Run an operation blocking: on the blocking service, or (given only an AsyncMemoryService)
        on that service's event loop, from any thread but a running loop's
        (:func:`~agent_memory.sync_bridge.run_blocking`)."""
        if self._sync is None and self._async is not None:
            return run_blocking(self._async, op)
        return self.sync_service().execute(op)

    async def arun(self, op: Op[T]) -> T:
        """Run an operation on asyncio: natively with an AsyncMemoryService, else on a worker thread."""
        if self._async is not None:
            return await run_async(self._async, op)
        return await asyncio.to_thread(self.run, op)

    def close(self) -> None:
        """Close a service this backend opened itself (services you passed in stay open)."""
        with self._lock:
            owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()
            self._sync = None
