"""Write a session snapshot at the end of every agent run (``agent_memory.middleware.episodic``).

The snapshot (:class:`agent_memory.episodic.SessionSnapshot`) lets a UI list a
user's sessions and reopen one without loading LangGraph checkpoints. It is
written in ``after_agent``, so a run that completes (or ends a turn) updates
it; a run paused by an interrupt updates it when it finishes after resuming.

Whose snapshot it is comes from the run's config or context
(:func:`~agent_memory.identity.identity_from`, shared with the checkpointer), never from the
model; a run without a ``user_id`` or without a ``thread_id`` is skipped
silently, like the other memory layers do with ``require_user=False``.
A snapshot is a cache of the checkpoint, so a database error while writing it
is logged and does not fail a run that has otherwise finished.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import psycopg
from langchain.agents.middleware import AgentMiddleware
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent_memory.episodic import PostgresCheckpointer
from agent_memory.episodic.snapshots import DEFAULT_STATE_KEYS, check_thread_id
from agent_memory.errors import ConfigurationError, DatabaseError, InvalidInputError

from .identity import identity_from

__all__ = ["SessionSnapshotMiddleware"]

logger = logging.getLogger(__name__)

_RUN_CHECKPOINTER = "__pregel_checkpointer"  # where LangGraph puts the run's checkpointer in the config
_NS_SEP = "|"  # joins the namespaces of nested graphs in checkpoint_ns


class SessionSnapshotMiddleware(AgentMiddleware):
    """Save ``session_state_snapshot`` for the run's user and thread after each run.

    ``checkpointer``: the :class:`~agent_memory.episodic.PostgresCheckpointer`
    whose database holds the snapshots; by default the agent's own checkpointer
    (it must then be a ``PostgresCheckpointer``). ``state_keys``: state entries
    copied into the snapshot when present (todo list, working memory).
    """

    def __init__(
        self, checkpointer: PostgresCheckpointer | None = None, *, state_keys: Iterable[str] = DEFAULT_STATE_KEYS,
    ) -> None:
        super().__init__()
        if checkpointer is not None and not isinstance(checkpointer, PostgresCheckpointer):
            raise ConfigurationError(
                "checkpointer must be an agent_memory.episodic.PostgresCheckpointer (snapshots live in its "
                f"database), got {type(checkpointer).__name__}; or leave it out to use the agent's own"
            )
        self.checkpointer = checkpointer
        self.state_keys = tuple(state_keys)

    def _target(self, runtime: Runtime[Any]) -> tuple[PostgresCheckpointer, dict[str, Any]] | None:
        """The checkpointer and the save_snapshot arguments for this run, or None to skip it."""
        config = get_config()
        configurable = config.get("configurable") or {}
        thread_id = configurable.get("thread_id")
        if thread_id is None or _NS_SEP in (configurable.get("checkpoint_ns") or ""):
            # No thread, or an agent running inside another graph's step (a subagent): its
            # state is not the session's, and must not replace the session's snapshot.
            return None
        identity = identity_from(config, getattr(runtime, "context", None), required=False)
        if identity is None:
            return None
        try:
            thread_id = check_thread_id(thread_id)
        except InvalidInputError as exc:  # LangGraph takes any thread id; a cache need not fail the run
            logger.warning("not saving a session snapshot: %s", exc)
            return None
        checkpointer = self.checkpointer or configurable.get(_RUN_CHECKPOINTER)
        if not isinstance(checkpointer, PostgresCheckpointer):
            raise ConfigurationError(
                "SessionSnapshotMiddleware needs a PostgresCheckpointer: pass one to the middleware, or "
                "build the agent with checkpointer=open_checkpointer()"
            )
        checkpoint_id = configurable.get("checkpoint_id") or (configurable.get("checkpoint_map") or {}).get("")
        return checkpointer, {
            "user_id": identity.user_id, "project_id": identity.project_id, "thread_id": thread_id,
            "checkpoint_id": checkpoint_id, "state_keys": self.state_keys,
        }

    def after_agent(self, state: Mapping[str, Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        target = self._target(runtime)
        if target is not None:
            checkpointer, kwargs = target
            try:
                checkpointer.save_snapshot(state, **kwargs)
            except (psycopg.Error, DatabaseError):
                logger.warning("could not save the session snapshot of thread %r", kwargs["thread_id"], exc_info=True)
        return None

    async def aafter_agent(self, state: Mapping[str, Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        target = self._target(runtime)
        if target is not None:
            checkpointer, kwargs = target
            try:
                await checkpointer.asave_snapshot(state, **kwargs)
            except (psycopg.Error, DatabaseError):
                logger.warning("could not save the session snapshot of thread %r", kwargs["thread_id"], exc_info=True)
        return None
