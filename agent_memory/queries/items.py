"""Memory items: insert, copy, read, update, lock; and the usage bookkeeping of a search.

Reads take a ``where`` :data:`~.types.Query` from :func:`.visibility.item_filter`, so the
tenancy rule travels with every statement.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..lifecycle import CORE_RECALLS, spaced_recall_sql
from ..models import Scope, Status
from .types import Query, Statement

__all__ = [
    "COPY_COLUMNS",
    "COPY_TYPES",
    "ITEM_COLUMNS",
    "archive_unused",
    "copy_items",
    "delete_expired",
    "delete_items",
    "ids_with_prefix",
    "insert_item",
    "item_columns",
    "lock_scope",
    "refresh_duplicate",
    "salience_at",
    "scope_lock_key",
    "select_by_key",
    "select_item_by_id",
    "select_items",
    "select_items_by_ids",
    "select_owned",
    "set_keyed_fields",
    "set_valid_from",
    "stats",
    "touch_items",
    "update_status",
    "vector_literal",
]

#: columns read back into a MemoryItem (embedding and tsvector stay in the database)
ITEM_COLUMNS = (
    "id", "content", "memory_type", "scope", "scope_id", "user_id", "project_id", "session_id",
    "source", "source_id", "confidence", "visibility", "status", "created_at", "updated_at",
    "last_used_at", "access_count", "metadata", "valid_from", "valid_to", "superseded_by", "version", "key",
    "expires_at", "retention", "recorded_at", "known_to", "context", "context_position",
)


def item_columns(alias: str | None = "m") -> sql.Composable:
    """:data:`ITEM_COLUMNS` as a select list, each qualified by ``alias`` (None: unqualified, for
    ``RETURNING``)."""
    prefix = sql.SQL("") if alias is None else sql.SQL(alias + ".")
    return sql.SQL(", ").join(prefix + sql.Identifier(c) for c in ITEM_COLUMNS)


_COLS = item_columns()
_RETURNING = item_columns(None)


#: the columns a new row is written with (:func:`insert_item`, :func:`copy_items`)
COPY_COLUMNS = ("id", "content", "memory_type", "scope", "scope_id", "user_id", "project_id", "session_id",
                "source", "source_id", "confidence", "visibility", "metadata", "key", "expires_at", "retention",
                "context", "context_position", "context_embedding", "embedding")


#: PostgreSQL types of :data:`COPY_COLUMNS`, for the binary COPY of :func:`copy_items`
COPY_TYPES = ("uuid", "text", "text", "text", "text", "text", "text", "text", "text", "text", "float8", "text",
              "jsonb", "text", "timestamptz", "text", "text", "int4", "vector", "vector")


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form; works for any embedder without registering types on the caller's connections."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def insert_item() -> sql.Composable:
    """One row from a dict keyed by :data:`COPY_COLUMNS` and ``valid_from`` (None: now), returned as stored."""
    values: list[sql.Composable] = [sql.SQL("{}::vector").format(sql.Placeholder(c)) if c.endswith("embedding")
                                    else sql.Placeholder(c) for c in COPY_COLUMNS]
    values.append(sql.SQL("coalesce(%(valid_from)s::timestamptz, now())"))  # event time; none said: now
    return sql.SQL("INSERT INTO memory_items ({cols}) VALUES ({vals}) RETURNING {ret}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in (*COPY_COLUMNS, "valid_from")),
        vals=sql.SQL(", ").join(values), ret=_RETURNING,
    )


def copy_items() -> sql.Composable:
    """Rows keyed by :data:`COPY_COLUMNS`, in binary (:data:`COPY_TYPES`; the vector as a numpy array)."""
    return sql.SQL("COPY memory_items ({cols}) FROM STDIN (FORMAT BINARY)").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in COPY_COLUMNS)
    )


def select_items(where: Query, *, limit: int, offset: int = 0) -> Query:
    """Rows in ``where``, most recently updated first."""
    filt, params = where
    return (
        sql.SQL(
            "SELECT {cols} FROM memory_items m WHERE {filt}"
            " ORDER BY m.updated_at DESC, m.id LIMIT %(l_limit)s OFFSET %(l_offset)s"
        ).format(cols=_COLS, filt=filt),
        dict(params, l_limit=limit, l_offset=offset),
    )


def select_owned(where: Query) -> Query:
    """Id, scope and scope id of the rows in ``where`` that the caller created."""
    filt, params = where
    return (sql.SQL("SELECT m.id, m.scope, m.scope_id FROM memory_items m WHERE {filt} AND m.user_id = %(vf_user)s")
            .format(filt=filt), params)


def select_item_by_id(where: Query, memory_id: Any, *, lock: bool = False, scope_id: str | None = None) -> Query:
    """The row ``memory_id`` if it is in ``where``; with ``lock``, locked until the transaction ends.
    ``scope_id``: the scope it lives in, when known (a memory never changes scope), so a cluster
    reads and locks it on its one shard (Citus locks no row of a statement over many shards)."""
    filt, params = where
    scoped = "" if scope_id is None else " AND m.scope_id = %(id_scope)s"
    return (
        sql.SQL("SELECT {cols} FROM memory_items m WHERE m.id = %(id)s" + scoped + " AND {filt}{lock}").format(
            cols=_COLS, filt=filt, lock=sql.SQL(" FOR UPDATE OF m" if lock else "")),
        dict(params, id=memory_id, id_scope=scope_id),
    )


def ids_with_prefix(where: Query, prefix: str, limit: int) -> Query:
    """Ids in ``where`` that start with ``prefix`` (hex digits and dashes only), in id order."""
    filt, params = where
    return (
        sql.SQL("SELECT m.id FROM memory_items m WHERE m.id::text LIKE %(id_prefix)s AND {filt}"
                " ORDER BY m.id LIMIT %(id_limit)s").format(filt=filt),
        dict(params, id_prefix=prefix + "%", id_limit=limit),
    )


def select_items_by_ids(ids: Sequence[Any]) -> Query:
    """Rows by id, for ids a scoped query already returned."""
    return (
        sql.SQL("SELECT {cols} FROM memory_items m WHERE m.id = ANY(%(ids)s)").format(cols=_COLS),
        {"ids": list(ids)},
    )


def salience_at(at: str = "now()", alias: str = "m") -> str:
    """SQL: a memory's salience at the time ``at`` (an SQL expression): its stored ``salience``
    halved every ``stability`` days since ``salience_at``."""
    return (f"({alias}.salience * power(0.5, greatest(extract(epoch FROM {at} - {alias}.salience_at), 0)"
            f" / 86400.0 / {alias}.stability))")


#: a recall takes salience halfway to 1, and multiplies stability by 1 + (days since the last
#: recall / stability), at most 2: a memory recalled again after a long while fades slower from
#: then on; one recalled over and over within minutes hardly changes (at most ten years)
_RECALL = (
    "salience = least(1, {s} + 0.5 * (1 - {s})),"
    " stability = least(3650, stability * (1 + least(1, greatest(extract(epoch FROM now() - salience_at), 0)"
    " / 86400.0 / stability))), salience_at = now()"
).format(s=salience_at(alias="memory_items"))


#: a recall at least an hour after the last use counts towards ``core`` (:mod:`agent_memory.lifecycle`);
#: a boolean cast, not a CASE: Citus runs no stable function (``now()``) inside a CASE of an UPDATE
_SPACED = f"recall_count = recall_count + ({spaced_recall_sql('last_used_at')})::int, "


def touch_items(ids: Sequence[Any], *, distributed: bool = False) -> Query:
    """Record use of search hits (a recall: :data:`_RECALL`) and read them in full. Usage stats
    are bookkeeping, so this transaction's commit does not wait for its WAL flush
    (``synchronous_commit`` off, set in the same round trip).

    A search must never fail or wait because of its bookkeeping: rows are locked in id order
    and a row another transaction holds is skipped (``SKIP LOCKED``; its recall is not counted)
    and read as it is. Locked in rank order, two searches over the same rows deadlocked.

    ``distributed`` (a Citus cluster, which locks no rows of many shards ahead of an update): one
    update of the hits, shard after shard (``citus.multi_shard_modify_mode`` sequential, so two
    searches take their rows in one order); a hit a writer holds is waited for."""
    if distributed:
        return (
            sql.SQL("WITH one_by_one AS (SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true))"
                    " UPDATE memory_items SET last_used_at = now(), access_count = access_count + 1, " + _SPACED + _RECALL +
                    " WHERE id = ANY(%(ids)s) RETURNING {ret}").format(ret=_RETURNING),
            {"ids": list(ids)},
        )
    return (
        sql.SQL(
            "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)),"
            " free AS (SELECT id AS free_id FROM memory_items WHERE id = ANY(%(ids)s)"
            " ORDER BY id FOR NO KEY UPDATE SKIP LOCKED),"
            " touched AS (UPDATE memory_items SET last_used_at = now(), access_count = access_count + 1, "
            + _SPACED + _RECALL +
            " FROM async_commit, free WHERE id = free_id RETURNING {ret})"
            " SELECT * FROM touched UNION ALL SELECT {cols} FROM memory_items m"
            " WHERE m.id = ANY(%(ids)s) AND m.id NOT IN (SELECT id FROM touched)"
        ).format(ret=_RETURNING, cols=_COLS),
        {"ids": list(ids)},
    )


def archive_unused(at: Any, *, retention: str, idle_days: float, below: float | None, limit: int) -> Query:
    """Archive up to ``limit`` active memories of ``retention`` not used (recalled, or written)
    for ``idle_days`` before ``at``, and with ``below``, only those whose salience at ``at`` is
    under it; rows another maintenance run holds are skipped. Answers the ids archived.

    A ``decay`` memory is faded only while it is a candidate or active: one recalled
    :data:`~agent_memory.lifecycle.CORE_RECALLS` times at spaced intervals is ``core`` and stays."""
    faded = sql.SQL("") if below is None else sql.SQL(
        " AND " + salience_at("%(at)s::timestamptz") + " < %(below)s")
    if retention == "decay":
        faded += sql.SQL(f" AND m.recall_count < {int(CORE_RECALLS)}")
    return (
        sql.SQL("UPDATE memory_items SET status = 'archived', updated_at = now() WHERE id IN ("
                "SELECT m.id FROM memory_items m WHERE m.status = 'active' AND m.retention = %(retention)s"
                " AND coalesce(m.last_used_at, m.created_at) < %(at)s::timestamptz - make_interval(secs => %(idle)s)"
                "{faded} LIMIT %(limit)s FOR UPDATE SKIP LOCKED) RETURNING id").format(faded=faded),
        {"at": at, "retention": retention, "idle": idle_days * 86400.0, "below": below, "limit": limit},
    )


def update_status(memory_id: Any, status: Status) -> Query:
    """Set one row's status, answering it as stored."""
    return (
        sql.SQL(
            "UPDATE memory_items SET status = %(status)s, updated_at = now() WHERE id = %(id)s RETURNING {ret}"
        ).format(ret=_RETURNING),
        {"id": memory_id, "status": status.value},
    )


