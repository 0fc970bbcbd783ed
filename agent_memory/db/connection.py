"""Accept a connection or a pool through one small helper, and open pools we own.

A caller may hand us a DSN, a ``psycopg.Connection`` or a ``psycopg_pool``
pool (or their async twins). Operations only ever ask for "a connection for
this transaction"; :func:`get_connection` answers that for every kind. One
shared connection is serialised with a lock, because an operation's
transaction spans several statements and two threads must not interleave in it.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Union

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ..errors import ConfigurationError, DatabaseError

if TYPE_CHECKING:
    from ..config import MemoryConfig

__all__ = [
    "DEFAULT_DATABASE",
    "AsyncConn",
    "Conn",
    "aget_connection",
    "aopen_pool",
    "get_connection",
    "open_pool",
    "redact_dsn",
    "resolve_dsn",
    "unreachable",
]

#: the database agent-memory creates and uses on the embedded server
DEFAULT_DATABASE = "agent_memory"

Conn = Union[psycopg.Connection, ConnectionPool]
AsyncConn = Union[psycopg.AsyncConnection, AsyncConnectionPool]

_locks: weakref.WeakKeyDictionary[object, threading.Lock] = weakref.WeakKeyDictionary()
_alocks: weakref.WeakKeyDictionary[object, asyncio.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()

_CONNECT_TIMEOUT = 30.0


def redact_dsn(dsn: str) -> str:
    """The DSN with any password removed, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable dsn>"
    if "password" in info:
        info["password"] = "***"
    return psycopg.conninfo.make_conninfo(**info)


def _check_dsn(dsn: str) -> None:
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"database_url is not a valid PostgreSQL connection string ({exc}); "
            "expected something like postgresql://user:password@host:5432/dbname"
        ) from None


def unreachable(dsn: str, exc: Exception) -> DatabaseError:
    return DatabaseError(
        f"could not connect to PostgreSQL at {redact_dsn(dsn)}: {exc}; check DATABASE_URL "
        "(or unset it to use the embedded server)"
    )


def resolve_dsn(conn: str | None, config: MemoryConfig) -> str:
    """The database a component uses when given ``conn`` (a DSN or nothing): that DSN, else
    ``config.database_url``, else the embedded server's ``agent_memory`` database. The memory
    service and the checkpointer both resolve it here, so by default they share one database."""
    if conn:
        return conn
    if config.database_url:
        return config.database_url
    from .embedded import ensure_embedded_server

    server = ensure_embedded_server(config.resolved_data_dir())
    server.ensure_database(DEFAULT_DATABASE)
    return server.dsn(DEFAULT_DATABASE)


def _busy(exc: PoolTimeout) -> DatabaseError:
    return DatabaseError(
        f"no database connection became free in time ({exc}); raise MEMORY_POOL_MAX_SIZE "
        "or check that the server is reachable"
    )


@contextmanager
def get_connection(conn: Conn) -> Iterator[psycopg.Connection]:
    if isinstance(conn, ConnectionPool):
        try:
            with conn.connection() as c:
                yield c
        except PoolTimeout as exc:
            raise _busy(exc) from exc
    elif isinstance(conn, psycopg.Connection):
        with _locks_guard:
            lock = _locks.setdefault(conn, threading.Lock())
        with lock:
            yield conn
    else:
        raise ConfigurationError(
            f"expected a psycopg Connection or ConnectionPool, got {type(conn).__name__}; "
            "async connections and pools go to AsyncMemoryService"
        )


@asynccontextmanager
async def aget_connection(conn: AsyncConn) -> AsyncIterator[psycopg.AsyncConnection]:
    if isinstance(conn, AsyncConnectionPool):
        try:
            async with conn.connection() as c:
                yield c
        except PoolTimeout as exc:
            raise _busy(exc) from exc
    elif isinstance(conn, psycopg.AsyncConnection):
        with _locks_guard:
            lock = _alocks.setdefault(conn, asyncio.Lock())
        async with lock:
            yield conn
    else:
        raise ConfigurationError(
            f"expected a psycopg AsyncConnection or AsyncConnectionPool, got {type(conn).__name__}; "
            "sync connections and pools go to MemoryService"
        )


def open_pool(
    dsn: str, *, min_size: int, max_size: int, kwargs: dict[str, Any] | None = None, name: str = "agent-memory"
) -> ConnectionPool:
    """A pool of autocommit connections (plus ``kwargs``), opened and checked now so a bad DSN
    fails at startup."""
    _check_dsn(dsn)
    pool = ConnectionPool(
        dsn, min_size=min_size, max_size=max_size, kwargs={"autocommit": True, **(kwargs or {})}, open=False,
        name=name,
    )
    try:
        # one direct connection first: a wrong database or password is reported at once with the
        # server's own words, where the pool would keep retrying until its timeout
        psycopg.connect(dsn, connect_timeout=int(_CONNECT_TIMEOUT)).close()
        pool.open(wait=min_size > 0, timeout=_CONNECT_TIMEOUT)
        with pool.connection(timeout=_CONNECT_TIMEOUT) as c:
            c.execute("SELECT 1")
    except (PoolTimeout, psycopg.OperationalError) as exc:
        pool.close()
        raise unreachable(dsn, exc) from exc
    return pool


async def aopen_pool(dsn: str, *, min_size: int, max_size: int) -> AsyncConnectionPool:
    _check_dsn(dsn)
    pool = AsyncConnectionPool(
        dsn, min_size=min_size, max_size=max_size, kwargs={"autocommit": True}, open=False,
        name="agent-memory-async",
    )
    try:
        await (await psycopg.AsyncConnection.connect(dsn, connect_timeout=int(_CONNECT_TIMEOUT))).close()
        await pool.open(wait=min_size > 0, timeout=_CONNECT_TIMEOUT)
        async with pool.connection(timeout=_CONNECT_TIMEOUT) as c:
            await c.execute("SELECT 1")
    except (PoolTimeout, psycopg.OperationalError) as exc:
        await pool.close()
        raise unreachable(dsn, exc) from exc
    return pool
