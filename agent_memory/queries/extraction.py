"""Extraction runs (the per-session rate limit counts them) and the decisions a run records."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from .types import Statement

__all__ = [
    "close_extraction_run",
    "count_extraction_runs",
    "fail_extraction_run",
    "insert_decision",
    "insert_extraction_run",
    "insert_rejection",
    "lock_extraction_session",
    "start_extraction_run",
]


def lock_extraction_session(user_id: str, session_id: str) -> Statement:
    """The session's extraction lock, held until the transaction ends: runs are counted and
    recorded under it, so two at once cannot both take the last one."""
    return "SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (f"extraction:{user_id}:{session_id}",)


def count_extraction_runs(user_id: str, session_id: str, window_seconds: float) -> Statement:
    """How many runs the session recorded in the last ``window_seconds`` (as ``n``)."""
    return (
        "SELECT count(*) AS n FROM memory_extraction_runs WHERE user_id = %s AND session_id = %s"
        " AND created_at > now() - make_interval(secs => %s)",
        (user_id, session_id, window_seconds),
    )


def insert_extraction_run(user_id: str, session_id: str) -> Statement:
    """Record one run, counted and done (a run recorded by hand), answering its ``id``."""
    return ("INSERT INTO memory_extraction_runs (user_id, session_id) VALUES (%s, %s) RETURNING id",
            (user_id, session_id))


def start_extraction_run(user_id: str, session_id: str, project_id: str | None, resource_id: Any,
                         extractor: str) -> Statement:
    """Record one run, ``running`` (of ``extractor``, reading the conversation ``resource_id``),
    answering its ``id``."""
    return (
        "INSERT INTO memory_extraction_runs (user_id, session_id, project_id, resource_id, extractor, status)"
        " VALUES (%s, %s, %s, %s, %s, 'running') RETURNING id",
        (user_id, session_id, project_id, resource_id, extractor),
    )


def close_extraction_run(run_id: int, counts: dict[str, int]) -> Statement:
    """The run is done, with its decisions counted by kind."""
    return ("UPDATE memory_extraction_runs SET status = 'done', counts = %s, finished_at = now() WHERE id = %s",
            (Jsonb(counts), run_id))


def fail_extraction_run(run_id: int, error: str) -> Statement:
    """The run failed, with the error (already free of secrets)."""
    return ("UPDATE memory_extraction_runs SET status = 'failed', error = %s, finished_at = now() WHERE id = %s",
            (error, run_id))


def insert_decision(run_id: int, user_id: str, scope: str, scope_id: str | None, proposal: str, memory_type: str,
                    decision: str, decided_by: str, target_id: Any, result_id: Any, similarity: float | None,
                    reason: str) -> Statement:
    """One consolidation decision of a run, with who made it."""
    return (
        "INSERT INTO memory_decisions (run_id, user_id, scope, scope_id, proposal, memory_type, decision, decided_by,"
        " target_id, result_id, similarity, reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (run_id, user_id, scope, scope_id, proposal, memory_type, decision, decided_by, target_id, result_id,
         similarity, reason),
    )


def insert_rejection(run_id: int, user_id: str, scope: str, scope_id: str, proposal: str, memory_type: str,
                     reason: str) -> Statement:
    """A proposal the gate refused, recorded as a ``rejected`` decision of the run."""
    return (
        "INSERT INTO memory_decisions (run_id, user_id, scope, scope_id, proposal, memory_type, decision, decided_by,"
        " reason) VALUES (%s, %s, %s, %s, %s, %s, 'rejected', 'gate', %s)",
        (run_id, user_id, scope, scope_id, proposal, memory_type, reason),
    )