def refresh_duplicate(memory_id: Any) -> Query:
    """A memory said again: record the use, answering it as stored."""
    return (
        sql.SQL(
            "UPDATE memory_items SET last_used_at = now() WHERE id = %(id)s RETURNING {ret}"
        ).format(ret=_RETURNING),
        {"id": memory_id},
    )


def delete_items(ids: Sequence[Any]) -> Statement:
    """Delete rows by id for good (their history goes with them)."""
    return "DELETE FROM memory_items WHERE id = ANY(%s)", (list(ids),)


def stats(where: Query) -> Query:
    """Counts, last write and size of the rows in ``where``, by type, scope and status."""
    filt, params = where
    return (
        sql.SQL(
            "SELECT m.memory_type, m.scope, m.status, count(*) AS n, max(m.updated_at) AS last_write,"
            " sum(pg_column_size(m.*))::bigint AS bytes"
            " FROM memory_items m WHERE {filt} GROUP BY 1, 2, 3"
        ).format(filt=filt),
        params,
    )


def scope_lock_key(scope: Scope, scope_id: str | None, user_id: str) -> str:
    """Writes into one scope take this advisory lock, so concurrent saves of one fact dedupe.
    JSON keeps the key unambiguous whatever characters the ids hold."""
    parts = [scope.value, scope_id] + ([user_id] if scope is Scope.SESSION else [])
    return "agent_memory:" + json.dumps(parts)


