"""One LangGraph checkpointer for blocking and asyncio runs, on the memory service's database.

LangGraph's ``PostgresSaver`` refuses async calls and ``AsyncPostgresSaver``
is tied to the event loop it was made in, yet one compiled agent is called
with ``invoke`` and ``ainvoke``, ``stream`` and ``astream``. So
:class:`PostgresCheckpointer` is a thin ``BaseCheckpointSaver`` that hands
each blocking method to a ``PostgresSaver`` and each async one to an
``AsyncPostgresSaver`` on the running loop's own connection
(:mod:`.connections`). The checkpoint SQL is LangGraph's, unchanged.

It also carries episodic memory's own calls, each in a blocking and an
awaitable form built from one operation: session snapshots
(:mod:`.snapshots`) and the checkpoint archive (:mod:`.archive`).
"""

from __future__ import annotations

import builtins
from collections.abc import (
    AsyncIterator,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from typing import Any, Self

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg_pool import ConnectionPool

from ..config import MemoryConfig
from ..db.migrations import migrate
from ..db.requests import Op, arun, run
from ..embeddings import embedding_dimensions, resolve_embeddings
from ..errors import ConfigurationError, InvalidInputError, MissingIdentityError
from ..reports import ForgetReport
from ..validation import check_id
from . import archive as archive_ops
from . import copy as copy_ops
from . import owners
from . import snapshots as snapshot_ops
from .archive import ArchiveCounts
from .connections import Database, LoopConnection
from .forget import forget_user_threads
from .schema import setup_database
from .snapshots import DEFAULT_STATE_KEYS, SessionSnapshot

__all__ = ["PostgresCheckpointer", "open_checkpointer"]


class PostgresCheckpointer(BaseCheckpointSaver[str]):
    """LangGraph checkpointer on PostgreSQL for both sync and async runs, plus episodic memory.

    ``conn`` is a DSN, a ``psycopg.Connection`` (autocommit) or a
    ``psycopg_pool.ConnectionPool``; by default ``config.database_url``, else
    the embedded server, which is the database ``MemoryService()`` uses.
    Construction creates or upgrades LangGraph's checkpoint tables and agent-memory's
    schema, by the same migrations in the same order as ``MemoryService`` (on a new
    database the vector column is sized for ``config``'s embedder). Pass it as
    ``create_agent(..., checkpointer=...)``; close it (or use ``with``) to
    release the connections it opened. A single ``Connection`` you pass is
    shared by every call under one lock; pass a pool for concurrent threads.

    A thread belongs to the first user who runs it (:mod:`.owners`). ``require_user``
    (default ``True``): a call that names no ``user_id`` (``agent.get_state(config)``
    without one, ``delete_thread(thread_id)``) is refused on a thread that has an
    owner, and listing without a ``thread_id`` is refused; ``False`` gives such
    calls the plain LangGraph behaviour, for a single-tenant app.
    """

    def __init__(
        self, conn: str | psycopg.Connection[Any] | ConnectionPool | None = None, *,
        config: MemoryConfig | None = None, serde: SerializerProtocol | None = None, require_user: bool = True,
    ) -> None:
        super().__init__(serde=serde)
        config = MemoryConfig.from_env() if config is None else config
        if not isinstance(config, MemoryConfig):
            raise ConfigurationError(f"config must be a MemoryConfig, got {type(config).__name__}")
        if not isinstance(require_user, bool):
            raise ConfigurationError(f"require_user must be True or False, got {require_user!r}")
        self.config = config
        self.require_user = require_user
        self._allowed: set[tuple[str, str]] = set()  # (thread, user) pairs known to be the owner's
        self._db = Database(conn, config)
        try:
            self.applied_migrations = self.setup()
        except BaseException:
            self._db.close()
            raise
        self._bind()

    def _bind(self) -> None:
        """(Re)make the blocking saver for this object's serializer; async ones are made per loop."""
        self._sync = PostgresSaver(self._db.sync, serde=self.serde)  # type: ignore[arg-type]
        self._sync.lock = self._db.sync_lock

    def setup(self) -> list[str]:
        """Create or upgrade the tables (idempotent; already done on construction).
        Answers the agent-memory migrations applied now."""
        self._db.check_open()
        sync = self._db.sync
        if isinstance(sync, ConnectionPool):
            with sync.connection() as c:
                return self._setup(c)
        with self._db.sync_lock:
            return self._setup(sync)

    def _setup(self, conn: psycopg.Connection[Any]) -> list[str]:
        """Every agent-memory migration, in the order ``MemoryService`` applies them (a new
        database gets the vector size of ``config``'s embedder), then LangGraph's tables.

        Migrations are several statements each, which a prepared statement cannot hold, so
        preparing is switched off meanwhile (LangGraph's connections prepare everything).
        """
        threshold, conn.prepare_threshold = conn.prepare_threshold, None
        try:
            applied = run(migrate(self._new_database_dimensions, None, schema=self.config.db_schema), conn, None)
        finally:
            conn.prepare_threshold = threshold
        setup_database(conn)  # LangGraph's own tables
        return applied

    def _new_database_dimensions(self) -> int:
        return embedding_dimensions(resolve_embeddings(self.config))

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> PostgresCheckpointer:
        """LangGraph's copy-with-a-stricter-serializer, sharing this object's connections."""
        clone = super().with_allowlist(extra_allowlist)
        if clone is not self:
            clone._bind()  # type: ignore[attr-defined]
        return clone  # type: ignore[return-value]

    # --- the savers we delegate to -------------------------------------------------------------

    def _saver(self) -> PostgresSaver:
        self._db.check_open()
        return self._sync

    def _make_async(self, state: LoopConnection) -> AsyncPostgresSaver:
        saver = AsyncPostgresSaver(state.conn, serde=self.serde)  # type: ignore[arg-type]
        saver.lock = state.lock
        return saver

    async def _asaver(self) -> AsyncPostgresSaver:
        state = await self._db.loop_connection()
        return self._db.saver_for(state, self, lambda: self._make_async(state))

    def _run(self, op: Op[Any]) -> Any:
        try:
            self._db.check_open()
        except BaseException:
            op.close()
            raise
        sync = self._db.sync
        if isinstance(sync, ConnectionPool):
            return run(op, sync, None)
        with self._db.sync_lock:
            return run(op, sync, None)

    async def _arun(self, op: Op[Any]) -> Any:
        try:
            state = await self._db.loop_connection()
        except BaseException:
            op.close()
            raise
        async with state.lock:
            return await arun(op, state.conn, None)  # type: ignore[arg-type]

    # --- thread ownership (see owners.py) -------------------------------------------------------

    def _remember(self, thread: str, user: str, owner: str) -> None:
        """Refuse ``user`` unless they are ``thread``'s ``owner``; remember an owner's pair."""
        if owner != user:
            raise owners.refusal(thread)
        if len(self._allowed) > 100_000:  # a cache, not a registry: start again rather than grow
            self._allowed.clear()
        self._allowed.add((thread, user))

    def _ownership(self, thread: str, user: str | None, *, claim: bool, how: str = "config") -> Op[None]:
        """Refuse the call unless ``user`` may use ``thread``. A named user claims a thread nobody
        owns when ``claim`` (a run's first use); a call naming no user may only use such threads."""
        if user is None:
            if (yield from owners.owner_of(thread)) is not None:
                raise owners.needs_user(thread, how)
        elif claim:
            self._remember(thread, user, (yield from owners.claim_thread(thread, user)))
        else:
            owner = yield from owners.owner_of(thread)
            if owner is not None:
                self._remember(thread, user, owner)

    def _check(self, config: RunnableConfig | None, *, listing: bool = False) -> tuple[str | None, Op[None] | None]:
        """The call's user, and the ownership check it needs (``None`` when it needs none: the
        pair is known, or no user is named and ``require_user`` is off). Raises at once on a run
        whose context and config disagree (:class:`~agent_memory.errors.IdentityConflictError`)."""
        thread, user = owners.thread_and_user(config)
        if thread is None:
            if listing and (self.require_user or user is not None):
                raise owners.unscoped_listing()
            return user, None
        if (thread, user) in self._allowed or (user is None and not self.require_user):
            return user, None
        return user, self._ownership(thread, user, claim=True)

    def _delete_check(self, thread_id: str, user_id: str | None) -> Op[None] | None:
        user = None if user_id is None else check_id("user_id", user_id)
        if user is None and not self.require_user:
            return None
        return self._ownership(str(thread_id), user, claim=False, how="argument")

    def _guard(self, config: RunnableConfig | None, *, listing: bool = False) -> str | None:
        """Refuse the call unless its user may use its thread; answers the user (or None)."""
        user, check = self._check(config, listing=listing)
        if check is not None:
            self._run(check)
        return user

    async def _aguard(self, config: RunnableConfig | None, *, listing: bool = False) -> str | None:
        user, check = self._check(config, listing=listing)
        if check is not None:
            await self._arun(check)
        return user

    def _forget_owner(self, thread_ids: Collection[str]) -> None:
        self._allowed = {k for k in self._allowed if k[0] not in thread_ids}

    def forget_user(self, *, user_id: str) -> ForgetReport:
        """Delete every thread ``user_id`` owns (checkpoints, writes, blobs, archives, snapshots,
        ownership) and forget this process's cached claims of theirs; the report's ``removed``
        counts rows per table (the same report as ``MemoryService.forget_user``, which does this
        and the long-term memory in one call; use this one on the checkpointer a running agent
        holds, so its cache forgets too)."""
        removed = self._run(forget_user_threads(user_id))  # validates user_id: ids are never trimmed
        self._allowed = {k for k in self._allowed if k[1] != str(user_id)}
        return ForgetReport(user_id=user_id, removed=removed)

    async def aforget_user(self, *, user_id: str) -> ForgetReport:
        """:meth:`forget_user` on asyncio."""
        removed = await self._arun(forget_user_threads(user_id))
        self._allowed = {k for k in self._allowed if k[1] != str(user_id)}
        return ForgetReport(user_id=user_id, removed=removed)

    @staticmethod
    def _archived_thread(config: RunnableConfig) -> str | None:
        """The thread to restore when a get by checkpoint id misses: maybe it was archived."""
        if not get_checkpoint_id(config):
            return None
        try:
            return snapshot_ops.check_thread_id(config["configurable"].get("thread_id"))
        except InvalidInputError:
            return None

    # --- BaseCheckpointSaver: blocking ---------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """LangGraph's lookup; a checkpoint asked for by id that was archived is restored first."""
        user = self._guard(config)
        found = self._saver().get_tuple(config)
        thread = self._archived_thread(config) if found is None else None
        if thread is not None and self._run(archive_ops.restore(thread)).checkpoints:
            found = self._saver().get_tuple(config)
        return _stamped(found, user)

    def list(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Hot checkpoints only; :meth:`restore` a thread to list its archived history too."""
        user = self._guard(config, listing=True)
        found = self._saver().list(config, filter=filter, before=before, limit=limit)
        return found if user is None else (_stamped(item, user) for item in found)  # type: ignore[misc]

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._guard(config)
        return self._saver().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "",
    ) -> None:
        self._guard(config)
        self._saver().put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str, *, user_id: str | None = None) -> None:
        """Delete the thread everywhere: hot tables, archive and every user's snapshot of it.
        A thread that has an owner is deleted only for that ``user_id`` (see ``require_user``)."""
        check = self._delete_check(thread_id, user_id)
        if check is not None:
            self._run(check)
        self._saver().delete_thread(thread_id)
        self._run(archive_ops.forget_threads([str(thread_id)], snapshots=True))
        self._forget_owner({str(thread_id)})

    def _runs_caller(self, user_id: str | None) -> str | None:
        """Whose threads ``delete_for_runs`` may touch: ``user_id``'s, or every thread when none is
        named and ``require_user`` is off; run ids name no thread, so otherwise a user is needed."""
        if user_id is not None:
            return check_id("user_id", user_id)
        if self.require_user:
            raise MissingIdentityError(
                "delete_for_runs needs user_id=...: run ids name no thread, so without a user it would reach "
                "every user's threads; pass the owner's id, or build the checkpointer with require_user=False "
                "for a single-tenant app"
            )
        return None

    def _copy(self, source_thread_id: str, target_thread_id: str, user_id: str | None) -> Op[int]:
        user = None if user_id is None else check_id("user_id", user_id)
        check = self._delete_check(source_thread_id, user)  # reading the source needs its owner
        if check is not None:
            yield from check
        return (yield from copy_ops.copy_thread(str(source_thread_id), str(target_thread_id), user))

    def delete_for_runs(self, run_ids: Sequence[str], *, user_id: str | None = None) -> None:
        """Delete the checkpoints (and their writes) of these runs in ``user_id``'s threads."""
        self._run(copy_ops.delete_for_runs(run_ids, self._runs_caller(user_id)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str, *, user_id: str | None = None) -> None:
        """Copy a thread's whole history to a new thread id, owned by ``user_id``; the source must
        be theirs (or nobody's). The target must not exist yet."""
        self._run(self._copy(source_thread_id, target_thread_id, user_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """LangGraph's prune, which also drops the threads' archived checkpoints (and with
        ``strategy="delete"`` their snapshots), so a restore cannot bring pruned history back."""
        self._saver().prune(thread_ids, strategy=strategy)
        self._run(archive_ops.forget_threads([str(t) for t in thread_ids], snapshots=strategy == "delete"))
        if strategy == "delete":
            self._forget_owner({str(t) for t in thread_ids})

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        self._guard(config)
        return self._saver().get_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current: str | None, channel: None) -> str:
        return self._sync.get_next_version(current, channel)

    # --- BaseCheckpointSaver: async --------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        user = await self._aguard(config)
        saver = await self._asaver()
        found = await saver.aget_tuple(config)
        thread = self._archived_thread(config) if found is None else None
        if thread is not None and (await self._arun(archive_ops.restore(thread))).checkpoints:
            found = await saver.aget_tuple(config)
        return _stamped(found, user)

    async def alist(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        user = await self._aguard(config, listing=True)
        saver = await self._asaver()
        # closed as soon as we are: the inner generator holds the loop connection's lock
        async with aclosing(saver.alist(config, filter=filter, before=before, limit=limit)) as items:
            async for item in items:
                yield _stamped(item, user)  # type: ignore[misc]

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self._aguard(config)
        return await (await self._asaver()).aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "",
    ) -> None:
        await self._aguard(config)
        await (await self._asaver()).aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str, *, user_id: str | None = None) -> None:
        check = self._delete_check(thread_id, user_id)
        if check is not None:
            await self._arun(check)
        await (await self._asaver()).adelete_thread(thread_id)
        await self._arun(archive_ops.forget_threads([str(thread_id)], snapshots=True))
        self._forget_owner({str(thread_id)})

    async def adelete_for_runs(self, run_ids: Sequence[str], *, user_id: str | None = None) -> None:
        await self._arun(copy_ops.delete_for_runs(run_ids, self._runs_caller(user_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str, *, user_id: str | None = None) -> None:
        await self._arun(self._copy(source_thread_id, target_thread_id, user_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await (await self._asaver()).aprune(thread_ids, strategy=strategy)
        await self._arun(archive_ops.forget_threads([str(t) for t in thread_ids], snapshots=strategy == "delete"))
        if strategy == "delete":
            self._forget_owner({str(t) for t in thread_ids})

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        await self._aguard(config)
        return await (await self._asaver()).aget_delta_channel_history(config=config, channels=channels)

    # --- session snapshots ---------------------------------------------------------------------

    def save_snapshot(
        self, state: Mapping[str, Any], *, user_id: str, thread_id: str, project_id: str | None = None,
        checkpoint_id: str | None = None, state_keys: Iterable[str] = DEFAULT_STATE_KEYS,
    ) -> SessionSnapshot:
        """Write the compact snapshot of a session's ``state`` for ``user_id`` (replacing theirs)."""
        return self._run(snapshot_ops.save_snapshot(
            state, user_id=user_id, thread_id=thread_id, project_id=project_id, checkpoint_id=checkpoint_id,
            state_keys=state_keys))

    async def asave_snapshot(
        self, state: Mapping[str, Any], *, user_id: str, thread_id: str, project_id: str | None = None,
        checkpoint_id: str | None = None, state_keys: Iterable[str] = DEFAULT_STATE_KEYS,
    ) -> SessionSnapshot:
        return await self._arun(snapshot_ops.save_snapshot(
            state, user_id=user_id, thread_id=thread_id, project_id=project_id, checkpoint_id=checkpoint_id,
            state_keys=state_keys))

    def load_snapshot(self, thread_id: str, *, user_id: str) -> SessionSnapshot | None:
        """``user_id``'s snapshot of ``thread_id``, or None (also when only another user has one)."""
        return self._run(snapshot_ops.load_snapshot(thread_id, user_id=user_id))

    async def aload_snapshot(self, thread_id: str, *, user_id: str) -> SessionSnapshot | None:
        return await self._arun(snapshot_ops.load_snapshot(thread_id, user_id=user_id))

    def list_sessions(
        self, *, user_id: str, project_id: str | None = None, limit: int = 20, offset: int = 0,
    ) -> builtins.list[SessionSnapshot]:
        """``user_id``'s sessions (in ``project_id`` if given), most recently active first."""
        return self._run(snapshot_ops.list_sessions(user_id=user_id, project_id=project_id, limit=limit, offset=offset))

    async def alist_sessions(
        self, *, user_id: str, project_id: str | None = None, limit: int = 20, offset: int = 0,
    ) -> builtins.list[SessionSnapshot]:
        return await self._arun(
            snapshot_ops.list_sessions(user_id=user_id, project_id=project_id, limit=limit, offset=offset))

    # --- checkpoint archive --------------------------------------------------------------------

    def archive(
        self, older_than_days: float | None = None, *, thread_id: str | None = None, now: Any = None,
    ) -> ArchiveCounts:
        """Move checkpoints older than ``older_than_days`` (default ``config.checkpoint_archive_days``)
        into ``checkpoint_archive``, for every thread or one; each thread's latest checkpoint
        stays (see :mod:`agent_memory.episodic.archive`). ``now`` (aware datetime) is for tests."""
        days = self.config.checkpoint_archive_days if older_than_days is None else older_than_days
        return self._run(archive_ops.archive(days, thread_id=thread_id, now=now))

    async def aarchive(
        self, older_than_days: float | None = None, *, thread_id: str | None = None, now: Any = None,
    ) -> ArchiveCounts:
        days = self.config.checkpoint_archive_days if older_than_days is None else older_than_days
        return await self._arun(archive_ops.archive(days, thread_id=thread_id, now=now))

    def restore(self, thread_id: str) -> ArchiveCounts:
        """Put ``thread_id``'s archived checkpoints back exactly; zero counts when none are archived."""
        return self._run(archive_ops.restore(thread_id))

    async def arestore(self, thread_id: str) -> ArchiveCounts:
        return await self._arun(archive_ops.restore(thread_id))

    # --- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections this checkpointer opened (one you passed in stays open)."""
        self._db.close()

    async def aclose(self) -> None:
        await self._db.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _with_user(config: RunnableConfig | None, user: str) -> RunnableConfig | None:
    if config is None:
        return None
    return {**config, "configurable": {**(config.get("configurable") or {}), "user_id": user}}  # type: ignore[typeddict-item]


def _stamped(found: CheckpointTuple | None, user: str | None) -> CheckpointTuple | None:
    """``found`` with the caller's ``user_id`` in its configs, so a call made with one later (time
    travel: ``agent.get_state(snapshot.config)``, ``agent.invoke(None, snapshot.config)``) names
    the user too, as ``require_user`` asks."""
    if found is None or user is None:
        return found
    return found._replace(config=_with_user(found.config, user), parent_config=_with_user(found.parent_config, user))


def open_checkpointer(
    conn: str | psycopg.Connection[Any] | ConnectionPool | None = None, *,
    config: MemoryConfig | None = None, serde: SerializerProtocol | None = None, require_user: bool = True,
) -> PostgresCheckpointer:
    """A ready :class:`PostgresCheckpointer` on the same database as ``MemoryService(conn, config=config)``."""
    return PostgresCheckpointer(conn, config=config, serde=serde, require_user=require_user)
