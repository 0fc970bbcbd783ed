"""The turns of a conversation that wait for an extraction run (kept on its ``memory_resources``
row, in ``metadata``), and the conversations of a user that have some.

A conversation's ``metadata`` holds ``waiting`` (the turns recorded but not yet read by a run, as
JSON, secrets withheld), ``budget_waits`` (how many times a run was due but the session's runs
were used up) and ``budget_warned`` (that was logged once). Each statement changes them in one
step on the row, so two writers at once add up instead of overwriting each other.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from .types import Statement

__all__ = ["MAX_WAITING_TURNS", "clear_waiting", "select_waiting_conversations", "stash_turns"]

#: at most this many turns wait on one conversation (the oldest go first beyond it: with
#: ``max_extractions=0`` nothing would ever read them)
MAX_WAITING_TURNS = 10_000

_KEEP_LAST = (
    "(SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM jsonb_array_elements({list}) WITH ORDINALITY"
    " AS t(e, i) WHERE i > jsonb_array_length({list}) - %(max)s)"
)


def stash_turns(resource_id: Any, turns: list[dict[str, Any]], cursor: str | None, *,
                budget_wait: bool = False) -> Statement:
    """Add ``turns`` to the conversation's waiting turns and move its cursor past them (None
    keeps it). ``budget_wait``: they wait because the session's runs are used up (counted, and
    marked as logged); answers whether that was logged before (``warned``)."""
    waiting = "(coalesce(r.metadata->'waiting', '[]'::jsonb) || %(turns)s)"
    return (
        "UPDATE memory_resources r SET metadata = r.metadata || jsonb_build_object('waiting', "
        + _KEEP_LAST.format(list=waiting) + ")"
        " || CASE WHEN %(wait)s THEN jsonb_build_object("
        "'budget_waits', coalesce((r.metadata->>'budget_waits')::int, 0) + 1, 'budget_warned', true)"
        " ELSE '{}'::jsonb END,"
        " cursor = coalesce(%(cursor)s, r.cursor), updated_at = now()"
        " FROM memory_resources old WHERE r.id = %(id)s AND old.id = r.id"
        " RETURNING coalesce((old.metadata->>'budget_warned')::boolean, false) AS warned",
        {"id": resource_id, "turns": Jsonb(turns), "cursor": cursor, "wait": budget_wait, "max": MAX_WAITING_TURNS},
    )


def clear_waiting(resource_id: Any, read: int) -> Statement:
    """Drop the first ``read`` waiting turns (the ones a run just read; turns stashed meanwhile stay)."""
    return (
        "UPDATE memory_resources SET metadata = metadata || jsonb_build_object('waiting',"
        " (SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb)"
        "  FROM jsonb_array_elements(coalesce(metadata->'waiting', '[]'::jsonb)) WITH ORDINALITY AS t(e, i)"
        "  WHERE i > %(read)s)), updated_at = now() WHERE id = %(id)s",
        {"id": resource_id, "read": read},
    )


def select_waiting_conversations(user_id: str, *, idle_seconds: float, limit: int = 20) -> Statement:
    """The sessions of ``user_id`` whose conversation has turns waiting and no new turn for at
    least ``idle_seconds`` (0: all of them), the longest waiting first: session and project."""
    return (
        "SELECT session_id, project_id FROM memory_resources WHERE user_id = %(u)s AND kind = 'conversation'"
        " AND scope = 'session' AND external_id IS NOT NULL"
        " AND jsonb_array_length(coalesce(metadata->'waiting', '[]'::jsonb)) > 0"
        " AND updated_at <= now() - make_interval(secs => %(idle)s) ORDER BY updated_at, id LIMIT %(limit)s",
        {"u": user_id, "idle": float(idle_seconds), "limit": limit},
    )
