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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ..errors import ConfigurationError, DatabaseError, DatabaseUnavailableError
from ..queries.server import ping
from .failures import busy, first_line, refused_by_server, server_answer, server_down

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
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"database_url is not a valid PostgreSQL connection string ({exc}); "
            "expected something like postgresql://user:password@host:5432/dbname"
        ) from None
    for host in str(info.get("host") or "").split(","):
        problem = _host_problem(host.strip())
        if problem:
            raise ConfigurationError(
                f"database_url names the host {host.strip()!r}, which is not a valid host name ({problem}); "
                "fix the host in DATABASE_URL (or --database-url), e.g. postgresql://user:password@db.example.com:5432/dbname, "
                "or unset it to use the embedded server"
            )


def _host_problem(host: str) -> str | None:
    """Why ``host`` can never be looked up (an empty label as in ``a..b``, a label over 63
    characters), found before connecting; None for a name, an address or a socket directory.
    (The resolver would otherwise fail with a bare ``UnicodeError`` from the idna codec.)"""
    if not host or host.startswith(("/", "@")) or ":" in host:  # a socket directory, or an IPv6 address
        return None
    try:
        host.encode("idna")
    except UnicodeError as exc:
        return str(exc.__cause__ or exc).removeprefix("encoding with 'idna' codec failed ").strip("() ") or "bad label"
    return None


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
    service and the checkpointer both resolve it here, so by default they share one database.
    The URL answered searches ``config.db_schema`` first (:mod:`.schema`; as given for ``public``)."""
    from .schema import in_schema

    if config.distributed is not None:  # a Citus coordinator: its connections' settings (db.distributed)
        from .distributed import on_cluster

        if conn or config.database_url:
            return on_cluster(in_schema(conn or config.database_url or "", config.db_schema))
    if conn:
        return in_schema(conn, config.db_schema)
    if config.database_url:
        return in_schema(config.database_url, config.db_schema)
    from .embedded import ensure_embedded_server

    server = ensure_embedded_server(config.resolved_data_dir())
    server.ensure_database(DEFAULT_DATABASE)
    return in_schema(server.dsn(DEFAULT_DATABASE), config.db_schema)


# --- handing out connections ----------------------------------------------------------------
#
# A pool that can't hand out a connection is either busy (every connection in use) or talking
# to a server that is down, and the two need opposite advice. So we wait briefly, then find out
# whether the server accepts a connection at all: "down" is reported in about two seconds,
# "busy" only after the pool's whole timeout. A service that owns the embedded server starts it
# again instead of reporting it down.
#
# Finding out costs a connection, so it is done by one waiter at a time per pool and its verdict
# is shared with every other waiter for a second: a burst of thousands of waiting requests once
# opened thousands of probe connections, which the server refused ("too many clients") or could
# not even queue, and a swamped server was then reported down. No probe at all while every
# connection of the pool is with a caller: a connection in use is proof enough that the server
# is up, and a probe then would be one connection more than the pool allows.

#: how long to wait for a pooled connection before checking whether the server is up at all
_FIRST_WAIT = 1.0
#: the direct "does the server accept a connection" check (libpq's minimum is 2 s)
_PROBE_TIMEOUT = 2
#: a verdict this many seconds old is shared instead of checking again
_PROBE_FRESH = 1.0


@dataclass(frozen=True)
class _Verdict:
    """What the last check found: ``said`` is how its connection attempt failed (None: the
    server answered); ``restarted``: the server was found down and started again first."""

    said: Exception | None = None
    restarted: bool = False


@dataclass(eq=False)
class _Source:
    """Where a pool connects, and (for the embedded server we own) how to start it again."""

    dsn: str
    restart: Callable[[], None] | None = None
    lent: int = 0  # connections our callers hold now
    verdict: _Verdict | None = None
    checked_at: float = -1e9  # monotonic time of the last verdict
    checking: threading.Lock = field(default_factory=threading.Lock, repr=False)
    counting: threading.Lock = field(default_factory=threading.Lock, repr=False)
    pending: asyncio.Future[_Verdict] | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return _where(self.dsn)

    def fresh(self) -> _Verdict | None:
        """The last verdict while it is fresh enough to share."""
        if self.verdict is not None and time.monotonic() - self.checked_at < _PROBE_FRESH:
            return self.verdict
        return None

    def remember(self, verdict: _Verdict) -> _Verdict:
        self.verdict, self.checked_at = verdict, time.monotonic()
        return verdict

    def lend(self, n: int) -> None:
        with self.counting:
            self.lent += n


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


def _all_lent(source: _Source, pool: Any) -> bool:
    return source.lent >= pool.max_size


def _connect_probe(source: _Source, pool: Any) -> Exception | None:
    """One direct connection attempt: None if it worked, else how it failed."""
    try:
        psycopg.connect(source.dsn, **_probe_kwargs(pool)).close()
    except psycopg.Error as exc:
        return exc
    return None


async def _aconnect_probe(source: _Source, pool: Any) -> Exception | None:
    try:
        await (await psycopg.AsyncConnection.connect(source.dsn, **_probe_kwargs(pool))).close()
    except psycopg.Error as exc:
        return exc
    return None


def _check_server(source: _Source, pool: ConnectionPool) -> _Verdict:
    """Whether the server is up, found out by one thread at a time and shared (see above)."""
    with source.checking:
        shared = source.fresh()
        if shared is not None:
            return shared
        if _all_lent(source, pool):
            return source.remember(_Verdict())
        said = _connect_probe(source, pool)
        if server_answer(said) != "down" or source.restart is None:
            return source.remember(_Verdict(said))
        source.restart()
        pool.check()  # drop connections that died with the server, open fresh ones now
        return source.remember(_Verdict(_connect_probe(source, pool), restarted=True))


async def _acheck_server(source: _Source, pool: AsyncConnectionPool) -> _Verdict:
    """:func:`_check_server` for asyncio: waiters share one task (the restart runs in a thread)."""
    shared = source.fresh()
    if shared is not None:
        return shared
    loop = asyncio.get_running_loop()
    task = source.pending
    if task is None or task.done() or task.get_loop() is not loop:
        task = source.pending = loop.create_task(_afind_out(source, pool))
    return await asyncio.shield(task)


async def _afind_out(source: _Source, pool: AsyncConnectionPool) -> _Verdict:
    try:
        if _all_lent(source, pool):
            return source.remember(_Verdict())
        said = await _aconnect_probe(source, pool)
        if server_answer(said) != "down" or source.restart is None:
            return source.remember(_Verdict(said))
        await asyncio.to_thread(source.restart)
        await pool.check()
        return source.remember(_Verdict(await _aconnect_probe(source, pool), restarted=True))
    finally:
        source.pending = None


def _raise_if_down(source: _Source, verdict: _Verdict) -> None:
    """Raise what the verdict says when the server is not up: down, or refusing us."""
    answer = server_answer(verdict.said)
    if answer == "refused" and verdict.said is not None:
        raise DatabaseError(
            f"postgresql at {source.where} refused a new connection ({first_line(verdict.said)}); "
            "check the user, password and database in DATABASE_URL"
        ) from verdict.said
    if answer == "down":
        raise server_down(source.where, verdict.said, restarted=verdict.restarted) from verdict.said


def _checkout(pool: ConnectionPool) -> psycopg.Connection:
    """A connection from ``pool``, or the reason there is none (down vs busy), said as ours."""
    total = pool.timeout
    first = min(_FIRST_WAIT, total)
    try:
        return pool.getconn(timeout=first)
    except PoolTimeout:
        pass
    source = _source_of(pool)
    if source is not None:
        _raise_if_down(source, _check_server(source, pool))
    try:
        return pool.getconn(timeout=max(total - first, first))
    except PoolTimeout as exc:
        if source is None:
            raise busy("the pool's server", total, pool.max_size) from exc
        _raise_if_down(source, _check_server(source, pool))
        raise busy(source.where, total, pool.max_size) from exc


async def _acheckout(pool: AsyncConnectionPool) -> psycopg.AsyncConnection:
    """:func:`_checkout` for asyncio (same steps)."""
    total = pool.timeout
    first = min(_FIRST_WAIT, total)
    try:
        return await pool.getconn(timeout=first)
    except PoolTimeout:
        pass
    source = _source_of(pool)
    if source is not None:
        _raise_if_down(source, await _acheck_server(source, pool))
    try:
        return await pool.getconn(timeout=max(total - first, first))
    except PoolTimeout as exc:
        if source is None:
            raise busy("the pool's server", total, pool.max_size) from exc
        _raise_if_down(source, await _acheck_server(source, pool))
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
        source = _source_of(conn)
        if source is not None:
            source.lend(1)
        try:
            with c:
                yield c
        finally:
            if source is not None:
                source.lend(-1)
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
        source = _source_of(conn)
        if source is not None:
            source.lend(1)
        try:
            async with c:
                yield c
        finally:
            if source is not None:
                source.lend(-1)
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
