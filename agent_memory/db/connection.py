"""Accept a connection or a pool through one small helper, and open pools we own.

A caller may hand us a DSN, a ``psycopg.Connection`` or a ``psycopg_pool``
pool (or their async twins). Operations only ever ask for "a connection for
this transaction"; :func:`get_connection` answers that for every kind. One
shared connection is serialised with a lock, because an operation's
transaction spans several statements and two threads must not interleave in it.

When a pool has no connection to give, this is also where we find out why:
the server is down (said within seconds; the embedded server a service owns is
started again) or every connection is busy (said after the pool's timeout).
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ..errors import ConfigurationError, DatabaseError, DatabaseUnavailableError
from ..queries.server import ping
from .failures import busy, first_line, refused_by_server, server_down

if TYPE_CHECKING:
    from ..config import MemoryConfig

__all__ = [
    "DEFAULT_DATABASE",
    "AsyncConn",
    "Conn",
    "aflush",
    "aget_connection",
    "aopen_pool",
    "connect_timeout",
    "embedded_restarter",
    "flush",
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

#: seconds to wait for a new connection when the DSN names no ``connect_timeout`` of its own
_CONNECT_TIMEOUT = 10
#: seconds a pool we open may take to make its first connections
_OPEN_TIMEOUT = 30.0
#: seconds an operation waits for a pooled connection while the server is up but busy
_POOL_TIMEOUT = 15.0


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
    """A first connection failed: refused by a running server (a :class:`DatabaseError`) or no
    server answered at all (:class:`DatabaseUnavailableError`)."""
    kind = DatabaseError if refused_by_server(exc) else DatabaseUnavailableError
    return kind(
        f"could not connect to postgresql at {redact_dsn(dsn)}: {exc}; check DATABASE_URL "
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


# --- handing out connections ----------------------------------------------------------------
#
# A pool that can't hand out a connection is either busy (every connection in use) or talking
# to a server that is down, and the two need opposite advice. So we wait briefly, then ask the
# server directly whether it accepts a connection at all: "down" is reported in about two
# seconds, "busy" only after the pool's whole timeout. A service that owns the embedded server
# starts it again instead of reporting it down.

#: how long to wait for a pooled connection before checking whether the server is up at all
_FIRST_WAIT = 1.0
#: the direct "does the server accept a connection" check (libpq's minimum is 2 s)
_PROBE_TIMEOUT = 2
#: a server that answered a check within this many seconds is not checked again
_PROBE_FRESH = 1.0


@dataclass(eq=False)
class _Source:
    """Where a pool connects, and (for the embedded server we own) how to start it again."""

    dsn: str
    restart: Callable[[], None] | None = None
    up_at: float = -1e9  # monotonic time of the last successful check

    @property
    def where(self) -> str:
        return _where(self.dsn)


_sources: weakref.WeakKeyDictionary[object, _Source] = weakref.WeakKeyDictionary()


def _where(dsn: str) -> str:
    """The server in words for messages: host (or socket directory), port and database."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable dsn>"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    return f"{host}{port}/{info.get('dbname') or info.get('user') or ''}"


def _source_of(pool: object) -> _Source | None:
    with _locks_guard:
        source = _sources.get(pool)
        if source is None:
            conninfo = getattr(pool, "conninfo", None)
            if not isinstance(conninfo, str) or not conninfo:
                return None  # a callable conninfo: we can't check the server ourselves
            source = _sources[pool] = _Source(conninfo)
        return source


def _probe_kwargs(pool: Any) -> dict[str, Any]:
    kwargs = pool.kwargs if isinstance(getattr(pool, "kwargs", None), dict) else {}
    return {**kwargs, "connect_timeout": _PROBE_TIMEOUT}


def _probe_verdict(source: _Source, exc: Exception | None) -> Exception | None:
    """None when the server is up (and remember when), else the error saying it is down.
    A server that answers but refuses us (password, database) raises that refusal now."""
    if exc is None or (refused_by_server(exc) and getattr(exc, "sqlstate", "") == "53300"):
        source.up_at = time.monotonic()
        return None
    if refused_by_server(exc):
        raise DatabaseError(
            f"postgresql at {source.where} refused a new connection ({first_line(exc)}); "
            "check the user, password and database in DATABASE_URL"
        ) from exc
    return exc


def _probe(source: _Source, pool: Any) -> Exception | None:
    if time.monotonic() - source.up_at < _PROBE_FRESH:
        return None
    try:
        psycopg.connect(source.dsn, **_probe_kwargs(pool)).close()
    except psycopg.Error as exc:
        return _probe_verdict(source, exc)
    return _probe_verdict(source, None)


async def _aprobe(source: _Source, pool: Any) -> Exception | None:
    if time.monotonic() - source.up_at < _PROBE_FRESH:
        return None
    try:
        await (await psycopg.AsyncConnection.connect(source.dsn, **_probe_kwargs(pool))).close()
    except psycopg.Error as exc:
        return _probe_verdict(source, exc)
    return _probe_verdict(source, None)


def _checkout(pool: ConnectionPool) -> psycopg.Connection:
    """A connection from ``pool``, or the reason there is none (down vs busy), said as ours."""
    total = pool.timeout
    first = min(_FIRST_WAIT, total)
    try:
        return pool.getconn(timeout=first)
    except PoolTimeout:
        pass
    source = _source_of(pool)
    restarted = False
    if source is not None:
        down = _probe(source, pool)
        if down is not None:
            if source.restart is None:
                raise server_down(source.where, down) from down
            source.restart()
            restarted = True
    pool.check()  # drop connections that died with the server, open fresh ones now
    try:
        return pool.getconn(timeout=max(total - first, first))
    except PoolTimeout as exc:
        if source is None:
            raise busy("the pool's server", total, pool.max_size) from exc
        if restarted:
            raise server_down(source.where, None, restarted=True) from exc
        down = _probe(source, pool)
        if down is not None:
            raise server_down(source.where, down) from exc
        raise busy(source.where, total, pool.max_size) from exc


