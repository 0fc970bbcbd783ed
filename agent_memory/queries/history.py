"""A memory's past: its earlier wordings (``memory_item_history``) and its supersession chain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from ..models import DecisionMethod, MemoryType
from .items import item_columns, vector_literal
from .types import Query

__all__ = ["chain_rows", "chain_step", "earlier_wordings", "revise_item", "supersede_item", "supersession_chain",
           "wordings_at"]


def revise_item(memory_id: UUID, *, content: str, vector: Sequence[float] | None, memory_type: MemoryType,
                confidence: float, metadata: Mapping[str, Any], change: str, decided_by: DecisionMethod,
                reason: str | None, changed_by: str, valid_from: datetime | None = None) -> list[Query]:
    """Keep the row's wording (with its vector, and the scope and visibility it held under) in its
    history, then revise it in place (``version`` + 1; a None ``vector`` keeps the embedding, an
    empty one leaves the row without (a store without an index, migration ``0020``); a
    ``valid_from`` earlier than the row's moves the start of its fact back); the second statement
    answers the new row."""
    params = {
        "id": memory_id, "content": content, "memory_type": memory_type.value, "confidence": confidence,
        "metadata": Jsonb(dict(metadata)), "change": change, "decided_by": decided_by.value, "reason": reason,
        "changed_by": changed_by, "vec": None if vector is None or not len(vector) else vector_literal(vector),
        "clear": vector is not None and not len(vector),
        "valid_from": valid_from,
    }
    keep = sql.SQL(
        "INSERT INTO memory_item_history (memory_id, version, content, memory_type, confidence, metadata,"
        " recorded_at, change, decided_by, reason, changed_by, embedding, scope, scope_id, visibility)"
        " SELECT id, version, content, memory_type, confidence, metadata,"
        " coalesce((SELECT max(h.replaced_at) FROM memory_item_history h"
        " WHERE h.scope_id = m.scope_id AND h.memory_id = m.id), m.created_at),"
        " %(change)s, %(decided_by)s, %(reason)s, %(changed_by)s, embedding, scope, scope_id, visibility"
        " FROM memory_items m WHERE m.id = %(id)s"
    )
    update = sql.SQL(
        "UPDATE memory_items SET content = %(content)s, memory_type = %(memory_type)s, confidence = %(confidence)s,"
        " metadata = %(metadata)s, embedding = CASE WHEN %(clear)s THEN NULL ELSE coalesce(%(vec)s::vector, embedding)"
        " END, version = version + 1,"
        " valid_from = least(%(valid_from)s::timestamptz, valid_from), updated_at = now()"
        " WHERE id = %(id)s RETURNING {ret}"
    ).format(ret=item_columns(None))
    return [(keep, params), (update, params)]


def supersede_item(old_id: UUID, new_id: UUID, at: datetime) -> Query:
    """Mark ``old_id`` superseded by ``new_id``, answering the old row. Both timelines close: its
    fact stopped holding when the new one began (``valid_to = at``, the new fact's ``valid_from``;
    never before its own start) and the memory stops holding it now (``known_to``)."""
    return (
        sql.SQL(
            "UPDATE memory_items SET status = 'superseded', valid_to = greatest(%(at)s::timestamptz, valid_from),"
            " known_to = now(), superseded_by = %(new)s, updated_at = now() WHERE id = %(old)s RETURNING {ret}"
        ).format(ret=item_columns(None)),
        {"at": at, "new": new_id, "old": old_id},
    )


def wordings_at(visible: Query, ids: Sequence[UUID], as_of: datetime) -> Query:
    """For items revised after ``as_of``, the wording they had at ``as_of`` (the first one they
    were recorded with, when that was later: the fact may be older than the memory of it), and
    whether it passes ``visible`` (:func:`.visibility.version_visible`: the caller could read
    that version then)."""
    filt, params = visible
    return (
        sql.SQL(
            "SELECT DISTINCT ON (h.memory_id) h.memory_id, h.content, h.memory_type, {filt} AS visible"
            " FROM memory_item_history h JOIN memory_items m ON m.scope_id = h.scope_id AND m.id = h.memory_id"
            " WHERE h.memory_id = ANY(%(ids)s) AND h.replaced_at > %(as_of)s"
            " ORDER BY h.memory_id, h.replaced_at"
        ).format(filt=filt),
        dict(params, ids=list(ids), as_of=as_of),
    )


def supersession_chain(where: Query, memory_id: UUID) -> Query:
    """The rows of ``memory_id``'s supersession chain in ``where``: older items it replaced and
    newer ones that replaced it (at most 100 steps each way)."""
    filt, params = where
    return (
        sql.SQL(
            """
            WITH RECURSIVE back(id, depth) AS (
                SELECT %(c_id)s::uuid, 0
                UNION
                SELECT m.id, b.depth + 1 FROM memory_items m JOIN back b ON m.superseded_by = b.id
                WHERE b.depth < 100
            ), fwd(id, next, depth) AS (
                SELECT m.id, m.superseded_by, 0 FROM memory_items m WHERE m.id = %(c_id)s
                UNION
                SELECT m.id, m.superseded_by, f.depth + 1 FROM memory_items m JOIN fwd f ON m.id = f.next
                WHERE f.depth < 100
            ), ids AS (SELECT id FROM back UNION SELECT id FROM fwd)
            SELECT {cols} FROM memory_items m WHERE m.id IN (SELECT id FROM ids) AND {filt}
            """
        ).format(cols=item_columns(), filt=filt),
        dict(params, c_id=memory_id),
    )


def chain_step(back: Sequence[UUID], fwd: UUID | None) -> Query:
    """One step of a supersession chain, for a cluster (:func:`agent_memory.history.chain`): the items
    that ``back`` replaced (``kind`` ``back``: their ``superseded_by`` is one of them) and the item
    that replaced ``fwd`` (``kind`` ``fwd``)."""
    return (
        sql.SQL("SELECT m.id, 'back' AS kind FROM memory_items m WHERE m.superseded_by = ANY(%(s_back)s::uuid[])"
                " UNION ALL SELECT m.superseded_by, 'fwd' FROM memory_items m"
                " WHERE m.id = %(s_fwd)s::uuid AND m.superseded_by IS NOT NULL"),
        {"s_back": list(back), "s_fwd": fwd},
    )


def chain_rows(where: Query, ids: Sequence[UUID]) -> Query:
    """The rows ``ids`` in ``where`` (a chain found by :func:`chain_step`)."""
    filt, params = where
    return (sql.SQL("SELECT {cols} FROM memory_items m WHERE m.id = ANY(%(c_ids)s::uuid[]) AND {filt}").format(
        cols=item_columns(), filt=filt), dict(params, c_ids=list(ids)))


def earlier_wordings(visible: Query, ids: Sequence[UUID]) -> Query:
    """The kept wordings of ``ids`` that pass ``visible`` (:func:`.visibility.version_visible`
    over ``h`` and its memory ``m``: the versions the caller could read then), by item and version."""
    filt, params = visible
    return (
        sql.SQL(
            "SELECT h.memory_id, h.version, h.content, h.memory_type, h.recorded_at, h.replaced_at, h.change,"
            " h.decided_by, h.reason, h.changed_by, h.metadata, h.visibility FROM memory_item_history h"
            " JOIN memory_items m ON m.scope_id = h.scope_id AND m.id = h.memory_id"
            " WHERE h.memory_id = ANY(%(h_ids)s) AND {filt} ORDER BY h.memory_id, h.version"
        ).format(filt=filt),
        dict(params, h_ids=list(ids)),
    )
