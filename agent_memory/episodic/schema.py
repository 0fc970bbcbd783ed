"""Setting up the tables episodic memory needs: LangGraph's and our own.

A checkpointer may be the first thing to touch a database, before any
``MemoryService`` has migrated it, and it has no embedder to size the
``vector(N)`` column with. So it applies only the embedding-independent
episodic migrations, by name, through the same ``agent_memory_migrations``
record and advisory lock as :func:`agent_memory.db.migrations.migrate`; a
later ``MemoryService`` sees it recorded and applies the rest.

LangGraph's ``PostgresSaver.setup()`` keeps its own migrations table but
takes no lock, so two processes starting at once could both apply a step; we
run it under a session-level advisory lock (its index builds are
``CONCURRENTLY`` and cannot run inside a transaction).
"""

from __future__ import annotations

from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver

from ..db.migrations import MIGRATIONS, apply_migrations
from ..db.requests import Op, run

__all__ = ["EPISODIC_MIGRATIONS", "ensure_episodic_schema", "setup_database"]

#: the migrations a checkpointer applies by itself (none of them depends on the embedding size)
EPISODIC_MIGRATIONS = ("0005_episodic", "0006_thread_owners")

# "agent-memory langgraph setup"; distinct from the migrations' key.
_SETUP_LOCK_KEY = 7_236_105_818_453_790_124


def ensure_episodic_schema(names: tuple[str, ...] = EPISODIC_MIGRATIONS) -> Op[list[str]]:
    """Apply the named migrations if they are not recorded yet; answer those applied now."""
    by_name = {m.name: m for m in MIGRATIONS}
    return (yield from apply_migrations([by_name[name] for name in names], 0))  # no {dimensions} in them


def setup_database(conn: psycopg.Connection[Any]) -> list[str]:
    """Bring LangGraph's checkpoint tables and ours up to date over one autocommit connection.

    Migrations are several statements each, which a prepared statement cannot hold, so
    preparing is switched off meanwhile (LangGraph's connections prepare everything).
    """
    threshold, conn.prepare_threshold = conn.prepare_threshold, None
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK_KEY,))
        try:
            PostgresSaver(conn).setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))
        return run(ensure_episodic_schema(), conn, None)
    finally:
        conn.prepare_threshold = threshold
