"""The search of a narrowed read (a metadata filter, time bounds, an origin, a subtree): one pass
over the caller's rows that pass, exact.

A narrowed read cannot use the search indexes (they hold no metadata, times or sources), so it
reads the rows. :func:`narrowed_search` reads each passing row once into a materialised set
(exact cosine, the score without keyword evidence), takes the keyword postings of only the rows
that hold a query word, and keeps the ``k + pool`` best by the exact final score; the generic
scan (:func:`.search.search_candidates`) read them once for the statistics and again for each
candidate list, testing the tenancy rule and the filter each time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from .items import salience_at, vector_literal
from .search import coverage_flag, keyword_key_sql, scope_priority_sql
from .types import Query

__all__ = ["narrowed_search"]

#: relevance computed in SQL and in Python may differ in the last bits: a row is kept for the floor
#: if it clears it within this, and :func:`agent_memory.ranking.rank` decides exactly
_ROUNDING = 1e-9


def narrowed_search(
    where: Query,
    *,
    query_vector: Sequence[float],
    query_text: str,
    pool: int,
    k: int,
    min_relevance: float,
    vector_weight: float,
    confidence_weight: float,
    scope_weight: float,
    scope_priority: dict[str, float],
    keyword_weight: float = 0.0,
    keyword_share: float | None = None,
    salience_weight: float = 0.0,
    k1: float = 1.2,
    half: float = 5.0,
    keyword_norm: str = "squash",
    extra_lexemes: Sequence[str] = (),
    subtree: dict[str, Any] | None = None,
) -> Query:
    """The rows of ``where`` that can be in the top ``k``, with the columns and BM25 statistics of
    :func:`.search.search_candidates`.

    Every passing row gets its exact final score ``w_vec * cosine + w_conf * confidence + w_scope
    * priority + w_sal * salience + w_kw * key(bm25)`` (BM25 over the passing rows, ``key`` as the
    indexed search computes it), so the ``k + pool`` best by it hold the exact top ``k``;
    :func:`agent_memory.ranking.rank` then ranks them in Python, as for every search. Rows whose
    relevance is below ``min_relevance`` are left out first, so the floor never empties the top.
    ``subtree``: as for :func:`.search.search_candidates`.
    """
    filt, params = where
    params = dict(params)
    params.update(subtree or {})
    prio = scope_priority_sql(subtree is not None)
    params.update(
        q_vec=vector_literal(query_vector), q_text=query_text, q_extra=list(extra_lexemes), q_wide=k + pool,
        q_floor=float(min_relevance), q_round=_ROUNDING, w_vec=vector_weight, w_conf=confidence_weight,
        w_scope=scope_weight, w_sal=salience_weight, w_kw=keyword_weight, kw_k1=k1, kw_half=half,
        kw_cov=coverage_flag(keyword_norm),
        **{f"p_{level}": float(weight) for level, weight in scope_priority.items()},
        q_rel_vec=1 - keyword_share if keyword_share is not None else (
            vector_weight / (vector_weight + keyword_weight) if vector_weight + keyword_weight > 0 else 1.0),
    )
    key = keyword_key_sql("kw.s", "(SELECT c FROM ceiling)")
    query = sql.SQL(
        """
        WITH q AS MATERIALIZED (SELECT %(q_vec)s::vector AS v),
        lex AS MATERIALIZED (
            SELECT DISTINCT u.lexeme
            FROM unnest(tsvector_to_array(to_tsvector('english', %(q_text)s)) || %(q_extra)s::text[]) AS u(lexeme)
            WHERE %(w_kw)s::float8 > 0
        ),
        vis AS MATERIALIZED (
            SELECT m.id, 1 - (m.embedding <=> q.v) AS sim, m.content_tsv AS tsv,
                   %(w_conf)s::float8 * m.confidence + %(w_scope)s::float8 * {prio}
                   + %(w_sal)s::float8 * {salience} AS b
            FROM memory_items m, q WHERE {filt}
        ),
        n AS MATERIALIZED (SELECT count(*) AS n FROM vis),
        post AS MATERIALIZED (
            SELECT v.id, u.lexeme, coalesce(cardinality(u.positions), 1) AS tf
            FROM vis v CROSS JOIN LATERAL unnest(v.tsv) AS u
            WHERE v.tsv @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM lex)
              AND u.lexeme IN (SELECT lexeme FROM lex)
        ),
        df AS MATERIALIZED (SELECT lexeme, count(*) AS df FROM post GROUP BY lexeme),
        ceiling AS MATERIALIZED (
            SELECT sum(ln(1 + (n.n - df.df + 0.5)::float8 / (df.df + 0.5)::float8)) AS c FROM df CROSS JOIN n
        ),
        kw AS MATERIALIZED (
            SELECT p.id, sum(ln(1 + (n.n - df.df + 0.5)::float8 / (df.df + 0.5)::float8)
                             * p.tf * (%(kw_k1)s::float8 + 1) / (p.tf + %(kw_k1)s::float8)) AS s
            FROM post p JOIN df USING (lexeme) CROSS JOIN n GROUP BY p.id
        ),
        cand AS (
            SELECT x.id FROM (
                SELECT v.id, %(w_vec)s::float8 * v.sim + v.b + %(w_kw)s::float8 * {key} AS f,
                       %(q_rel_vec)s::float8 * v.sim + (1 - %(q_rel_vec)s::float8) * {key} AS rel
                FROM vis v LEFT JOIN kw USING (id)
            ) x
            WHERE %(q_floor)s::float8 <= 0 OR x.rel >= %(q_floor)s::float8 - %(q_round)s::float8
            ORDER BY x.f DESC, x.id LIMIT %(q_wide)s
        )
        SELECT m.id, m.confidence, m.created_at, 1 - (m.embedding <=> q.v) AS similarity,
               m.content_tsv::text AS tsv, {prio} AS scope_priority, {salience} AS salience,
               (SELECT coalesce(jsonb_object_agg(lexeme, df), jsonb_build_object()) FROM df) AS kw_df,
               (SELECT n FROM n) AS kw_n
        FROM memory_items m, q
        WHERE m.id = ANY(ARRAY(SELECT id FROM cand))
        """
    ).format(filt=filt, prio=prio, salience=sql.SQL(salience_at()), key=sql.SQL(key))
    return query, params
