"""When the database fails: every psycopg error reaches the caller as a DatabaseError that says
what happened and what to do, a server that is down is reported as down within seconds (not as
a pool-size problem), the embedded server a service owns comes back by itself, and no
acknowledged write is lost over a server kill.

The kill tests run their own embedded server (a copy of a cluster migrated once for the module)
so that killing it does not disturb the session's server.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg_pool import ConnectionPool

from agent_memory import (
    AsyncMemoryService,
    DatabaseBusyError,
    DatabaseError,
    DatabaseUnavailableError,
    MemoryConfig,
    MemoryService,
)
from agent_memory.db.connection import DEFAULT_DATABASE, connect_timeout
from agent_memory.db.embedded import ensure_embedded_server, stop_embedded_server
from agent_memory.db.failures import connection_lost, database_error, lost, refused_by_server
from agent_memory.db.requests import Commit, Sql, _Progress, run

POOL_SIZE_ADVICE = "MEMORY_POOL_MAX_SIZE"


# --- verdicts, without a server ---------------------------------------------------------------


def test_a_lost_session_is_told_apart_from_a_refused_statement():
    assert connection_lost(psycopg.errors.AdminShutdown("terminating connection"))
    assert connection_lost(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not connection_lost(psycopg.errors.UniqueViolation("duplicate key"))
    assert not connection_lost(psycopg.errors.QueryCanceled("canceling statement due to statement timeout"))
    assert refused_by_server(psycopg.errors.InvalidPassword("password authentication failed"))
    assert not refused_by_server(psycopg.OperationalError("connection refused"))


def test_lost_says_whether_the_write_may_have_been_applied():
    progress = _Progress(pooled=True)
    before = progress.lost(psycopg.errors.AdminShutdown("bye"))
    assert isinstance(before, DatabaseUnavailableError) and not before.maybe_applied
    assert "nothing was written" in str(before)
    during = progress.lost(psycopg.errors.AdminShutdown("bye"), committing=True)
    assert during.maybe_applied and "may or may not have been applied" in str(during)
    progress.committed = True
    assert progress.lost(psycopg.OperationalError("gone")).maybe_applied
    passed = lost(psycopg.OperationalError("gone"), maybe_applied=False, passed_in=True)
    assert "open a new one" in str(passed)


def test_only_the_first_statement_of_a_transaction_is_retried_and_only_once():
    progress = _Progress(pooled=True)
    assert progress.retry() and not progress.retry()
    in_tx = _Progress(pooled=True, in_tx=True)
    assert not in_tx.retry()
    assert not _Progress(pooled=False).retry()


def test_other_errors_become_database_errors_that_say_what_to_do():
    err = database_error(psycopg.errors.SerializationFailure("could not serialize"))
    assert isinstance(err, DatabaseError) and "repeat the call" in str(err) and "nothing was written" in str(err)
    err = database_error(psycopg.errors.UndefinedTable("relation x does not exist"), committed=True)
    assert "already committed" in str(err) and "migrate" in str(err)
    assert str(err)[0].islower()


def test_the_dsn_connect_timeout_wins_over_ours():
    assert connect_timeout("postgresql://u@h/db?connect_timeout=1") == {}
    assert connect_timeout("host=h dbname=db connect_timeout=7") == {}
    assert connect_timeout("postgresql://u@h/db") == {"connect_timeout": 10}


# --- against the session's server ---------------------------------------------------------------


def _backend_pids(dsn: str) -> set[int]:
    """Backends of ``dsn``'s database other than the asking one."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return {r[0] for r in rows}


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_dead_pooled_connections_are_replaced_without_the_caller_noticing(fresh_dsn, embeddings):
    dsn = fresh_dsn()
    with MemoryService(dsn, config=MemoryConfig(pool_max_size=3), embeddings=embeddings) as service:
        kept = service.for_user("u-dead-pool").add("I keep my notes in plain text files")
        for pid in _backend_pids(dsn):  # as after a server restart: every idle connection is dead
            _terminate(dsn, pid)
        started = time.monotonic()
        assert [m.id for m in service.for_user("u-dead-pool").list()] == [kept.id]
        assert time.monotonic() - started < 5


def _op_killing_its_connection(dsn: str, *, commit_between: bool, then: str = "stmt"):
    pid = (yield Sql("SELECT pg_backend_pid() AS pid", fetch="one"))["pid"]
    if commit_between:
        yield Commit()
    _terminate(dsn, pid)
    if then == "commit":
        return None  # the driver commits at the end: on a dead connection
    return (yield Sql("SELECT 1 AS one", fetch="one"))["one"]


def test_a_connection_lost_mid_transaction_is_reported_not_repeated(memory, dsn):
    with pytest.raises(DatabaseUnavailableError, match="nothing was written") as caught:
        run(_op_killing_its_connection(dsn, commit_between=False), memory.conn, memory.embeddings)
    assert not caught.value.maybe_applied


