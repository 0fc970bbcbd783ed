"""Context: what a transcript's next turns read of the turns already stored before them."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from .types import Query

__all__ = ["transcript_tail"]


def transcript_tail(where: Query, conversation: str, window: int) -> Query:
    """Of the rows of ``where`` (the caller's visible memories, :func:`.visibility.item_filter`)
    loaded from the transcript ``conversation`` (``source_id``), the last ``max(window, 1)`` by
    position (``position``, ``content``), newest first, each with ``last``: the highest position
    stored. No row: nothing of it is stored (that the caller sees)."""
    filt, params = where
    query = sql.SQL(
        "SELECT m.context_position AS position, m.content, max(m.context_position) OVER () AS last"
        " FROM memory_items m WHERE {filt} AND m.source = 'conversation' AND m.source_id = %(t_conv)s"
        " AND m.context_position IS NOT NULL ORDER BY m.context_position DESC LIMIT greatest(%(t_window)s, 1)"
    ).format(filt=filt)
    out: dict[str, Any] = dict(params, t_conv=conversation, t_window=int(window))
    return query, out
