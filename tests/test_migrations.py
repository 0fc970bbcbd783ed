"""Named, transactional, race-free migrations, and the recorded embedding dimension."""

from __future__ import annotations

import multiprocessing
import warnings

import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from agent_memory import EmbeddingDimensionMismatchError, MemoryConfig, MemoryService, MigrationError
from agent_memory.db.migrations import MIGRATIONS, Migration, migrate
from agent_memory.db.requests import run
from agent_memory.episodic import PostgresCheckpointer


def applied(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM agent_memory_migrations ORDER BY name")]


def applied_in_order(dsn: str) -> list[str]:
    """The recorded migrations in the order they were applied (each in a transaction of its own)."""
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM agent_memory_migrations ORDER BY applied_at")]


def test_first_start_applies_every_migration_once(fresh_dsn, embeddings):
    dsn = fresh_dsn()
    with MemoryService(dsn, embeddings=embeddings) as first:
        assert first.applied_migrations == [m.name for m in MIGRATIONS]
    with MemoryService(dsn, embeddings=embeddings) as second:
        assert second.applied_migrations == []
    assert applied(dsn) == sorted(m.name for m in MIGRATIONS)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT value FROM agent_memory_meta WHERE key = 'embedding_dimensions'"
                            ).fetchone() == ("384",)


def _start(dsn: str, queue) -> None:  # runs in a child process
    from langchain_core.embeddings import DeterministicFakeEmbedding

    try:
        with MemoryService(dsn, embeddings=DeterministicFakeEmbedding(size=384)) as service:
            queue.put(service.applied_migrations)
    except Exception as exc:  # report, don't hang the parent
        queue.put(repr(exc))


def test_concurrent_first_starts_do_not_race(fresh_dsn):
    dsn = fresh_dsn()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_start, args=(dsn, queue)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(isinstance(r, list) for r in results), results
    # each migration applied exactly once, by whichever process held the lock at the time
    applied_by_all = [name for r in results for name in r]
    assert sorted(applied_by_all) == sorted(m.name for m in MIGRATIONS)
    assert applied(dsn) == sorted(m.name for m in MIGRATIONS)


def test_a_failing_migration_rolls_back_with_its_record(fresh_dsn):
    dsn = fresh_dsn()
    broken = MIGRATIONS + (Migration("0999_broken", "CREATE TABLE half_done (x int); SELECT no_such_function()"),)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(MigrationError, match="0999_broken"):
            run(migrate(384, "test", broken), conn, None)
        assert "0999_broken" not in applied(dsn)
        assert conn.execute("SELECT to_regclass('half_done')").fetchone() == (None,)
        # everything before it stayed applied
        assert len(applied(dsn)) == len(MIGRATIONS)


def test_dimension_mismatch_is_a_clear_error_at_startup(fresh_dsn, embeddings):
    dsn = fresh_dsn()
    MemoryService(dsn, embeddings=embeddings).close()
    with pytest.raises(EmbeddingDimensionMismatchError, match="384-dimensional.*1536-dimensional"):
        MemoryService(dsn, embeddings=DeterministicFakeEmbedding(size=1536))


def test_same_size_other_model_warns(fresh_dsn, embeddings):
    dsn = fresh_dsn()
    MemoryService(dsn, embeddings=embeddings).close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        MemoryService(dsn, embeddings=DeterministicFakeEmbedding(size=384)).close()
    assert any("not comparable" in str(w.message) for w in caught)


def test_migration_names_are_unique_and_ordered():
    names = [m.name for m in MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)


def test_the_checkpointer_and_the_service_apply_one_order(fresh_dsn, embeddings):
    """Whichever starts first on a new database, the same migrations go in, in list order."""
    config = MemoryConfig.defaults()
    by_checkpointer, by_service = fresh_dsn(), fresh_dsn()
    with PostgresCheckpointer(by_checkpointer, config=config) as checkpointer:
        first = checkpointer.applied_migrations
    with MemoryService(by_service, config=config, embeddings=embeddings) as memory:
        second = memory.applied_migrations
    assert first == second == [m.name for m in MIGRATIONS]
    assert applied_in_order(by_checkpointer) == applied_in_order(by_service) == [m.name for m in MIGRATIONS]

    # the service that follows the checkpointer finds nothing to do, and the vector column it
    # finds is the size of its embedder (the configuration's), so it is not refused
    with MemoryService(by_checkpointer, config=config, embeddings=embeddings) as memory:
        assert memory.applied_migrations == []
    with PostgresCheckpointer(by_service, config=config) as checkpointer:
        assert checkpointer.applied_migrations == []
    with psycopg.connect(by_checkpointer) as conn:
        meta = dict(conn.execute("SELECT key, value FROM agent_memory_meta").fetchall())
    assert meta["embedding_dimensions"] == "384" and meta["embedding_model"].startswith("local:")


def test_a_checkpointer_keeps_the_size_a_database_was_made_with(fresh_dsn):
    """A checkpointer configured for another embedder never resizes a database, nor refuses it
    (it stores no vectors): a migration that needs the size gets the recorded one."""
    dsn = fresh_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:  # a service with a bigger model got as far as 0002
        run(migrate(1536, "test", MIGRATIONS[:2]), conn, None)
    with PostgresCheckpointer(dsn, config=MemoryConfig.defaults()) as checkpointer:  # local: 384
        assert checkpointer.applied_migrations == [m.name for m in MIGRATIONS[2:]]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                            " WHERE attrelid = 'memory_items'::regclass AND attname = 'embedding'"
                            ).fetchone() == ("vector(1536)",)
        # 1536 dimensions are too many for the search index to carry the vector (see search_index)
        index = conn.execute("SELECT pg_get_indexdef('memory_items_search_idx'::regclass)").fetchone()[0]
    assert "embedding_half" not in index