def lock_scope(scope: Scope, scope_id: str | None, user_id: str) -> tuple[str, tuple[str]]:
    """``(sql, params)`` taking :func:`scope_lock_key`'s lock until the transaction ends."""
    return "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (scope_lock_key(scope, scope_id, user_id),)


#: a key's owner in the unique index ``memory_items_key_idx``: a session's keys are its user's
_KEY_OWNER = "(CASE WHEN m.scope = 'session' THEN m.user_id ELSE '' END)"


def select_by_key(scope: Scope, scope_id: str, user_id: str, key: str, where: Query | None = None) -> Query:
    """The row that holds ``key`` in the scope (``memory_items_key_idx``: not superseded, any
    other status, expired or not). With ``where`` (:func:`.visibility.item_filter`) only if the
    caller may see it; without, locked until the transaction ends, for a put that replaces it."""
    filt, params = where if where is not None else (sql.SQL("TRUE"), {})
    return (
        sql.SQL("SELECT {cols} FROM memory_items m WHERE m.scope = %(k_scope)s AND m.scope_id = %(k_scope_id)s"
                " AND " + _KEY_OWNER + " = %(k_owner)s AND m.key = %(k_key)s AND m.status <> 'superseded'"
                " AND {filt}{lock}").format(cols=_COLS, filt=filt,
                                           lock=sql.SQL(" FOR UPDATE OF m" if where is None else "")),
        dict(params, k_scope=scope.value, k_scope_id=scope_id, k_owner=user_id if scope is Scope.SESSION else "",
             k_key=key),
    )


