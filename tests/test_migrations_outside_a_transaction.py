"""A migration can say it is not transactional (``CREATE INDEX CONCURRENTLY``): its statements
run one by one outside any transaction, under the migrations' lock held for the session, and
the ``Autocommit`` request that carries them, on both drivers."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import psycopg
import pytest

from agent_memory import MigrationError
from agent_memory.db.migrations import MIGRATION_LOCK_KEY, MIGRATIONS, Migration, migrate
from agent_memory.db.requests import Autocommit, Commit, Sql, arun, run

CONCURRENT = Migration(
    "0999_concurrent_index",
    """
    -- re-runnable: a CREATE INDEX CONCURRENTLY that failed leaves an invalid index behind
    DROP INDEX CONCURRENTLY IF EXISTS memory_items_test_concurrent_idx;
    CREATE INDEX CONCURRENTLY memory_items_test_concurrent_idx ON memory_items (created_at); -- no lock on writes
    """,
    transactional=False,
)


def _index_valid(conn: psycopg.Connection, name: str) -> bool | None:
    row = conn.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                       " WHERE c.relname = %s", (name,)).fetchone()
    return None if row is None else bool(row[0])


def _recorded(conn: psycopg.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM agent_memory_migrations WHERE name = %s", (name,)).fetchone() is not None


def _lock_is_free(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as other:
        free = other.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK_KEY,)).fetchone()[0]
        if free:
            other.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        return bool(free)


def test_a_concurrent_index_build_is_applied_outside_a_transaction_and_recorded(fresh_dsn):
    dsn = fresh_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert run(migrate(384, "test", MIGRATIONS + (CONCURRENT,)), conn, None)[-1] == CONCURRENT.name
        assert _index_valid(conn, "memory_items_test_concurrent_idx") is True and _recorded(conn, CONCURRENT.name)
        assert run(migrate(384, "test", MIGRATIONS + (CONCURRENT,)), conn, None) == []  # once
    assert _lock_is_free(dsn)


def test_the_same_statement_in_a_transactional_migration_is_refused_by_postgresql(fresh_dsn):
    """What ``transactional=False`` is for."""
    inside = Migration(CONCURRENT.name, CONCURRENT.sql)
    with psycopg.connect(fresh_dsn(), autocommit=True) as conn:
        with pytest.raises(MigrationError, match="cannot run inside a transaction block"):
            run(migrate(384, "test", MIGRATIONS + (inside,)), conn, None)
        assert not _recorded(conn, CONCURRENT.name)


async def test_the_asyncio_driver_applies_it_too_on_a_callers_connection_not_in_autocommit(fresh_dsn):
    dsn = fresh_dsn()
    async with await psycopg.AsyncConnection.connect(dsn) as conn:  # autocommit off, as psycopg's default
        applied = await arun(migrate(384, "test", MIGRATIONS + (CONCURRENT,)), conn, None)
        assert applied[-1] == CONCURRENT.name
        assert conn.autocommit is False  # given back as it came
    with psycopg.connect(dsn) as conn:
        assert _index_valid(conn, "memory_items_test_concurrent_idx") is True and _recorded(conn, CONCURRENT.name)
    assert _lock_is_free(dsn)


def test_a_failure_leaves_it_unrecorded_the_lock_free_and_a_rerun_finishes_it(fresh_dsn):
    dsn = fresh_dsn()
    broken = Migration(CONCURRENT.name, CONCURRENT.sql + "SELECT no_such_function();\n", transactional=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(MigrationError, match=r"failed at its statement 3 and is not transactional.*runs again"):
            run(migrate(384, "test", MIGRATIONS + (broken,)), conn, None)
        assert not _recorded(conn, CONCURRENT.name)
        assert _index_valid(conn, "memory_items_test_concurrent_idx") is True  # statements before it stay
        assert _lock_is_free(dsn)
        # fixed, it runs again from its first statement
        assert run(migrate(384, "test", MIGRATIONS + (CONCURRENT,)), conn, None) == [CONCURRENT.name]
        assert _recorded(conn, CONCURRENT.name)


def test_statements_are_split_at_line_ends_and_dollar_bodies_refused():
    assert CONCURRENT.statements(None) == [
        "-- re-runnable: a CREATE INDEX CONCURRENTLY that failed leaves an invalid index behind\n"
        "    DROP INDEX CONCURRENTLY IF EXISTS memory_items_test_concurrent_idx",
        "CREATE INDEX CONCURRENTLY memory_items_test_concurrent_idx ON memory_items (created_at)"]
    sized = Migration("0999_sized", "ALTER TABLE t ADD COLUMN v vector({dimensions});\n", transactional=False)
    assert sized.statements(384) == ["ALTER TABLE t ADD COLUMN v vector(384)"]
    with pytest.raises(MigrationError, match="not transactional.*dollar quoting"):
        Migration("0999_body", "DO $$ BEGIN PERFORM 1; END $$;", transactional=False)
    assert Migration("0999_body", "DO $$ BEGIN PERFORM 1; END $$;").transactional  # fine in a transaction


# --- the Autocommit request ---------------------------------------------------------------------


def _autocommit_in_a_transaction() -> Generator[Any, Any, str]:
    yield Sql("SELECT 1", fetch="none")
    try:
        yield Autocommit("SELECT 1")
    except RuntimeError as exc:
        return str(exc)
    return "not refused"


def test_autocommit_is_refused_inside_a_transaction_on_both_drivers(dsn, memory):
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert "must not run inside a transaction; yield Commit() first" in run(_autocommit_in_a_transaction(), conn,
                                                                                None)


async def test_autocommit_is_refused_inside_a_transaction_asyncio(dsn, amemory):
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        assert "must not run inside a transaction" in await arun(_autocommit_in_a_transaction(), conn, None)


def _create_outside() -> Generator[Any, Any, int]:
    yield Sql("SELECT 1", fetch="none")
    yield Commit()
    yield Autocommit("CREATE TABLE autocommit_probe (x int)")
    yield Sql("INSERT INTO autocommit_probe VALUES (1)", fetch="none")
    raise ValueError("the operation fails after its Autocommit statement")


def test_an_autocommit_statement_stays_when_the_operation_fails_later(fresh_dsn):
    """Its statement is committed on its own: the later transaction is rolled back, it is not."""
    dsn = fresh_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(ValueError, match="fails after"):
            run(_create_outside(), conn, None)
        assert conn.execute("SELECT count(*) FROM autocommit_probe").fetchone() == (0,)


def test_concurrent_starts_apply_it_once_and_none_deadlocks_on_the_index_build(fresh_dsn):
    """``CREATE INDEX CONCURRENTLY`` waits for every transaction older than it, so a start that
    waited for the migrations' lock inside a transaction would wait on the build while the build
    waits on it (PostgreSQL then kills one). Starts wait for the lock between short transactions
    instead: all of them finish, the index is built once."""
    dsn = fresh_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        run(migrate(384, "test"), conn, None)
    slow = Migration(CONCURRENT.name, "SELECT pg_sleep(1.5);\n" + CONCURRENT.sql, transactional=False)  # the others queue
    results: list[Any] = []

    def start() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as own:
                results.append(run(migrate(384, "test", MIGRATIONS + (slow,)), own, None))
        except Exception as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(results) == 3 and all(isinstance(r, list) for r in results), results
    assert sorted(name for r in results for name in r) == [CONCURRENT.name]
    with psycopg.connect(dsn) as conn:
        assert _index_valid(conn, "memory_items_test_concurrent_idx") is True
    assert _lock_is_free(dsn)
