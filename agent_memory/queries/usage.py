"""How a caller's memory is used: recalls, and what the agent middleware injected lately.

Each search hit or injection counts as a recall (``access_count``, ``last_used_at``: written by
:func:`.items.touch_items`); these statements read them back over what the caller may see.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .types import Query, Statement

__all__ = ["INJECTED_KEPT", "least_recalled", "most_recalled", "recall_totals", "recalls_by_ids", "record_injected"]

#: how many turns' injections a conversation remembers
INJECTED_KEPT = 10


def recall_totals(where: Query) -> Query:
    """The recalls of the active rows in ``where`` and the last time one was used."""
    filt, params = where
    return (
        sql.SQL("SELECT coalesce(sum(m.access_count), 0)::bigint AS recalls, max(m.last_used_at) AS last_used"
                " FROM memory_items m WHERE m.status = 'active' AND {filt}").format(filt=filt),
        params,
    )


def most_recalled(where: Query, k: int) -> Query:
    """The ``k`` active rows of ``where`` recalled most (then most recently)."""
    filt, params = where
    return (
        sql.SQL("SELECT m.id, m.content, m.access_count, m.recall_count, m.last_used_at FROM memory_items m"
                " WHERE m.status = 'active' AND m.access_count > 0 AND {filt}"
                " ORDER BY m.access_count DESC, m.last_used_at DESC NULLS LAST, m.id LIMIT %(u_k)s").format(filt=filt),
        dict(params, u_k=k),
    )


def least_recalled(where: Query, k: int) -> Query:
    """The ``k`` active rows of ``where`` recalled least (never first; then the oldest)."""
    filt, params = where
    return (
        sql.SQL("SELECT m.id, m.content, m.access_count, m.recall_count, m.last_used_at FROM memory_items m"
                " WHERE m.status = 'active' AND {filt}"
                " ORDER BY m.access_count, m.last_used_at NULLS FIRST, m.created_at, m.id LIMIT %(u_k)s").format(filt=filt),
        dict(params, u_k=k),
    )


def recalls_by_ids(where: Query, ids: list[Any]) -> Query:
    """The rows of ``ids`` that are in ``where`` (what the caller may see), with their recalls."""
    filt, params = where
    return (
        sql.SQL("SELECT m.id, m.content, m.access_count, m.recall_count, m.last_used_at FROM memory_items m"
                " WHERE m.id = ANY(%(u_ids)s) AND {filt}").format(filt=filt),
        dict(params, u_ids=list(ids)),
    )


def record_injected(resource_id: Any, memory_ids: list[str]) -> Statement:
    """Remember on the session's conversation which memories were injected in this turn (the
    last :data:`INJECTED_KEPT` turns are kept)."""
    injected = ("(coalesce(metadata->'injected', '[]'::jsonb)"
                " || jsonb_build_array(jsonb_build_object('at', now(), 'ids', %(ids)s::jsonb)))")
    return (
        "UPDATE memory_resources SET metadata = metadata || jsonb_build_object('injected',"
        " (SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM jsonb_array_elements(" + injected + ")"
        " WITH ORDINALITY AS t(e, i) WHERE i > jsonb_array_length(" + injected + ") - %(keep)s))"
        " WHERE id = %(id)s",
        {"id": resource_id, "ids": Jsonb(memory_ids), "keep": INJECTED_KEPT},
    )
