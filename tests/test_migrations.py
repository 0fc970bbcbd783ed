"""Named, transactional, race-free migrations, and the recorded embedding dimension."""

from __future__ import annotations

import multiprocessing
import warnings

import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from agent_memory import EmbeddingDimensionMismatchError, MemoryService, MigrationError
from agent_memory.db.migrations import MIGRATIONS, Migration, migrate
from agent_memory.db.requests import run


def applied(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM agent_memory_migrations ORDER BY name")]


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
