"""Setting up LangGraph's checkpoint tables beside ours.

Our own tables (episodic ones included) come from the one list of migrations in
:mod:`agent_memory.db.migrations`, applied in one order by every entry point: the
checkpointer calls :func:`~agent_memory.db.migrations.migrate` first, then this.

LangGraph's ``PostgresSaver.setup()`` keeps its own migrations table but
takes no lock, so two processes starting at once could both apply a step; we
run it under a session-level advisory lock (its index builds are
``CONCURRENTLY`` and cannot run inside a transaction).
"""

from __future__ import annotations

from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver

from ..queries.server import advisory_lock, advisory_unlock

__all__ = ["setup_database"]

# "agent-memory langgraph setup"; distinct from the migrations' key.
_SETUP_LOCK_KEY = 7_236_105_818_453_790_124


def setup_database(conn: psycopg.Connection[Any]) -> None:
    """Bring LangGraph's checkpoint tables up to date over one autocommit connection.

    Its setup runs several statements each, which a prepared statement cannot hold, so
    preparing is switched off meanwhile (LangGraph's connections prepare everything).
    """
    threshold, conn.prepare_threshold = conn.prepare_threshold, None
    try:
        conn.execute(*advisory_lock(_SETUP_LOCK_KEY))
        try:
            PostgresSaver(conn).setup()
        finally:
            conn.execute(*advisory_unlock(_SETUP_LOCK_KEY))
    finally:
        conn.prepare_threshold = threshold
