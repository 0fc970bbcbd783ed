"""The search of every read the search indexes do not hold (a metadata filter, time bounds, an
origin, a subtree, statuses other than active, the past): one pass over the caller's rows that
pass, exact.

A narrowed read cannot use the search indexes (they hold no metadata, times or sources), so it
reads the rows. :func:`narrowed_search` reads each passing row once into a materialised set
(exact cosine, the score without keyword evidence), takes the keyword postings of only the rows
that hold a query word, and keeps the ``k + pool`` best by the exact final score; the generic
scan (:func:`.search.search_candidates`) read them once for the statistics and again for each
candidate list, testing the tenancy rule and the filter each time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from ..ranking import Scoring
from .items import salience_at
from .search import (
    BM25_OF_POSTINGS,
    CONTEXT_BM25,
    CONTEXT_LEXEMES,
    QUERY_LEXEMES,
    keyword_key_sql,
    mixed_keyword_sql,
    scope_priority_sql,
    scoring_params,
    similarity_sql,
)
from .types import Query

__all__ = ["narrowed_search"]

#: a row as it is now: its vector and keyword index
_NOW = {"vector": sql.SQL("m.embedding"), "tsv": sql.SQL("m.content_tsv"), "then": sql.SQL("")}
#: a row as it was at ``%(w_at)s``: the wording kept in its history that was replaced after then
#: (none: the current one), with the vector kept with it
_THEN = {
    "vector": sql.SQL("coalesce(h.embedding, m.embedding)"),
    "tsv": sql.SQL("CASE WHEN h.content IS NULL THEN m.content_tsv"
                   " ELSE to_tsvector('english'::regconfig, h.content) END"),
    "then": sql.SQL(
        " LEFT JOIN LATERAL (SELECT h.content, h.embedding FROM memory_item_history h"
        " WHERE m.version > 1 AND h.scope_id = m.scope_id AND h.memory_id = m.id AND h.replaced_at > %(w_at)s"
        " ORDER BY h.replaced_at LIMIT 1) h ON TRUE"),
}

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
    scoring: Scoring,
    extra_lexemes: Sequence[str] = (),
    subtree: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> Query:
    """The rows of ``where`` that can be in the top ``k``, with the columns and BM25 statistics of
    :func:`.search.search_candidates`.

    Every passing row gets its exact final score ``w_vec * cosine + w_conf * confidence + w_scope
    * priority + w_sal * salience + w_kw * key(bm25)`` (BM25 over the passing rows, ``key`` as the
    indexed search computes it, mixed with the context's for a row that keeps one), so the ``k + pool`` best by it hold the exact top ``k``;
    :func:`agent_memory.ranking.rank` then ranks them in Python, as for every search. Rows whose
    relevance is below ``min_relevance`` are left out first, so the floor never empties the top.
    ``subtree``: as for :func:`.search.search_candidates`.

    ``at`` (a search of the past, ``as_of`` / ``known_at``): every row is scored in the wording it
    had then, its text and, where its history kept it, its vector (an earlier wording kept without
    one falls back to the current vector); keyword statistics are counted over those wordings too.
    """
    filt, params = where
    params = dict(params)
    params.update(subtree or {})
    prio = scope_priority_sql(subtree is not None)
    params.update(scoring_params(
        query_vector=query_vector, query_text=query_text, extra_lexemes=extra_lexemes, k=k, pool=pool,
        min_relevance=min_relevance, scoring=scoring,
    ), q_round=_ROUNDING, w_at=at)
    key = mixed_keyword_sql(keyword_key_sql("kw.s", "(SELECT c FROM ceiling)"),
                            keyword_key_sql("ckw.s", "(SELECT c FROM ceiling)"), "v.hc")
    query = sql.SQL(
        """
        WITH q AS MATERIALIZED (SELECT %(q_vec)s::vector AS v),
        {lex},
        vis AS MATERIALIZED (
            SELECT m.id, coalesce(1 - ({vector} <=> q.v), 0) AS sim, 1 - (m.context_embedding <=> q.v) AS csim, {tsv} AS tsv,
                   m.context_tsv AS ctsv, m.context_embedding IS NOT NULL AS hc,
                   %(w_conf)s::float8 * m.confidence + %(w_scope)s::float8 * {prio}
                   + %(w_sal)s::float8 * {salience} AS b
            FROM memory_items m CROSS JOIN q{then} WHERE {filt}
        ),
        n AS MATERIALIZED (SELECT count(*) AS n FROM vis),
        post AS MATERIALIZED (
            SELECT v.id, u.lexeme, coalesce(cardinality(u.positions), 1) AS tf
            FROM vis v CROSS JOIN LATERAL unnest(v.tsv) AS u
            WHERE v.tsv @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM lex)
              AND u.lexeme IN (SELECT lexeme FROM lex)
        ),
        {clex},
        cpost AS MATERIALIZED (
            SELECT v.id, u.lexeme, coalesce(cardinality(u.positions), 1) AS tf
            FROM vis v CROSS JOIN LATERAL unnest(v.ctsv) AS u
            WHERE v.ctsv @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM clex)
              AND u.lexeme IN (SELECT lexeme FROM clex)
        ),
        {bm25},
        {context_bm25},
        cand AS (
            SELECT x.id FROM (
                SELECT v.id, %(w_vec)s::float8 * {sim} + v.b + %(w_kw)s::float8 * {key} AS f,
                       %(q_rel_vec)s::float8 * {sim} + (1 - %(q_rel_vec)s::float8) * {key} AS rel
                FROM vis v LEFT JOIN kw USING (id) LEFT JOIN ckw USING (id)
            ) x
            WHERE %(q_floor)s::float8 <= 0 OR x.rel >= %(q_floor)s::float8 - %(q_round)s::float8
            ORDER BY x.f DESC, x.id LIMIT %(q_wide)s
        )
        SELECT m.id, m.confidence, m.created_at, v.sim AS similarity, v.csim AS context_similarity, v.tsv::text AS tsv,
               v.ctsv::text AS context_tsv,
               {prio} AS scope_priority, {salience} AS salience,
               (SELECT coalesce(jsonb_object_agg(lexeme, df), jsonb_build_object()) FROM df) AS kw_df,
               (SELECT n FROM n) AS kw_n
        FROM vis v JOIN memory_items m ON m.id = v.id
        WHERE v.id = ANY(ARRAY(SELECT id FROM cand))
        """
    ).format(filt=filt, prio=prio, salience=sql.SQL(salience_at()), key=sql.SQL(key), lex=QUERY_LEXEMES,
             sim=sql.SQL(similarity_sql("v.sim", "v.csim")),
             bm25=BM25_OF_POSTINGS, clex=CONTEXT_LEXEMES, context_bm25=CONTEXT_BM25, **(_THEN if at is not None else _NOW))
    return query, params
