"""A burst of requests on a busy server: every caller waits its turn, nobody is told the server is
down, and finding out whether it is up costs at most one connection at a time.

A burst of thousands of waiting requests once opened one probe connection each; the server refused
them ("too many clients") or could not even queue them, and a server that was up the whole time
was reported down (issue 28). Here the database's ``CONNECTION LIMIT`` is below the pool's size,
so the pool can never fill and every probe is refused for lack of room, the case that broke.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from agent_memory import (
    AsyncMemoryService,
    DatabaseBusyError,
    DatabaseUnavailableError,
    MemoryConfig,
    MemoryService,
)
from agent_memory.db import connection
from agent_memory.db.failures import server_answer
from agent_memory.db.requests import Sql, arun, run

POOL_MAX = 4
#: below POOL_MAX, so the pool never fills and probes run, and are refused with "too many connections"
DB_LIMIT = 3


class Peak:
    """How many of something run at once, at most, and how many there were in all."""

    def __init__(self) -> None:
        self.now = self.peak = self.total = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.total += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


@pytest.fixture
def probes(monkeypatch) -> Peak:
    """Count the probe connections of ``agent_memory.db.connection``, sync and async."""
    peak = Peak()
    sync_probe, async_probe = connection._connect_probe, connection._aconnect_probe

    def counted(*args):
        peak.enter()
        try:
            return sync_probe(*args)
        finally:
            peak.leave()

    async def acounted(*args):
        peak.enter()
        try:
            return await async_probe(*args)
        finally:
            peak.leave()

    monkeypatch.setattr(connection, "_connect_probe", counted)
    monkeypatch.setattr(connection, "_aconnect_probe", acounted)
    return peak


@pytest.fixture
def connections(monkeypatch) -> Peak:
    """Count this process's connections to PostgreSQL, open or being opened (pool and probes)."""
    peak = Peak()
    sync_connect, async_connect = psycopg.Connection.connect.__func__, psycopg.AsyncConnection.connect.__func__
    sync_close, async_close = psycopg.Connection.close, psycopg.AsyncConnection.close

    def connect(cls, *args, **kwargs):
        peak.enter()
        try:
            conn = sync_connect(cls, *args, **kwargs)
        except BaseException:
            peak.leave()
            raise
        conn._counted = True
        return conn

    async def aconnect(cls, *args, **kwargs):
        peak.enter()
        try:
            conn = await async_connect(cls, *args, **kwargs)
        except BaseException:
            peak.leave()
            raise
        conn._counted = True
        return conn

    def close(self):
        if getattr(self, "_counted", False) and not self.closed:
            peak.leave()
        sync_close(self)

    async def aclose(self):
        if getattr(self, "_counted", False) and not self.closed:
            peak.leave()
        await async_close(self)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(connect))
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(aconnect))
    monkeypatch.setattr(psycopg.Connection, "close", close)
    monkeypatch.setattr(psycopg.AsyncConnection, "close", aclose)
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)  # bound once at import
    return peak


@pytest.fixture(scope="module")
def limited_dsn(fresh_dsn, embeddings) -> Iterator[str]:
    """A migrated database, used by a role that may hold at most DB_LIMIT connections (a
    superuser is exempt from connection limits, so the role is an ordinary one that owns it)."""
    admin_dsn = fresh_dsn()
    role = f"am_busy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT {DB_LIMIT}')
        conn.execute(f'ALTER DATABASE "{conn.info.dbname}" OWNER TO "{role}"')
        conn.execute(f'ALTER SCHEMA public OWNER TO "{role}"')
    info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
    dsn = psycopg.conninfo.make_conninfo(**dict(info, user=role))
    with MemoryService(dsn, embeddings=embeddings):
        pass  # migrated, as the role
    yield dsn
    with psycopg.connect(admin_dsn, autocommit=True) as conn:  # roles are cluster-wide: drop it
        conn.execute(f'REASSIGN OWNED BY "{role}" TO CURRENT_USER')
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE "{role}"')


def _nap(seconds: float):
    """An operation that holds its connection for a while."""
    yield Sql("SELECT pg_sleep(%s)", (seconds,), fetch="none")
    return True


