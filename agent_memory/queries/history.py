"""A memory's past: its earlier wordings (``memory_item_history``) and its supersession chain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from ..models import DecisionMethod, MemoryType
from .items import item_columns, salience_at, vector_literal
from .search import coverage_flag, keyword_key_sql, scope_priority_sql
from .types import Query, Statement

__all__ = ["earlier_wordings", "past_candidates", "revise_item", "supersede_item", "supersession_chain",
           "wordings_at"]


def revise_item(memory_id: UUID, *, content: str, vector: Sequence[float] | None, memory_type: MemoryType,
                confidence: float, metadata: Mapping[str, Any], change: str, decided_by: DecisionMethod,
                reason: str | None, changed_by: str, valid_from: datetime | None = None) -> list[Query]:
    """Keep the row's wording (and its vector) in its history, then revise it in place (``version``
    + 1; a None ``vector`` keeps the embedding; a ``valid_from`` earlier than the row's moves the
    start of its fact back); the second statement answers the new row."""
    params = {
        "id": memory_id, "content": content, "memory_type": memory_type.value, "confidence": confidence,
        "metadata": Jsonb(dict(metadata)), "change": change, "decided_by": decided_by.value, "reason": reason,
        "changed_by": changed_by, "vec": None if vector is None else vector_literal(vector),
        "valid_from": valid_from,
    }
    keep = sql.SQL(
        "INSERT INTO memory_item_history (memory_id, version, content, memory_type, confidence, metadata,"
        " recorded_at, change, decided_by, reason, changed_by, embedding)"
        " SELECT id, version, content, memory_type, confidence, metadata,"
        " coalesce((SELECT max(h.replaced_at) FROM memory_item_history h WHERE h.memory_id = m.id), m.created_at),"
        " %(change)s, %(decided_by)s, %(reason)s, %(changed_by)s, embedding FROM memory_items m WHERE m.id = %(id)s"
    )
    update = sql.SQL(
        "UPDATE memory_items SET content = %(content)s, memory_type = %(memory_type)s, confidence = %(confidence)s,"
        " metadata = %(metadata)s, embedding = coalesce(%(vec)s::vector, embedding), version = version + 1,"
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


def wordings_at(ids: Sequence[UUID], as_of: datetime) -> Statement:
    """For items revised after ``as_of``, the wording they had at ``as_of`` (the first one they
    were recorded with, when that was later: the fact may be older than the memory of it)."""
    return (
        "SELECT DISTINCT ON (memory_id) memory_id, content, memory_type FROM memory_item_history"
        " WHERE memory_id = ANY(%(ids)s) AND replaced_at > %(as_of)s"
        " ORDER BY memory_id, replaced_at",
        {"ids": list(ids), "as_of": as_of},
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


def earlier_wordings(ids: Sequence[UUID]) -> Statement:
    """The kept wordings of ``ids``, by item and version."""
    return (
        "SELECT memory_id, version, content, memory_type, recorded_at, replaced_at, change, decided_by, reason"
        " FROM memory_item_history WHERE memory_id = ANY(%s) ORDER BY memory_id, version",
        (list(ids),),
    )


def past_candidates(
    where: Query,
    at: datetime,
    *,
    query_vector: Sequence[float],
    query_text: str,
    pool: int,
    vector_weight: float,
    confidence_weight: float,
    scope_weight: float,
    scope_priority: dict[str, float],
    keyword_weight: float = 0.0,
    salience_weight: float = 0.0,
    k1: float = 1.2,
    half: float = 5.0,
    subtree: dict[str, Any] | None = None,
    keyword_norm: str = "squash",
) -> Query:
    """:func:`.search.search_candidates` for a search of the past (``as_of`` / ``known_at``): the
    same columns and the same candidate rule (the ``pool`` best without keyword evidence, and the
    ``pool`` best with it), but every row is scored in the wording it had at ``at``: its text and,
    where its history kept it, its vector then (an earlier wording kept without one falls back to
    the current vector). Keyword statistics are counted over those wordings too."""
    filt, params = where
    params = dict(params)
    params.update(
        q_vec=vector_literal(query_vector), q_text=query_text, q_pool=pool, w_at=at,
        w_vec=vector_weight, w_conf=confidence_weight, w_scope=scope_weight,
        **{f"p_{level}": float(weight) for level, weight in scope_priority.items()},
        w_kw=keyword_weight, kw_k1=k1, kw_half=half, w_sal=salience_weight, kw_cov=coverage_flag(keyword_norm),
    )
    params.update(subtree or {})  # a subtree read ranks nearer scopes first, as search_candidates does
    prior = sql.SQL(
        "%(w_vec)s::float8 * w.similarity + %(w_conf)s::float8 * w.confidence"
        " + %(w_scope)s::float8 * w.scope_priority + %(w_sal)s::float8 * w.salience"
    )
    keyword_ctes: sql.Composable = sql.SQL("")
    keyword_branch: sql.Composable = sql.SQL("")
    stats_cols: sql.Composable = sql.SQL("NULL::jsonb AS kw_df, NULL::bigint AS kw_n")
    if keyword_weight > 0:
        keyword_ctes = sql.SQL(
            """
            lex AS MATERIALIZED (
                SELECT u.lex, quote_literal(u.lex)::tsquery AS tq
                FROM unnest(tsvector_to_array(to_tsvector('english', %(q_text)s))) AS u(lex)
            ),
            stats AS MATERIALIZED (
                SELECT l.lex, count(*) FILTER (WHERE w.tsv @@ l.tq) AS df, count(*) AS n
                FROM w CROSS JOIN lex l GROUP BY l.lex
            ),
            idf AS MATERIALIZED (
                SELECT lex, ln(1 + (n - df + 0.5)::float8 / (df + 0.5)::float8) AS w FROM stats WHERE df > 0
            ),
            ceiling AS MATERIALIZED (SELECT sum(w) AS c FROM idf),
            """
        )
        keyword_branch = sql.SQL(
            """
            UNION
            (SELECT w.id FROM w CROSS JOIN q CROSS JOIN LATERAL (
                 SELECT coalesce(sum(i.w * coalesce(cardinality(u.positions), 1) * (%(kw_k1)s::float8 + 1)
                                     / (coalesce(cardinality(u.positions), 1) + %(kw_k1)s::float8)), 0) AS s
                 FROM unnest(w.tsv) AS u JOIN idf i ON u.lexeme = i.lex) AS b
             WHERE q.tq IS NOT NULL AND w.tsv @@ q.tq
             ORDER BY {prior} + %(w_kw)s::float8 * {key} DESC, w.id
             LIMIT %(q_pool)s)
            """
        ).format(prior=prior, key=sql.SQL(keyword_key_sql("b.s", "(SELECT c FROM ceiling)")))
        stats_cols = sql.SQL(
            "(SELECT coalesce(jsonb_object_agg(lex, df), jsonb_build_object()) FROM stats) AS kw_df,"
            " (SELECT max(n) FROM stats) AS kw_n"
        )
    query = sql.SQL(
        """
        WITH q AS MATERIALIZED (
            SELECT %(q_vec)s::vector AS v,
                   CASE WHEN numnode(plainto_tsquery('english', %(q_text)s)) = 0 THEN NULL
                        ELSE replace(plainto_tsquery('english', %(q_text)s)::text, ' & ', ' | ')::tsquery
                   END AS tq
        ),
        w AS MATERIALIZED (
            SELECT m.id, m.confidence, m.created_at, {prio} AS scope_priority, {salience} AS salience,
                   1 - (coalesce(h.embedding, m.embedding) <=> q.v) AS similarity,
                   CASE WHEN h.content IS NULL THEN m.content_tsv
                        ELSE to_tsvector('english'::regconfig, h.content) END AS tsv
            FROM memory_items m CROSS JOIN q LEFT JOIN LATERAL (
                SELECT h.content, h.embedding FROM memory_item_history h
                WHERE m.version > 1 AND h.memory_id = m.id AND h.replaced_at > %(w_at)s
                ORDER BY h.replaced_at LIMIT 1
            ) h ON TRUE
            WHERE {filt}
        ),
        {keyword_ctes}
        cand AS (
            (SELECT w.id FROM w ORDER BY {prior} DESC, w.id LIMIT %(q_pool)s)
            {keyword_branch}
        )
        SELECT w.id, w.confidence, w.created_at, w.similarity, w.tsv::text AS tsv, w.scope_priority,
               w.salience, {stats_cols}
        FROM w WHERE w.id IN (SELECT id FROM cand)
        """
    ).format(filt=filt, prior=prior, keyword_ctes=keyword_ctes, keyword_branch=keyword_branch,
             prio=scope_priority_sql(subtree is not None), salience=sql.SQL(salience_at()),
             stats_cols=stats_cols)
    return query, params