def test_a_connection_lost_at_commit_may_or_may_not_have_been_applied(memory, dsn):
    with pytest.raises(DatabaseUnavailableError, match="may or may not have been applied") as caught:
        run(_op_killing_its_connection(dsn, commit_between=False, then="commit"), memory.conn, memory.embeddings)
    assert caught.value.maybe_applied


def test_a_new_transaction_after_a_commit_gets_a_fresh_connection(memory, dsn):
    assert run(_op_killing_its_connection(dsn, commit_between=True), memory.conn, memory.embeddings) == 1


def test_a_passed_in_connection_that_died_is_reported_as_ours(dsn, embeddings, tenant):
    conn = psycopg.connect(dsn, autocommit=True)
    service = MemoryService(conn, embeddings=embeddings)
    _terminate(dsn, conn.info.backend_pid)
    with pytest.raises(DatabaseUnavailableError, match="open a new one"):
        service.for_user(tenant.user).list()
    conn.close()


def test_a_failing_statement_is_a_database_error_and_nothing_is_written(memory, tenant):
    def op():
        yield Sql("INSERT INTO memory_scopes_missing_table VALUES (1)", fetch="none")

    with pytest.raises(DatabaseError, match="rolled back and nothing was written") as caught:
        run(op(), memory.conn, memory.embeddings)
    assert isinstance(caught.value.__cause__, psycopg.errors.UndefinedTable)


def test_a_pool_with_every_connection_in_use_is_reported_busy_not_down(dsn, embeddings, tenant):
    with ConnectionPool(dsn, min_size=1, max_size=1, timeout=2, kwargs={"autocommit": True}) as pool:
        service = MemoryService(pool, embeddings=embeddings)
        with pool.connection():  # someone else holds the only connection
            started = time.monotonic()
            with pytest.raises(DatabaseBusyError, match="is up but all 1 pooled connections stayed in use"):
                service.for_user(tenant.user).list()
            assert time.monotonic() - started < 5
        assert service.for_user(tenant.user).list() == []


def test_a_server_that_never_answers_fails_within_the_dsn_connect_timeout(embeddings):
    """A local socket that accepts but never speaks: as a black-holed host, without the network."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="could not connect"):
            MemoryService(f"postgresql://u@127.0.0.1:{port}/db?connect_timeout=1", embeddings=embeddings)
        took = time.monotonic() - started
    assert took < 4, f"took {took:.1f}s; the URL said connect_timeout=1 (libpq's minimum is 2)"


async def test_the_async_service_also_fails_within_the_dsn_connect_timeout(embeddings):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="could not connect"):
            async with AsyncMemoryService(f"postgresql://u@127.0.0.1:{port}/db?connect_timeout=2",
                                          embeddings=embeddings):
                pass
        took = time.monotonic() - started
    assert took < 4, f"took {took:.1f}s; the URL said connect_timeout=2"


# --- killing the server -------------------------------------------------------------------------


def _temp_dir() -> Path:
    shm = Path("/dev/shm")
    roomy = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2**30
    return Path(tempfile.mkdtemp(prefix="am-failure-", dir=shm if roomy else None))


def _copy_cluster(source: Path, target: Path) -> None:
    """Copy a stopped cluster, owned (as PostgreSQL insists) by whoever owns the original."""
    shutil.copytree(source, target, symlinks=True)
    owner = source.stat().st_uid
    os.lchown(target, owner, -1)
    for root, dirs, files in os.walk(target):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), owner, -1)


@pytest.fixture(scope="module")
def migrated_cluster(embeddings) -> Iterator[Path]:
    """A stopped cluster whose agent_memory database is migrated: copies start in a second."""
    base = _temp_dir()
    pgdata = base / "pgdata"
    try:
        with MemoryService(config=MemoryConfig(data_dir=pgdata), embeddings=embeddings):
            pass
        stop_embedded_server(pgdata)
        (pgdata / ".handle_pids.json").unlink(missing_ok=True)
        yield pgdata
    finally:
        stop_embedded_server(pgdata)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def own_server(migrated_cluster) -> Iterator[Path]:
    """A data directory of our own (copied from the migrated cluster); its server is stopped after."""
    base = _temp_dir()
    pgdata = base / "pgdata"
    _copy_cluster(migrated_cluster, pgdata)
    try:
        yield pgdata
    finally:
        stop_embedded_server(pgdata)
        shutil.rmtree(base, ignore_errors=True)


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _kill_postmaster(pgdata: Path) -> int:
    pid = _postmaster_pid(pgdata)
    os.kill(pid, signal.SIGKILL)
    return pid


def _kill_server(pgdata: Path) -> None:
    """SIGKILL the postmaster and wait until its backends are gone too: a backend notices its
    postmaster's death only at its next wait, and until then a pooled connection still answers."""
    children = psutil.Process(_postmaster_pid(pgdata)).children()
    _kill_postmaster(pgdata)
    _, alive = psutil.wait_procs(children, timeout=5)
    for proc in alive:  # the whole server is down, as after a crash of the machine's postgres
        proc.kill()
    psutil.wait_procs(alive, timeout=5)


