"""The memory services: where a program opens memory and reaches one principal's part of it.

:class:`MemoryService` (blocking) and :class:`AsyncMemoryService` (asyncio) own the
connections, the embedder and the chat model. ``service.for_user(...)`` returns a handle
(:class:`~agent_memory.handles.MemoryHandle` / ``AsyncMemoryHandle``) bound to one
identity, and every per-user call lives there; the services keep what is not one
principal's: projects, teams and orgs and their members, export, import, forget, delete a
scope (:class:`~agent_memory.handles.ServiceMethods`). All of it is written once as
operations in :mod:`agent_memory.principal`; a class only decides how to run them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any, TypeVar

import psycopg
from langchain_core.embeddings import Embeddings
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from . import ops
from .config import MemoryConfig
from .db.connection import (  # noqa: F401 - DEFAULT_DATABASE is re-exported
    DEFAULT_DATABASE, aopen_pool, embedded_restarter, open_pool, resolve_dsn,
)
from .db.distributed import laid_out
from .db.migrations import migrate
from .db.requests import Op, arun, run
from .embeddings import embedding_dimensions, embedding_model_name, resolve_embeddings
from .errors import ConfigurationError, InvalidInputError
from .formatting import format_memories_for_prompt
from .gate import check_content, normalize_content
from .handles import AsyncMemoryHandle, AsyncServiceMethods, MemoryHandle, ServiceMethods
from .llm import LlmSlot
from .models import Identity, MemoryItem, Rejection, SearchResult
from .principal import SERVICE_LLM, AdminOps, PrincipalOps
from .specification import AsyncSpecificationMethods, SpecificationMethods
from .validation import check_identity, check_int, check_list

__all__ = ["SERVICE_LLM", "AsyncMemoryService", "MemoryService"]

T = TypeVar("T")


class _Common:
    """What both services share that runs no operation: the model, handles' identity, pure helpers."""

    config: MemoryConfig
    embeddings: Embeddings
    _llm: LlmSlot

    @property
    def llm(self) -> Any:
        """The chat model used for extraction, consolidation and profiles (None: rules, offline)."""
        return self._llm.get()

    def _choose_model(self, llm: Any) -> Any:
        if llm is SERVICE_LLM:
            return self.llm
        return LlmSlot(llm, self.config.replace(llm=None)).get()

    def _principal(
        self, user_id: str | Identity, project_id: str | None, session_id: str | None, team_id: str | None,
        org_id: str | None,
    ) -> PrincipalOps:
        if isinstance(user_id, Identity):
            if any(v is not None for v in (project_id, session_id, team_id, org_id)):
                raise InvalidInputError("for_user", "takes an Identity or ids, not both: put the ids in the Identity")
            given = user_id
            identity = check_identity(given.user_id, given.project_id, given.session_id, given.team_id, given.org_id)
        else:
            identity = check_identity(user_id, project_id, session_id, team_id, org_id)
        return PrincipalOps(self.config, identity, self._choose_model)

    # --- pure helpers (no I/O, never awaited) ------------------------------------------------

    def validate_memory(self, content: Any, *, confidence: Any = 1.0, memory_type: Any = "fact",
                        scope: Any = "user") -> Rejection | None:
        """The gate's verdict on a proposed memory, without saving it: ``None`` means it would pass
        (a duplicate is not a rejection; see :meth:`MemoryHandle.find_duplicate`). Malformed
        arguments raise :class:`InvalidInputError`."""
        new = ops.make_new_memory(content, confidence=confidence, memory_type=memory_type, scope=scope,
                                  config=self.config)
        return check_content(normalize_content(new.content), confidence=new.confidence, config=self.config)

    def format_memories_for_prompt(
        self, memories: Iterable[MemoryItem | SearchResult], *, budget_chars: int | None = None
    ) -> str:
        """The prompt block for ``memories`` within ``budget_chars`` (default ``config.prompt_budget_chars``).

        Example: ``prompt += memory.format_memories_for_prompt(alice.search("editor"))``. Anything
        but :class:`MemoryItem`/:class:`SearchResult` objects, or a bad budget, raises
        :class:`InvalidInputError`."""
        items = check_list("memories", memories)
        for i, m in enumerate(items):
            if not isinstance(m, (MemoryItem, SearchResult)):
                raise InvalidInputError(f"memories[{i}]", f"must be a MemoryItem or SearchResult (from a search or "
                                                          f"list call), got {type(m).__name__}")
        budget = self.config.prompt_budget_chars if budget_chars is None else check_int(
            "budget_chars", budget_chars, 1, 10_000_000)
        return format_memories_for_prompt(items, budget_chars=budget)


