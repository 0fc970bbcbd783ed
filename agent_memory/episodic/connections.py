"""The connections behind a checkpointer: one for blocking calls, one per event loop for async ones.

LangGraph's ``PostgresSaver`` (blocking) and ``AsyncPostgresSaver`` (asyncio)
are separate objects, and psycopg's async connections and pools belong to the
event loop they were opened in. Users call ``agent.invoke`` and
``agent.ainvoke`` on the same compiled agent, from scripts that call
``asyncio.run`` twice and from notebooks whose loop never ends, so:

* blocking calls use a ``ConnectionPool`` (ours, or the pool or connection
  you passed);
* each running event loop gets its own ``AsyncConnection``, opened on first
  use in that loop. One connection, not a pool: ``AsyncPostgresSaver`` holds
  its lock around every statement anyway, and psycopg's async pool runs
  worker tasks that ``asyncio.run`` cancels on the way out, after which the
  pool can no longer close its connections. A connection closes without
  tasks: when ``asyncio.run`` shuts its loop down (an async generator
  finalizer), on :meth:`Database.close`, or when another loop finds its loop
  closed.

Connections are made the way LangGraph requires: autocommit, ``dict_row``
rows, ``prepare_threshold=0`` (safe behind PgBouncer).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from ..config import MemoryConfig
from ..db.connection import connect_timeout, open_pool, resolve_dsn, unreachable
from ..errors import ConfigurationError

__all__ = ["CONNECTION_KWARGS", "Database", "LoopConnection"]

CONNECTION_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def _open_pool(dsn: str, config: MemoryConfig) -> ConnectionPool:
    # check=True: LangGraph's savers can't retry a statement on a connection that died with the
    # server, so the pool tests each one as it hands it out
    return open_pool(dsn, min_size=config.pool_min_size, max_size=config.pool_max_size, kwargs=CONNECTION_KWARGS,
                     name="agent-memory-checkpoints", check=True)


def _dsn_of(conn: psycopg.Connection[Any]) -> str:
    """A DSN that reaches the same database as ``conn`` (``info.dsn`` leaves the password out)."""
    info = conn.info
    password = info.password
    return psycopg.conninfo.make_conninfo(info.dsn, **({"password": password} if password else {}))


@dataclass(eq=False)
class LoopConnection:
    """One event loop's connection, and the lock every user of it holds for each statement
    or transaction (LangGraph's savers get this lock as theirs, so our transactions and
    their statements never interleave on the connection)."""

    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    conn: psycopg.AsyncConnection[Any] | None = None
    savers: weakref.WeakKeyDictionary[Any, Any] = field(default_factory=weakref.WeakKeyDictionary)
    finalizer: Any = None

    def close_now(self) -> None:
        """Close without awaiting (the loop may be closed or busy elsewhere)."""
        conn, self.conn = self.conn, None
        self.savers.clear()
        if conn is not None and not conn.closed:
            conn.pgconn.finish()
        # Finish the shutdown hook here: with no connection left its cleanup never suspends,
        # and a finished generator is not handed to a (maybe closed) loop when collected.
        finalizer, self.finalizer = self.finalizer, None
        if finalizer is not None:
            try:
                finalizer.aclose().send(None)
            except (StopIteration, RuntimeError):
                pass

    async def aclose(self) -> None:
        conn, self.conn = self.conn, None
        self.savers.clear()
        if conn is not None and not conn.closed:
            await conn.close()


async def _close_at_loop_shutdown(state: LoopConnection) -> AsyncIterator[None]:
    # Suspended at its yield until asyncio.run's shutdown_asyncgens() closes it.
    try:
        yield
    finally:
        await state.aclose()


class Database:
    """Where one checkpointer (and the allowlist copies LangGraph makes of it) reads and writes."""

    def __init__(self, conn: str | psycopg.Connection[Any] | ConnectionPool | None, config: MemoryConfig) -> None:
        self.owned_pool: ConnectionPool | None = None
        if conn is None or isinstance(conn, str):
            self.dsn = resolve_dsn(conn, config)
            self.sync: psycopg.Connection[Any] | ConnectionPool = _open_pool(self.dsn, config)
            self.owned_pool = self.sync  # type: ignore[assignment]
        elif isinstance(conn, psycopg.Connection):
            if conn.closed:
                raise ConfigurationError("the psycopg Connection passed to the checkpointer is closed")
            if not conn.autocommit:
                raise ConfigurationError(
                    "the checkpointer needs an autocommit connection, as LangGraph's PostgresSaver does: "
                    "psycopg.connect(dsn, autocommit=True), or pass a ConnectionPool or a DSN"
                )
            self.sync = conn
            self.dsn = _dsn_of(conn)
        elif isinstance(conn, ConnectionPool):
            self.sync = conn
            with conn.connection() as c:
                if not c.autocommit:
                    raise ConfigurationError(
                        "the checkpointer needs a pool of autocommit connections, as LangGraph's PostgresSaver "
                        "does: ConnectionPool(dsn, kwargs={'autocommit': True, 'prepare_threshold': 0})"
                    )
                self.dsn = _dsn_of(c)
        else:
            hint = (
                "; async connections and pools belong to one event loop, so the checkpointer opens its own "
                "for each loop: pass a DSN or a sync Connection/ConnectionPool instead"
                if isinstance(conn, (psycopg.AsyncConnection,)) or type(conn).__name__ == "AsyncConnectionPool"
                else ""
            )
            raise ConfigurationError(
                "conn must be a DSN string, a psycopg Connection or a psycopg_pool ConnectionPool, "
                f"got {type(conn).__name__}{hint}"
            )
        # Held around each use of a single shared Connection (ours and LangGraph's); a pool
        # hands each user its own connection, but LangGraph's saver takes its lock regardless.
        self.sync_lock = threading.Lock()
        self._loops: dict[asyncio.AbstractEventLoop, LoopConnection] = {}
        self._guard = threading.Lock()
        self.closed = False

    # --- blocking side ---------------------------------------------------------------------

    def check_open(self) -> None:
        if self.closed:
            raise ConfigurationError("this checkpointer is closed; open a new one with open_checkpointer()")

    # --- async side ------------------------------------------------------------------------

    def _state_for(self, loop: asyncio.AbstractEventLoop) -> LoopConnection:
        with self._guard:
            self.check_open()
            state = self._loops.get(loop)
            if state is None:
                for other in [lo for lo in self._loops if lo.is_closed()]:
                    self._loops.pop(other).close_now()
                state = self._loops[loop] = LoopConnection(loop)
            return state

    async def loop_connection(self) -> LoopConnection:
        """This loop's connection, opened (or reopened, if it broke) on first use."""
        state = self._state_for(asyncio.get_running_loop())
        if state.conn is not None and not state.conn.closed:
            return state
        async with state.lock:
            if state.conn is None or state.conn.closed:
                state.savers.clear()
                try:
                    state.conn = await psycopg.AsyncConnection.connect(
                        self.dsn, **connect_timeout(self.dsn), **CONNECTION_KWARGS  # the DSN's own wins
                    )
                except psycopg.OperationalError as exc:
                    raise unreachable(self.dsn, exc) from exc
                if state.finalizer is None:
                    state.finalizer = _close_at_loop_shutdown(state)
                    await state.finalizer.asend(None)
        if self.closed:  # closed while we connected
            await state.aclose()
            self.check_open()
        return state

    def saver_for(self, state: LoopConnection, owner: Any, make: Callable[[], Any]) -> Any:
        """The async saver of one checkpointer object (``owner``) on this loop, made on first use."""
        saver = state.savers.get(owner)
        if saver is None:
            saver = state.savers[owner] = make()
        return saver

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection this object opened; a connection or pool passed in stays open."""
        with self._guard:
            self.closed = True
            states, self._loops = list(self._loops.values()), {}
        for state in states:
            state.close_now()
        if self.owned_pool is not None:
            self.owned_pool.close()
            self.owned_pool = None

    async def aclose(self) -> None:
        """:meth:`close`, closing the running loop's connection the asyncio way."""
        loop = asyncio.get_running_loop()
        with self._guard:
            state = self._loops.pop(loop, None)
        if state is not None:
            await state.aclose()
        self.close()