async def _acheckout(pool: AsyncConnectionPool) -> psycopg.AsyncConnection:
    """:func:`_checkout` for asyncio (same steps; the restart runs in a thread)."""
    total = pool.timeout
    first = min(_FIRST_WAIT, total)
    try:
        return await pool.getconn(timeout=first)
    except PoolTimeout:
        pass
    source = _source_of(pool)
    restarted = False
    if source is not None:
        down = await _aprobe(source, pool)
        if down is not None:
            if source.restart is None:
                raise server_down(source.where, down) from down
            await asyncio.to_thread(source.restart)
            restarted = True
    await pool.check()
    try:
        return await pool.getconn(timeout=max(total - first, first))
    except PoolTimeout as exc:
        if source is None:
            raise busy("the pool's server", total, pool.max_size) from exc
        if restarted:
            raise server_down(source.where, None, restarted=True) from exc
        down = await _aprobe(source, pool)
        if down is not None:
            raise server_down(source.where, down) from exc
        raise busy(source.where, total, pool.max_size) from exc


def flush(conn: Conn) -> None:
    """After a connection died: drop the pool's other dead connections so the next user gets a
    live one (a passed-in single connection can't be replaced)."""
    if isinstance(conn, ConnectionPool):
        conn.check()


async def aflush(conn: AsyncConn) -> None:
    if isinstance(conn, AsyncConnectionPool):
        await conn.check()


@contextmanager
def get_connection(conn: Conn) -> Iterator[psycopg.Connection]:
    if isinstance(conn, ConnectionPool):
        c = _checkout(conn)
        try:
            with c:
                yield c
        finally:
            conn.putconn(c)
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
        c = await _acheckout(conn)
        try:
            async with c:
                yield c
        finally:
            await conn.putconn(c)
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


# --- opening pools ----------------------------------------------------------------------------


def connect_timeout(dsn: str) -> dict[str, Any]:
    """``connect_timeout`` for a connection to ``dsn``: none when the DSN names its own (the
    user's value wins), else ours, so a black-holed host fails in seconds, not minutes."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        info = {}
    return {} if info.get("connect_timeout") not in (None, "") else {"connect_timeout": _CONNECT_TIMEOUT}


def embedded_restarter(conn: str | None, config: MemoryConfig) -> Callable[[], None] | None:
    """For a component that owns the embedded server (no DSN given, no ``database_url``): a
    function that starts the server again after its process died. None otherwise: a server
    someone else runs is theirs to restart."""
    if conn or config.database_url:
        return None
    data_dir = config.resolved_data_dir()

    def restart() -> None:
        from .embedded import ensure_embedded_server

        ensure_embedded_server(data_dir)

    return restart


def open_pool(
    dsn: str, *, min_size: int, max_size: int, kwargs: dict[str, Any] | None = None, name: str = "agent-memory",
    restart: Callable[[], None] | None = None, check: bool = False,
) -> ConnectionPool:
    """A pool of autocommit connections (plus ``kwargs``), opened and checked now so a bad DSN
    fails at startup. ``restart``: how to start the server again when it is found down (the
    embedded server we own). ``check``: test each connection as it leaves the pool, for users
    (LangGraph's savers) that can't retry a statement on a dead one; our drivers retry instead,
    which is faster than the pool's backoff after a failed check."""
    _check_dsn(dsn)
    timeout = connect_timeout(dsn)
    pool = ConnectionPool(
        dsn, min_size=min_size, max_size=max_size, kwargs={"autocommit": True, **timeout, **(kwargs or {})},
        open=False, name=name, timeout=_POOL_TIMEOUT, check=ConnectionPool.check_connection if check else None,
    )
    _sources[pool] = _Source(dsn, restart)
    try:
        # one direct connection first: a wrong database or password is reported at once with the
        # server's own words, where the pool would keep retrying until its timeout
        psycopg.connect(dsn, **timeout).close()
        pool.open(wait=min_size > 0, timeout=_OPEN_TIMEOUT)
        with pool.connection(timeout=_OPEN_TIMEOUT) as c:
            c.execute(*ping())
    except (PoolTimeout, psycopg.OperationalError) as exc:
        pool.close()
        raise unreachable(dsn, exc) from exc
    return pool


async def aopen_pool(
    dsn: str, *, min_size: int, max_size: int, restart: Callable[[], None] | None = None
) -> AsyncConnectionPool:
    """:func:`open_pool` for asyncio."""
    _check_dsn(dsn)
    timeout = connect_timeout(dsn)
    pool = AsyncConnectionPool(
        dsn, min_size=min_size, max_size=max_size, kwargs={"autocommit": True, **timeout}, open=False,
        name="agent-memory-async", timeout=_POOL_TIMEOUT,
    )
    _sources[pool] = _Source(dsn, restart)
    try:
        await (await psycopg.AsyncConnection.connect(dsn, **timeout)).close()
        await pool.open(wait=min_size > 0, timeout=_OPEN_TIMEOUT)
        async with pool.connection(timeout=_OPEN_TIMEOUT) as c:
            await c.execute(*ping())
    except (PoolTimeout, psycopg.OperationalError) as exc:
        await pool.close()
        raise unreachable(dsn, exc) from exc
    return pool
