"""Sixteen concurrent saves of one fact leave exactly one active item: threads (pool) and asyncio."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import psycopg

from agent_memory import MemoryConfig, MemoryService

FACT = "I am vegetarian and never eat fish"
VARIANTS = [FACT, FACT.lower(), FACT + ".", "I'm vegetarian and never eat fish"]


def active_rows(dsn: str, user_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT count(*) FROM memory_items WHERE user_id = %s AND status = 'active'", (user_id,)
        ).fetchone()[0]


def test_sixteen_threads_saving_one_fact(dsn, embeddings, tenant):
    config = MemoryConfig(pool_max_size=16)
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(
                lambda i: service.for_user(tenant.user).add(VARIANTS[i % len(VARIANTS)]),
                range(16),
            ))
    assert len({r.id for r in results}) == 1
    assert sum(not r.deduplicated for r in results) == 1
    assert active_rows(dsn, tenant.user) == 1


async def test_sixteen_tasks_saving_one_fact(amemory, dsn, tenant):
    results = await asyncio.gather(*(
        amemory.for_user(tenant.user).add(VARIANTS[i % len(VARIANTS)]) for i in range(16)
    ))
    assert len({r.id for r in results}) == 1
    assert active_rows(dsn, tenant.user) == 1


def test_one_shared_connection_is_safe_across_threads(dsn, embeddings, tenant):
    """A single psycopg Connection passed in is serialised, not interleaved mid-transaction."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        service = MemoryService(conn, embeddings=embeddings)
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(
                lambda i: service.for_user(tenant.user).add(FACT), range(8)
            ))
        found = service.for_user(tenant.user).search("diet")
        assert not conn.closed  # the caller's connection stays theirs
    assert len({r.id for r in results}) == 1 and found[0].id == results[0].id