def test_server_answer_tells_busy_from_down():
    assert server_answer(None) == "up"
    assert server_answer(psycopg.errors.TooManyConnections("sorry, too many clients already")) == "up"
    swamped = psycopg.OperationalError(
        'connection to server on socket "/tmp/.s.PGSQL.5432" failed: Resource temporarily unavailable'
    )
    assert server_answer(swamped) == "up"
    assert server_answer(psycopg.errors.InvalidPassword("password authentication failed")) == "refused"
    # what psycopg really raises for a refused connection attempt: no sqlstate, the server's words
    said = 'connection failed: connection to server on socket "/s/.s.PGSQL.5432" failed: FATAL:  '
    assert server_answer(psycopg.OperationalError(said + 'too many connections for role "r"')) == "up"
    assert server_answer(psycopg.OperationalError(said + "sorry, too many clients already")) == "up"
    assert server_answer(psycopg.OperationalError(said + 'database "x" does not exist')) == "refused"
    assert server_answer(psycopg.OperationalError(said + "the database system is shutting down")) == "down"
    assert server_answer(psycopg.OperationalError("connection refused")) == "down"


async def test_a_burst_of_async_calls_all_wait_their_turn(limited_dsn, embeddings, probes, connections):
    config = MemoryConfig(pool_max_size=POOL_MAX)
    async with AsyncMemoryService(limited_dsn, config=config, embeddings=embeddings) as service:
        user = service.for_user("burst-user")
        await user.add("I keep my bike in the hallway", dedupe=False)

        async def call(i: int):
            if i % 50 == 0:  # some of the service's own calls among the raw ones
                return len(await user.list()) == 1
            return await arun(_nap(0.004), service.conn, embeddings)

        results = await asyncio.gather(*(call(i) for i in range(2000)), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of 2000 calls failed, e.g. {errors[0]!r}"
    assert all(r is True for r in results)
    assert probes.total >= 1, "no call waited long enough to check the server: the test needs a longer burst"
    assert probes.peak == 1, f"{probes.peak} probes ran at once"
    # the pool's connections (at most DB_LIMIT get in), its one attempt to open another, one probe
    assert connections.peak <= POOL_MAX + 1, f"{connections.peak} connections at once for a pool of {POOL_MAX}"


def test_threads_waiting_on_a_full_pool_share_one_probe(limited_dsn, embeddings, probes, connections):
    config = MemoryConfig(pool_max_size=POOL_MAX)
    with MemoryService(limited_dsn, config=config, embeddings=embeddings) as service:
        with ThreadPoolExecutor(24) as workers:
            # 24 callers, 3 connections, 0.2 s each: a caller waits about 1.4 s, past the first wait
            futures = [workers.submit(run, _nap(0.2), service.conn, embeddings) for _ in range(48)]
            results = [f.exception() or f.result() for f in futures]
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of 48 calls failed, e.g. {errors[0]!r}"
    assert probes.total >= 1 and probes.peak == 1, f"{probes.peak} probes ran at once"
    assert connections.peak <= POOL_MAX + 1, f"{connections.peak} connections at once for a pool of {POOL_MAX}"


def test_a_full_pool_is_not_probed_at_all(dsn, probes):
    """Every connection with a caller is proof the server is up: waiting costs no connection."""
    with ConnectionPool(dsn, min_size=1, max_size=1, timeout=2, kwargs={"autocommit": True}) as pool:
        with connection.get_connection(pool):
            with pytest.raises(DatabaseBusyError, match="is up but all 1 pooled connections"):
                with connection.get_connection(pool):
                    pass
    assert probes.total == 0


def _dead_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_pool_whose_server_is_gone_says_down_quickly(probes):
    dsn = f"postgresql://u@127.0.0.1:{_dead_port()}/db"
    with ConnectionPool(dsn, min_size=0, max_size=2, timeout=30, open=True) as pool:
        errors: list[BaseException] = []

        def call() -> None:
            started = time.monotonic()
            try:
                with connection.get_connection(pool):
                    pass
            except BaseException as exc:  # noqa: BLE001 - checked below
                errors.append(exc)
            assert time.monotonic() - started < 10, "down was said only after the pool's timeout"

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(errors) == 8 and all(isinstance(e, DatabaseUnavailableError) for e in errors), errors
    assert "is down" in str(errors[0]) and "start it (or fix DATABASE_URL)" in str(errors[0])
    assert probes.peak == 1 and probes.total <= 2  # one verdict, shared (two if a second passed)


async def test_an_async_pool_whose_server_is_gone_says_down_quickly(probes):
    dsn = f"postgresql://u@127.0.0.1:{_dead_port()}/db"
    async with AsyncConnectionPool(dsn, min_size=0, max_size=2, timeout=30) as pool:

        async def call() -> BaseException | None:
            started = time.monotonic()
            try:
                async with connection.aget_connection(pool):
                    return None
            except BaseException as exc:  # noqa: BLE001 - checked below
                assert time.monotonic() - started < 10, "down was said only after the pool's timeout"
                return exc

        errors = await asyncio.gather(*(call() for _ in range(50)))
    assert all(isinstance(e, DatabaseUnavailableError) for e in errors), errors
    assert "is down" in str(errors[0])
    assert probes.peak == 1 and probes.total <= 2