def set_keyed_fields(memory_id: Any, *, visibility: str, metadata: Any, expires_at: Any, retention: str,
                     valid_from: Any = None) -> Query:
    """What a put by key sets besides the wording: active again, its visibility, metadata, expiry
    and retention, and ``valid_from`` when one is given."""
    return (
        sql.SQL("UPDATE memory_items SET status = 'active', visibility = %(visibility)s, metadata = %(metadata)s,"
                " expires_at = %(expires_at)s, retention = %(retention)s, updated_at = now(),"
                " valid_from = coalesce(%(valid_from)s::timestamptz, valid_from)"
                " WHERE id = %(id)s RETURNING {ret}").format(ret=_RETURNING),
        {"id": memory_id, "visibility": visibility, "metadata": Jsonb(dict(metadata)), "expires_at": expires_at,
         "retention": retention, "valid_from": valid_from},
    )


def set_valid_from(dated: Sequence[tuple[Any, Any]]) -> Query:
    """Set when each fact began to hold: ``dated`` pairs a row id with its ``valid_from``."""
    return (
        sql.SQL("UPDATE memory_items m SET valid_from = v.valid_from"
                " FROM unnest(%(ids)s::uuid[], %(times)s::timestamptz[]) AS v(id, valid_from) WHERE m.id = v.id"),
        {"ids": [i for i, _ in dated], "times": [t for _, t in dated]},
    )


def delete_expired(before: Any, limit: int, *, distributed: bool = False) -> Query:
    """Delete up to ``limit`` rows that expired before ``before`` (their history goes with them).
    ``distributed`` (Citus locks no rows of many shards ahead of a delete): every such row, each
    shard its own."""
    if distributed:
        return (sql.SQL("DELETE FROM memory_items WHERE expires_at IS NOT NULL AND expires_at <= %(before)s"),
                {"before": before})
    return (
        sql.SQL("DELETE FROM memory_items WHERE id IN (SELECT id FROM memory_items"
                " WHERE expires_at IS NOT NULL AND expires_at <= %(before)s LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"),
        {"before": before, "limit": limit},
    )