def _ids_in(pgdata: Path, user_id: str) -> set:
    dsn = ensure_embedded_server(pgdata).dsn(DEFAULT_DATABASE)
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM memory_items WHERE user_id = %s", (user_id,))}


def _check_failures(failures: list[tuple[BaseException, float]]) -> None:
    for exc, took in failures:
        assert isinstance(exc, DatabaseError), f"a raw {type(exc).__name__} reached the caller: {exc}"
        assert POOL_SIZE_ADVICE not in str(exc), f"an outage was reported as a pool-size problem: {exc}"
        assert took < 10, f"a call during the outage took {took:.1f}s: {exc}"


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_killed_embedded_server_comes_back_and_no_acknowledged_write_is_lost(own_server, embeddings):
    service = MemoryService(config=MemoryConfig(data_dir=own_server, pool_max_size=4), embeddings=embeddings)
    acked: list = []
    failures: list[tuple[BaseException, float]] = []
    slowest = [0.0]
    stop = threading.Event()

    def save_in_a_loop(writer: int) -> None:
        i = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                item = service.for_user("killer").add(f"Writer {writer} saved fact number {i} for the kill test", dedupe=False)
                acked.append(item.id)
            except Exception as exc:  # noqa: BLE001 - every failure is checked below
                failures.append((exc, time.monotonic() - started))
            slowest[0] = max(slowest[0], time.monotonic() - started)
            i += 1

    writers = [threading.Thread(target=save_in_a_loop, args=(n,)) for n in range(3)]
    for writer in writers:
        writer.start()
    try:
        _wait_for(lambda: len(acked) >= 30, 30, "writes before the kill")
        old = _kill_postmaster(own_server)
        before = len(acked)
        _wait_for(lambda: len(acked) >= before + 30, 30, "writes after the kill")
    finally:
        stop.set()
        for writer in writers:
            writer.join(30)
        service.close()
    _check_failures(failures)
    assert slowest[0] < 10, f"a call took {slowest[0]:.1f}s across the outage"
    assert _postmaster_pid(own_server) != old and psutil.pid_exists(_postmaster_pid(own_server))
    assert set(acked) <= _ids_in(own_server, "killer")


@pytest.mark.slow
async def test_the_async_service_brings_a_killed_embedded_server_back(own_server, embeddings):
    acked: list = []
    failures: list[tuple[BaseException, float]] = []
    config = MemoryConfig(data_dir=own_server, pool_max_size=4)
    async with AsyncMemoryService(config=config, embeddings=embeddings) as service:

        async def save(i: int) -> None:
            started = time.monotonic()
            try:
                item = await service.for_user("akiller").add(f"Async fact number {i} for the kill test", dedupe=False)
                acked.append(item.id)
            except Exception as exc:  # noqa: BLE001 - every failure is checked below
                failures.append((exc, time.monotonic() - started))
            assert time.monotonic() - started < 10, "a call took too long across the outage"

        for i in range(10):
            await save(i)
        old = _kill_postmaster(own_server)
        await asyncio.gather(*(save(i) for i in range(10, 14)))  # in flight while the server is gone
        for i in range(14, 24):
            await save(i)
    _check_failures(failures)
    assert len(acked) >= 20
    assert _postmaster_pid(own_server) != old
    assert set(acked) <= _ids_in(own_server, "akiller")


@pytest.mark.slow
def test_a_server_someone_else_runs_is_reported_down_quickly_then_used_again(own_server, embeddings):
    """With a DSN given, the server is not ours to restart: calls say it is down, in seconds."""
    server = ensure_embedded_server(own_server)
    dsn = server.dsn(DEFAULT_DATABASE)
    with MemoryService(dsn, embeddings=embeddings) as service:
        saved = service.for_user("outsider").add("I water the plants on Sundays")
        _kill_server(own_server)
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailableError) as caught:
                service.for_user("outsider").list()
            took = time.monotonic() - started
            assert took < 4, f"reporting the outage took {took:.1f}s"
            assert POOL_SIZE_ADVICE not in str(caught.value)
        assert "down" in str(caught.value) or "lost the connection" in str(caught.value)
        ensure_embedded_server(own_server)  # its owner starts it again
        assert [m.id for m in service.for_user("outsider").list()] == [saved.id]