def _resolve(config: MemoryConfig | None, embeddings: Embeddings | None) -> tuple[MemoryConfig, Embeddings]:
    config = MemoryConfig.from_env() if config is None else config
    if not isinstance(config, MemoryConfig):
        raise ConfigurationError(f"config must be a MemoryConfig, got {type(config).__name__}")
    if embeddings is None:
        embeddings = resolve_embeddings(config)
    elif not isinstance(embeddings, Embeddings):
        raise ConfigurationError(
            f"embeddings must be a LangChain Embeddings object, got {type(embeddings).__name__}"
        )
    return config, embeddings


class MemoryService(ServiceMethods, _Common, SpecificationMethods):
    """Blocking memory service.

    ``MemoryService()`` uses ``DATABASE_URL`` when set and the embedded
    PostgreSQL otherwise, with the local embedding model. Pass ``conn`` (a DSN,
    a ``psycopg.Connection`` or a ``psycopg_pool.ConnectionPool``), ``config``
    and/or ``embeddings`` (any LangChain ``Embeddings``) to choose, and ``llm`` (any
    LangChain chat model) to extract, consolidate and build profiles with a model
    instead of the offline rules (``MEMORY_LLM`` names one too). The schema
    is migrated on construction. Thread-safe; use as a context manager or call
    :meth:`close` to release a pool it opened.

    One principal's memory is reached through :meth:`for_user`; the service itself
    administers projects, teams and orgs and moves or erases a user's data.
    """

    def __init__(
        self, conn: str | psycopg.Connection | ConnectionPool | None = None, *,
        config: MemoryConfig | None = None, embeddings: Embeddings | None = None, llm: Any = None,
    ) -> None:
        self.config, self.embeddings = _resolve(config, embeddings)
        self._llm = LlmSlot(llm, self.config)
        self._admin = AdminOps(self.config, self._choose_model)
        self._owned_pool: ConnectionPool | None = None
        if conn is None or isinstance(conn, str):
            dsn = resolve_dsn(conn, self.config)
            conn = self._owned_pool = open_pool(
                dsn, min_size=self.config.pool_min_size, max_size=self.config.pool_max_size,
                restart=embedded_restarter(conn, self.config),  # the embedded server we own comes back
            )
        elif not isinstance(conn, (psycopg.Connection, ConnectionPool)):
            raise ConfigurationError(
                f"conn must be a DSN string, a psycopg Connection or a ConnectionPool, got {type(conn).__name__}"
            )
        self.conn = conn
        self._closed = False
        try:
            self.applied_migrations: list[str] = run(
                laid_out(migrate(embedding_dimensions(self.embeddings), embedding_model_name(self.embeddings),
                                 schema=self.config.db_schema), self.config.distributed),
                self.conn, self.embeddings,
            )
        except BaseException:
            self.close()
            raise

    def for_user(
        self, user_id: str | Identity, *, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryHandle:
        """The memory of ``user_id`` (in ``project_id``, ``session_id``, ``team_id``,
        ``org_id`` when given), or of an :class:`Identity`: a :class:`MemoryHandle` whose every
        call acts for them. Ids are checked now (:class:`InvalidInputError` says what is wrong);
        no I/O, so make one per request."""
        return MemoryHandle(self._principal(user_id, project_id, session_id, team_id, org_id), self.execute)

    def execute(self, op: Op[T]) -> T:
        """Run an operation (from :class:`~agent_memory.principal.AdminOps` or a handle's ``ops``)
        to its result; raises what the operation raises, and :class:`ConfigurationError` once the
        service is closed."""
        if self._closed:
            op.close()
            raise ConfigurationError("this MemoryService is closed; create a new one")
        return run(op, self.conn, self.embeddings)

    def close(self) -> None:
        """Close the pool this service opened (a connection or pool you passed in stays open)."""
        self._closed = True
        if self._owned_pool is not None:
            self._owned_pool.close()
            self._owned_pool = None

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryService(AsyncServiceMethods, _Common, AsyncSpecificationMethods):
    """The asyncio twin of :class:`MemoryService`: same methods, each ``async def``;
    :meth:`for_user` gives an :class:`AsyncMemoryHandle`.

    Accepts a DSN, a ``psycopg.AsyncConnection`` or an ``AsyncConnectionPool``.
    Setup (pool, migrations) happens on first use or on ``await service.setup()``;
    ``async with AsyncMemoryService() as memory:`` does both ends.
    """

    def __init__(
        self, conn: str | psycopg.AsyncConnection | AsyncConnectionPool | None = None, *,
        config: MemoryConfig | None = None, embeddings: Embeddings | None = None, llm: Any = None,
    ) -> None:
        self.config, self.embeddings = _resolve(config, embeddings)
        self._llm = LlmSlot(llm, self.config)
        self._admin = AdminOps(self.config, self._choose_model)
        if conn is not None and not isinstance(conn, (str, psycopg.AsyncConnection, AsyncConnectionPool)):
            raise ConfigurationError(
                "conn must be a DSN string, a psycopg AsyncConnection or an AsyncConnectionPool, "
                f"got {type(conn).__name__}"
            )
        self._given = conn
        self.conn: psycopg.AsyncConnection | AsyncConnectionPool | None = None
        self._owned_pool: AsyncConnectionPool | None = None
        self._setup_lock = threading.Lock()
        self._setup_task: asyncio.Future[None] | None = None
        self._closed = False
        self.applied_migrations: list[str] = []

    async def setup(self) -> None:
        """Open the pool and migrate the schema (idempotent; concurrent callers share one setup)."""
        if self.conn is not None:
            return
        with self._setup_lock:
            if self._setup_task is None:
                self._setup_task = asyncio.ensure_future(self._setup())
            task = self._setup_task
        try:
            await asyncio.shield(task)
        except BaseException:
            with self._setup_lock:
                if self._setup_task is task and task.done():
                    self._setup_task = None
            raise

    async def _setup(self) -> None:
        conn = self._given
        if conn is None or isinstance(conn, str):
            dsn = await asyncio.to_thread(resolve_dsn, conn, self.config)
            conn = self._owned_pool = await aopen_pool(
                dsn, min_size=self.config.pool_min_size, max_size=self.config.pool_max_size,
                restart=embedded_restarter(conn, self.config),
            )
        try:
            self.applied_migrations = await arun(
                laid_out(migrate(embedding_dimensions(self.embeddings), embedding_model_name(self.embeddings),
                                 schema=self.config.db_schema), self.config.distributed),
                conn, self.embeddings,
            )
        except BaseException:
            if self._owned_pool is not None:
                await self._owned_pool.close()
                self._owned_pool = None
            raise
        self.conn = conn

    def for_user(
        self, user_id: str | Identity, *, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> AsyncMemoryHandle:
        """:meth:`MemoryService.for_user` for asyncio: an :class:`AsyncMemoryHandle` (making it is
        not awaited; its calls are)."""
        return AsyncMemoryHandle(self._principal(user_id, project_id, session_id, team_id, org_id), self.execute)

    async def execute(self, op: Op[T]) -> T:
        """Run an operation (from :class:`~agent_memory.principal.AdminOps` or a handle's ``ops``)
        to its result; sets the service up first if needed."""
        if self._closed:
            op.close()
            raise ConfigurationError("this AsyncMemoryService is closed; create a new one")
        try:
            await self.setup()
        except BaseException:
            op.close()
            raise
        return await arun(op, self.conn, self.embeddings)  # type: ignore[arg-type]

    async def close(self) -> None:
        self._closed = True
        if self._owned_pool is not None:
            await self._owned_pool.close()
            self._owned_pool = None

    async def __aenter__(self) -> AsyncMemoryService:
        await self.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
