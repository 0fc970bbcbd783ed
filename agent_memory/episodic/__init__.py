"""Episodic memory: what happened in a session, kept so a run can pick up where it stopped.

* :class:`PostgresCheckpointer` / :func:`open_checkpointer`: LangGraph's
  Postgres checkpointer on the memory service's database (embedded by
  default), one object for ``invoke`` and ``ainvoke``. Runs interrupted for
  human approval, runs whose model call failed, and page refreshes all resume
  from the thread's checkpoints, in any process.
* Session snapshots (:class:`SessionSnapshot`, written by
  ``agent_memory.middleware.episodic.SessionSnapshotMiddleware``): a compact,
  per-user view of each session for fast reload.
* The checkpoint archive (:class:`ArchiveCounts`): old checkpoints moved out
  of the hot tables, restorable.

Quick start::

    from langchain.agents import create_agent
    from agent_memory.episodic import open_checkpointer
    from agent_memory.middleware.episodic import SessionSnapshotMiddleware

    with open_checkpointer() as checkpointer:
        agent = create_agent(model, tools, checkpointer=checkpointer,
                             middleware=[SessionSnapshotMiddleware(checkpointer)])
        config = {"configurable": {"thread_id": "alice-1", "user_id": "alice"}}
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, config)
        checkpointer.list_sessions(user_id="alice")
"""

from .archive import ArchiveCounts
from .checkpointer import PostgresCheckpointer, open_checkpointer
from .snapshots import DEFAULT_STATE_KEYS, SessionSnapshot, build_snapshot

__all__ = [
    "DEFAULT_STATE_KEYS",
    "ArchiveCounts",
    "PostgresCheckpointer",
    "SessionSnapshot",
    "build_snapshot",
    "open_checkpointer",
]
