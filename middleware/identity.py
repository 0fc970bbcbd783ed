"""Whose memory a run uses: read from the run's config or context, never from the model.

The reading itself lives in :mod:`agent_memory.identity`, shared with the
checkpointer and session snapshots, so every layer of a run sees the same
user; this module keeps the names the middleware has always exported.
A run names its user (and optionally project, session, team and org) in
``config["configurable"]`` or in the agent's context; when both name a field
with different values the run is refused
(:class:`~agent_memory.errors.IdentityConflictError`).
"""

from __future__ import annotations

from agent_memory.identity import HOW_TO_PASS_IDENTITY, identity_from, read_identity_fields

__all__ = ["HOW_TO_PASS_IDENTITY", "identity_from", "read_identity_fields"]
