"""The search statements: candidates for ranking, and the exact nearest neighbours a write or a
conflict check needs. All of them read through :mod:`.visibility`; the indexed ones read the
search indexes of migration ``0010_search_at_scale`` one range per level the caller can read.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..models import Identity, MemoryType, Scope
from ..ranking import Scoring
from .items import item_columns, salience_at, vector_literal
from .types import Query
from .visibility import item_filter, live, visible_parts

if TYPE_CHECKING:
    from ..vector_cache import Candidates as CopiedRows

__all__ = [
    "BM25_OF_POSTINGS",
    "CONTEXT_BM25",
    "CONTEXT_LEXEMES",
    "GENERIC_PLANS",
    "HALF_ERROR",
    "QUERY_LEXEMES",
    "VISIBILITY_RANK",
    "cross_level_neighbours",
    "find_duplicate",
    "find_duplicates_bulk",
    "indexed_search",
    "keyword_key_sql",
    "mixed_keyword_sql",
    "merge_rank",
    "merge_visibilities",
    "scope_priority_sql",
    "scoring_params",
    "search_candidates",
    "similar_items",
    "similarity_sql",
    "skipped",
    "subtree_params",
    "uncopied_statistics",
    "weight_params",
]

#: an index range of live rows: active and not expired (``expires_at`` is in the search and count
#: indexes, so the range stays index-only)
_ACTIVE = "m.status = 'active' AND " + live()

_COLS = item_columns()


#: How far a cosine similarity computed from ``halfvec`` copies (fp16: relative error <= 2**-11
#: per coordinate, so at most ~0.002 for any pair of vectors) may be from the exact one; the
#: indexed reads keep every row within this of the cut and re-score them with the full vectors.
HALF_ERROR = 0.01


#: For the rest of the transaction, prepared statements run their generic plan. The indexed
#: search is shaped so its generic plan is the custom one (index ranges per level, lateral
#: lexeme lookups); left to choose, PostgreSQL kept planning it afresh, which cost a small
#: caller more than the search itself (BENCHMARKS.md, "Search at scale").
GENERIC_PLANS = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"


def scope_priority_sql(subtree: bool = False) -> sql.Composable:
    """SQL: the precedence of row ``m``'s level; in a subtree read a shared level's precedence drops
    by ``%(p_step)s`` for each ``/`` segment the row's scope lies below the identity's id
    (``%(st_project)s`` etc.: that id's depth), never below 0, so nearer scopes come first."""
    if not subtree:
        return sql.SQL(
            "(CASE m.scope WHEN 'session' THEN %(p_session)s::float8 WHEN 'project' THEN %(p_project)s::float8"
            " WHEN 'team' THEN %(p_team)s::float8 WHEN 'org' THEN %(p_org)s::float8 ELSE %(p_user)s::float8 END)"
        )
    depth = "(length(m.scope_id) - length(replace(m.scope_id, '/', '')))"

    def nearer(level: str) -> str:
        return (f"greatest(0, %(p_{level})s::float8 - %(p_step)s::float8"
                f" * ({depth} - coalesce(%(st_{level})s::int, {depth})))")
    return sql.SQL(
        f"(CASE m.scope WHEN 'session' THEN %(p_session)s::float8 WHEN 'project' THEN {nearer('project')}"
        f" WHEN 'team' THEN {nearer('team')} WHEN 'org' THEN {nearer('org')} ELSE %(p_user)s::float8 END)"
    )


def subtree_params(identity: Identity, step: float) -> dict[str, Any]:
    """The parameters of :func:`scope_priority_sql` in a subtree read: the depth of each of the
    identity's shared ids (``None``: the level is not narrowed, so not ranked by depth)."""
    ids = {"project": identity.project_id, "team": identity.team_id, "org": identity.org_id}
    return {"p_step": float(step),
            **{f"st_{level}": None if value is None else value.count("/") for level, value in ids.items()}}


def similarity_sql(cosine: str, context_cosine: str) -> str:
    """SQL: a row's similarity as :meth:`agent_memory.ranking.Scoring.similarity` computes it, from
    its ``cosine`` and its ``context_cosine`` (NULL for a row without context: then the cosine),
    mixed by ``%(w_ctx)s``."""
    return f"({cosine} + %(w_ctx)s::float8 * coalesce({context_cosine} - {cosine}, 0))"


def keyword_key_sql(bm25: str, ceiling: str) -> str:
    """SQL: the keyword evidence of BM25 ``bm25`` as :func:`agent_memory.ranking.rank` computes it,
    ``least(bm25 / ceiling, 1)`` under ``%(kw_cov)s`` (:func:`agent_memory.ranking.coverage`),
    else ``bm25 / (bm25 + %(kw_half)s)`` (:func:`agent_memory.ranking.squash`); 0 without a match."""
    # (``least`` ignores a NULL, so a row without a match is made 0 before it)
    return (f"coalesce(CASE WHEN %(kw_cov)s::boolean THEN least(coalesce({bm25} / nullif({ceiling}, 0), 0), 1)"
            f" ELSE {bm25} / ({bm25} + %(kw_half)s::float8) END, 0)")


def mixed_keyword_sql(own: str, context: str, has_context: str) -> str:
    """SQL: a row's keyword evidence as :meth:`agent_memory.ranking.Scoring.mixed_keyword` computes
    it, its own (``own``) mixed by ``%(w_ckw)s`` with its context's (``context``) when
    ``has_context`` (the row keeps a context vector), else its own."""
    return f"({own} + %(w_ckw)s::float8 * CASE WHEN {has_context} THEN {context} - {own} ELSE 0 END)"


def search_candidates(
    where: Query,
    *,
    query_vector: Sequence[float],
    query_text: str,
    pool: int,
    scoring: Scoring,
    extra_lexemes: Sequence[str] = (),
    subtree: dict[str, Any] | None = None,
) -> Query:
    """Everything a search reads, in one statement: candidates and BM25 statistics, by a generic
    scan of the rows of ``where``. The searches themselves run :func:`indexed_search` or
    :func:`.narrowed.narrowed_search`; this independent statement (with an unbounded ``pool``, every
    row a candidate) is the exact reference the tests and benchmarks compare them with.

    Write ``final = A + B`` with ``A`` the score without keyword evidence and
    ``B = keyword_weight * key(bm25)`` (the weights and ``key`` are ``scoring``'s,
    :class:`agent_memory.ranking.Scoring`), ``key`` being ``bm25 / (bm25 + half)`` (``keyword_norm``
    ``"squash"``) or ``min(bm25 / ceiling, 1)`` (``"coverage"``; ``ceiling``: the summed IDF of
    the query lexemes any visible row holds, :func:`agent_memory.ranking.bm25_ceiling`); both
    grow with ``bm25`` and are 0 without a match. The vector list holds the
    ``pool`` best rows by ``A``; the keyword list the ``pool`` best rows that
    match any query lexeme, by ``A + B`` (BM25 with b = 0 and IDF over the
    caller's rows, as :func:`agent_memory.ranking.bm25_scores` computes it). A
    row that matches no lexeme, in its words or (with a context keyword weight) in its context's,
    has ``final = A`` (the context's BM25 takes the same IDF), so every row of the true top
    ``k <= pool`` is in one of the lists: the union always contains the exact
    answer, and no ANN index can lose rows under the scope filter.

    Rows carry only what ranking needs; the winners are read in full afterwards
    (:func:`touch_items` / :func:`select_items_by_ids`). Each row also carries ``kw_df`` (lexeme -> rows containing it) and
    ``kw_n`` (rows visible), counted in one pass over the caller's rows rather
    than one index probe per lexeme, whose cost grows with the whole table.

    ``extra_lexemes``: lexemes searched for besides those of ``query_text`` (word feedback, see
    :func:`agent_memory.ranking.feedback_lexemes`), taken as they are (not parsed again).

    ``subtree`` (:func:`subtree_params`): ``where`` reaches down the shared levels' paths, and a
    row's level precedence drops with its depth below the caller's id.
    """
    filt, params = where
    params = dict(params)
    params.update(subtree or {})
    prio = scope_priority_sql(subtree is not None)
    params.update(weight_params(scoring), q_vec=vector_literal(query_vector), q_text=query_text,
                  q_extra=list(extra_lexemes), q_pool=pool)
    # ``A`` includes the salience term (read from each row: this statement scans the rows anyway)
    prior = sql.SQL(
        "%(w_vec)s::float8 * " + similarity_sql("coalesce(1 - (m.embedding <=> q.v), 0)", "(1 - (m.context_embedding <=> q.v))")
        + " + %(w_conf)s::float8 * m.confidence + %(w_scope)s::float8 * {prio} + %(w_sal)s::float8 * {salience}"
    ).format(prio=prio, salience=sql.SQL(salience_at()))
    keyword_ctes: sql.Composable
    keyword_branch: sql.Composable
    stats_cols: sql.Composable
    if scoring.keyword_weight > 0:
        keyword_ctes = sql.SQL(
            """
            lex AS MATERIALIZED (
                SELECT DISTINCT u.lex, quote_literal(u.lex)::tsquery AS tq
                FROM unnest(tsvector_to_array(to_tsvector('english', %(q_text)s)) || %(q_extra)s::text[]) AS u(lex)
            ),
            stats AS MATERIALIZED (
                SELECT l.lex, count(*) FILTER (WHERE m.content_tsv @@ l.tq) AS df, count(*) AS n
                FROM memory_items m CROSS JOIN lex l WHERE {filt} GROUP BY l.lex
            ),
            idf AS MATERIALIZED (
                SELECT lex, ln(1 + (n - df + 0.5)::float8 / (df + 0.5)::float8) AS w FROM stats WHERE df > 0
            ),
            ceiling AS MATERIALIZED (SELECT sum(w) AS c FROM idf),
            """
        ).format(filt=filt)
        keyword_branch = sql.SQL(
            """
            UNION
            (SELECT m.id FROM memory_items m CROSS JOIN q CROSS JOIN ceiling CROSS JOIN LATERAL (
                 SELECT coalesce(sum(i.w * coalesce(cardinality(u.positions), 1) * (%(kw_k1)s::float8 + 1)
                                     / (coalesce(cardinality(u.positions), 1) + %(kw_k1)s::float8)), 0) AS s
                 FROM unnest(m.content_tsv) AS u JOIN idf i ON u.lexeme = i.lex) AS b
             CROSS JOIN LATERAL (
                 SELECT coalesce(sum(i.w * coalesce(cardinality(u.positions), 1) * (%(kw_k1)s::float8 + 1)
                                     / (coalesce(cardinality(u.positions), 1) + %(kw_k1)s::float8)), 0) AS s
                 FROM unnest(m.context_tsv) AS u JOIN idf i ON u.lexeme = i.lex) AS cb
             WHERE q.tq IS NOT NULL AND (m.content_tsv @@ q.tq OR (%(w_ckw)s::float8 > 0 AND m.context_tsv @@ q.tq))
               AND {filt}
             ORDER BY {prior} + %(w_kw)s::float8 * {key} DESC, m.id
             LIMIT %(q_pool)s)
            """
        ).format(filt=filt, prior=prior, key=sql.SQL(mixed_keyword_sql(
            keyword_key_sql("b.s", "ceiling.c"), keyword_key_sql("cb.s", "ceiling.c"),
            "m.context_embedding IS NOT NULL")))
        stats_cols = sql.SQL(
            "(SELECT coalesce(jsonb_object_agg(lex, df), jsonb_build_object()) FROM stats) AS kw_df,"
            " (SELECT max(n) FROM stats) AS kw_n"
        )
    else:
        keyword_ctes = keyword_branch = sql.SQL("")
        stats_cols = sql.SQL("NULL::jsonb AS kw_df, NULL::bigint AS kw_n")
    query = sql.SQL(
        """
        WITH q AS MATERIALIZED (
            SELECT %(q_vec)s::vector AS v,
                   CASE WHEN cardinality(%(q_extra)s::text[]) > 0 THEN
                            (SELECT string_agg(quote_literal(u.x), ' | ') FROM unnest(
                                tsvector_to_array(to_tsvector('english', %(q_text)s)) || %(q_extra)s::text[]) AS u(x)
                            )::tsquery
                        WHEN numnode(plainto_tsquery('english', %(q_text)s)) = 0 THEN NULL
                        ELSE replace(plainto_tsquery('english', %(q_text)s)::text, ' & ', ' | ')::tsquery
                   END AS tq
        ),
        {keyword_ctes}
        cand AS (
            (SELECT m.id FROM memory_items m, q WHERE {filt} ORDER BY {prior} DESC, m.id LIMIT %(q_pool)s)
            {keyword_branch}
        )
        SELECT m.id, m.confidence, m.created_at, coalesce(1 - (m.embedding <=> q.v), 0) AS similarity,
               1 - (m.context_embedding <=> q.v) AS context_similarity,
               m.content_tsv::text AS tsv, m.context_tsv::text AS context_tsv, {prio} AS scope_priority,
               {salience} AS salience, {stats_cols}
        FROM memory_items m, q
        WHERE m.id IN (SELECT id FROM cand)
        """
    ).format(filt=filt, prior=prior, keyword_ctes=keyword_ctes, keyword_branch=keyword_branch,
             prio=prio, salience=sql.SQL(salience_at()), stats_cols=stats_cols)
    return query, params


def _keyed_union(identity: Identity, scopes: Sequence[Scope] | None, select: str, skip: bool = False,
                 distributed: bool = False, **fragments: sql.Composable) -> Query:
    """``select`` once per level the caller can read, as ``UNION ALL``: ``{part}`` is that
    level's keyed condition (one range of the search indexes), ``{level}`` its name, other
    ``{names}`` are filled from ``fragments``; ``skip``: without the ranges read from copies
    (:func:`.visibility.visible_parts`)."""
    parts, params = visible_parts(identity, scopes, keyed=True, skip=skip, distributed=distributed)
    branches = [sql.SQL(select).format(part=part, level=sql.Literal(level.value), **fragments)
                for level, part in parts.items()]
    return sql.SQL(" UNION ALL ").join(branches or [sql.SQL(select).format(
        part=sql.SQL("FALSE"), level=sql.Literal(""), **fragments)]), params


#: the query's lexemes (its words, plus any feedback words ``%(q_extra)s``), none without keyword weight
QUERY_LEXEMES = sql.SQL("""lex AS MATERIALIZED (
            SELECT DISTINCT u.lexeme
            FROM unnest(tsvector_to_array(to_tsvector('english', %(q_text)s)) || %(q_extra)s::text[]) AS u(lexeme)
            WHERE %(w_kw)s::float8 > 0
        )""")

#: BM25 (b = 0) of the rows of ``post`` (``id``, ``lexeme``, ``tf``) among ``n`` documents: per lexeme
#: its document frequency ``df``, the question's IDF mass ``ceiling`` (coverage's denominator), and
#: per row its score ``kw.s``, as :func:`agent_memory.ranking.bm25_scores` computes them
_SCORES_OF_DF = """ceiling AS MATERIALIZED (
            SELECT sum(ln(1 + (n.n - df.df + 0.5)::float8 / (df.df + 0.5)::float8)) AS c FROM df CROSS JOIN n
        ),
        kw AS MATERIALIZED (
            SELECT p.id, sum(ln(1 + (n.n - df.df + 0.5)::float8 / (df.df + 0.5)::float8)
                             * p.tf * (%(kw_k1)s::float8 + 1) / (p.tf + %(kw_k1)s::float8)) AS s
            FROM post p JOIN df USING (lexeme) CROSS JOIN n GROUP BY p.id
        )"""
BM25_OF_POSTINGS = sql.SQL("df AS MATERIALIZED (SELECT lexeme, count(*) AS df FROM post GROUP BY lexeme),\n        "
                           + _SCORES_OF_DF)

#: :data:`BM25_OF_POSTINGS` with the document frequencies given (``%(c_lex)s``, ``%(c_df)s``): a search
#: whose big ranges are read from copies counts their lexemes there (:mod:`agent_memory.vector_cache`)
_BM25_OF_GIVEN_DF = sql.SQL("df AS MATERIALIZED (SELECT d.lexeme, d.df FROM unnest(%(c_lex)s::text[], %(c_df)s::bigint[])"
                            " AS d(lexeme, df) WHERE d.df > 0),\n        " + _SCORES_OF_DF)


def weight_params(scoring: Scoring) -> dict[str, Any]:
    """The parameters of ``scoring`` (:class:`agent_memory.ranking.Scoring`) as every statement that
    scores rows names them: the weights (``w_*``), the level priorities (``p_*``), the keyword
    evidence's form (``kw_*``) and the share of cosine in relevance (``q_rel_vec``)."""
    w = scoring.weights
    return dict(
        w_vec=scoring.vector_weight, w_conf=w.confidence, w_scope=w.scope, w_sal=w.salience,
        w_kw=scoring.keyword_weight, kw_k1=scoring.k1, kw_half=scoring.half, kw_cov=scoring.coverage,
        w_ctx=scoring.context, w_ckw=scoring.context_keyword,
        **{f"p_{level}": float(weight) for level, weight in scoring.scope_priority.items()},
        # relevance = (1 - share) * similarity + share * keyword (ranking.rank), whatever the
        # weight of similarity in the final score: the floor is on relevance
        q_rel_vec=1 - w.keyword,
    )


def scoring_params(
    *, query_vector: Sequence[float], query_text: str, extra_lexemes: Sequence[str], k: int, pool: int,
    min_relevance: float, scoring: Scoring,
) -> dict[str, Any]:
    """The parameters every statement that scores rows exactly shares (:func:`indexed_search`,
    :func:`.narrowed.narrowed_search`): the query, ``scoring``'s (:func:`weight_params`), the
    relevance floor and how many candidates to keep (``k + pool``)."""
    return dict(
        weight_params(scoring), q_vec=vector_literal(query_vector), q_text=query_text,
        q_extra=list(extra_lexemes), q_wide=k + pool, q_floor=float(min_relevance),
    )


def indexed_search(
    identity: Identity,
    *,
    scopes: Sequence[Scope] | None,
    types: Sequence[MemoryType] | None,
    query_vector: Sequence[float],
    query_text: str,
    pool: int,
    k: int,
    min_relevance: float,
    scoring: Scoring,
    extra_lexemes: Sequence[str] = (),
    cached: CopiedRows | None = None,
    distributed: bool = False,
) -> Query:
    """:func:`search_candidates` for active memories, answered from the search indexes (migration
    ``0010_search_at_scale``): same columns, and candidates that hold the exact top ``k``.

    Every visible row is read once, one index range per level, from ``memory_items_search_idx``,
    whose ``halfvec`` copy of the vector gives a similarity estimate within :data:`HALF_ERROR`.
    ``n`` (BM25's document count) comes from ``memory_items_count_idx``; term counts and document
    frequencies from ``memory_terms``, one range per level and query lexeme. So every visible row
    gets ``final~ = w_vec * sim~ + w_conf * confidence + w_scope * priority + w_kw * key(bm25)``
    (``key`` as in :func:`search_candidates`),
    within ``e = w_vec * HALF_ERROR`` of its final score, and a relevance within ``HALF_ERROR``.

    Let ``T`` be the ``k``-th best ``final~`` among rows whose relevance estimate clears
    ``min_relevance + HALF_ERROR`` (so they truly clear it): the true ``k``-th best score is at
    least ``T - e``, so every row of the true top ``k`` has ``final~ >= T - 2e`` (and a relevance
    estimate of at least ``min_relevance - HALF_ERROR``). Those rows are the candidates: taken
    from the best ``k + pool`` estimates, or, in the rare case that this band runs past them, from
    a second pass. Only the candidates are read from the table, re-scored with the full vector,
    and re-checked against the full tenancy rule on the ids themselves (:func:`item_filter`);
    :func:`agent_memory.ranking.rank` then ranks them exactly.

    A salience term (``salience_weight * salience``, salience in 0..1, not in the index: it
    changes on every recall) only ever adds, at most ``salience_weight``: a row of the true top
    ``k`` then has ``final~ >= T - 2e - salience_weight``, so the band is that much wider, and
    the candidates' salience is read with them.

    ``cached``: ranges read from a process's copy (:mod:`agent_memory.vector_cache`) instead of
    the index: the rows of those ranges that can matter (:func:`agent_memory.vector_cache.candidates`),
    with their similarity estimates and confidences, and BM25's ``n`` and ``df`` over everything
    the caller sees (the copies count their ranges, :func:`uncopied_statistics` the rest). Those
    ranges are not read here, but for the chosen rows' postings.

    ``distributed``: on a Citus cluster, a level's postings are one scan of its lexemes
    (:data:`_CLUSTER_POSTINGS`): Citus pushes no per-lexeme lateral with ``OFFSET`` down to a shard.
    """
    _, params = item_filter(identity, scopes=scopes, types=types)
    params.update(visible_parts(identity, scopes, keyed=True, skip=cached is not None)[1])
    if cached is not None:
        params.update(skipped(cached.keys))
        params.update(c_ids=cached.ids, c_sim=cached.similarity, c_conf=cached.confidence, c_scope=cached.scopes,
                      c_n=cached.n, c_lex=list(cached.df), c_df=list(cached.df.values()), c_hc=cached.context)
    params.update(scoring_params(
        query_vector=query_vector, query_text=query_text, extra_lexemes=extra_lexemes, k=k, pool=pool,
        min_relevance=min_relevance, scoring=scoring,
    ), q_k=k, q_err=HALF_ERROR)
    # the statement depends on which ids the caller has, never on their values: built once per shape
    return _indexed_search_sql(_shape(identity), None if scopes is None else tuple(scopes), types is not None,
                               cached is not None, distributed), params


#: a level's visible rows, counted from ``memory_items_count_idx`` (a ``_keyed_union`` branch)
_COUNTS = "SELECT count(*) AS c FROM memory_items m WHERE {part} AND " + _ACTIVE + "{types}"
#: a level's postings of the query lexemes: one index range per level and lexeme (scope, scope_key,
#: lexeme), whatever the plan (OFFSET 0 keeps the lateral a parameterised scan, not a join over the
#: whole level)
_POSTINGS = ("SELECT t.id, t.lexeme, t.tf FROM lex, LATERAL (SELECT m.id, m.lexeme, m.tf FROM memory_terms m"
             " WHERE {part} AND m.lexeme = lex.lexeme{types} AND " + live() + " OFFSET 0) t")
#: the same for the words of the rows' contexts (``memory_context_terms``), read only when the
#: context's keyword evidence has a weight (``clex`` is empty otherwise)
_CONTEXT_POSTINGS = ("SELECT t.id, t.lexeme, t.tf FROM clex, LATERAL (SELECT m.id, m.lexeme, m.tf"
                     " FROM memory_context_terms m WHERE {part} AND m.lexeme = clex.lexeme{types} AND " + live()
                     + " OFFSET 0) t")
#: the query's lexemes searched in the contexts' words: none without a context keyword weight
CONTEXT_LEXEMES = sql.SQL("clex AS MATERIALIZED (SELECT lexeme FROM lex WHERE %(w_ckw)s::float8 > 0)")
#: BM25 (b = 0) of the contexts' postings ``cpost`` (``id``, ``lexeme``, ``tf``), with the document
#: frequencies ``df`` and count ``n`` of the memories' own words (one IDF for both)
CONTEXT_BM25 = sql.SQL("""ckw AS MATERIALIZED (
            SELECT p.id, sum(ln(1 + (n.n - df.df + 0.5)::float8 / (df.df + 0.5)::float8)
                             * p.tf * (%(kw_k1)s::float8 + 1) / (p.tf + %(kw_k1)s::float8)) AS s
            FROM cpost p JOIN df USING (lexeme) CROSS JOIN n GROUP BY p.id
        )""")
#: :data:`_POSTINGS` on a cluster: the level's postings of all the query lexemes in one scan (the
#: lexemes are computed first, and the scan reads only the level's shard)
_CLUSTER_POSTINGS = ("SELECT m.id, m.lexeme, m.tf FROM memory_terms m"
                     " WHERE {part} AND m.lexeme = ANY(ARRAY(SELECT lexeme FROM lex)){types} AND " + live())
#: :data:`_CONTEXT_POSTINGS` on a cluster, as :data:`_CLUSTER_POSTINGS`
_CLUSTER_CONTEXT_POSTINGS = ("SELECT m.id, m.lexeme, m.tf FROM memory_context_terms m"
                             " WHERE {part} AND m.lexeme = ANY(ARRAY(SELECT lexeme FROM clex)){types} AND " + live())


@functools.lru_cache(maxsize=512)
def _indexed_search_sql(identity: Identity, scopes: tuple[Scope, ...] | None, typed: bool,
                        cached: bool = False, distributed: bool = False) -> sql.SQL:
    where, _ = item_filter(identity, scopes=scopes, types=(MemoryType.FACT,) if typed else None)
    fragments = {"types": sql.SQL(" AND m.memory_type = ANY(%(f_types)s)" if typed else ""),
                 "prio": scope_priority_sql()}

    def union(select: str, skip: bool = False) -> sql.Composable:
        return _keyed_union(identity, scopes, select, skip=skip, distributed=distributed, **fragments)[0]

    estimate = similarity_sql("coalesce(1 - (m.embedding_half <=> q.h), 0)", "(1 - (m.context_half <=> q.h))")
    rows: sql.Composable = union("SELECT m.id, " + estimate + " AS sim,"
                                 " %(w_conf)s::float8 * m.confidence + %(w_scope)s::float8 * {prio} AS b,"
                                 " m.context_half IS NOT NULL AS hc"
                                 " FROM memory_items m, q WHERE {part} AND " + _ACTIVE + "{types}", skip=cached)
    counts: sql.Composable = union(_COUNTS)
    postings: sql.Composable = union(_CLUSTER_POSTINGS if distributed else _POSTINGS, skip=cached)
    context_postings: sql.Composable = union(_CLUSTER_CONTEXT_POSTINGS if distributed else _CONTEXT_POSTINGS,
                                             skip=cached)
    bm25 = BM25_OF_POSTINGS
    if cached:  # the copied ranges' candidates as the copies chose them; n and df counted with them
        rows = sql.SQL("{rows} UNION ALL SELECT m.id, m.sim, %(w_conf)s::float8 * m.confidence"
                       " + %(w_scope)s::float8 * {prio} AS b, m.hc FROM unnest(%(c_ids)s::uuid[], %(c_sim)s::float8[],"
                       " %(c_conf)s::float8[], %(c_scope)s::text[], %(c_hc)s::boolean[])"
                       " AS m(id, sim, confidence, scope, hc)").format(rows=rows, prio=fragments["prio"])
        counts = sql.SQL("SELECT %(c_n)s::bigint AS c")
        postings = sql.SQL("{postings} UNION ALL SELECT t.id, t.lexeme, t.tf FROM memory_terms t"
                           " WHERE t.id = ANY(%(c_ids)s::uuid[]) AND t.lexeme IN (SELECT lexeme FROM lex)").format(
            postings=postings)
        context_postings = sql.SQL(
            "{postings} UNION ALL SELECT t.id, t.lexeme, t.tf FROM memory_context_terms t"
            " WHERE t.id = ANY(%(c_ids)s::uuid[]) AND t.lexeme IN (SELECT lexeme FROM clex)").format(
            postings=context_postings)
        bm25 = _BM25_OF_GIVEN_DF
    # final~ and relevance~ of every visible row: one index range per level, probing the
    # keyword scores (a hash of the few rows that hold a query word, in their own words or their
    # context's)
    squashed = mixed_keyword_sql(keyword_key_sql("kw.s", "(SELECT c FROM ceiling)"),
                                 keyword_key_sql("ckw.s", "(SELECT c FROM ceiling)"), "v.hc")
    scored = sql.SQL(
        f"SELECT v.id, %(w_vec)s::float8 * v.sim + v.b + %(w_kw)s::float8 * {squashed} AS f,"
        f" %(q_rel_vec)s::float8 * v.sim + (1 - %(q_rel_vec)s::float8) * {squashed} AS rel"
        " FROM ({rows}) v LEFT JOIN kw USING (id) LEFT JOIN ckw USING (id)"
    ).format(rows=rows)
    query = sql.SQL(
        """
        WITH q AS MATERIALIZED (SELECT %(q_vec)s::vector AS v, %(q_vec)s::halfvec AS h),
        {lex},
        n AS MATERIALIZED (SELECT coalesce(sum(c.c), 0)::bigint AS n FROM ({counts}) c),
        post AS MATERIALIZED ({postings}),
        {clex},
        cpost AS MATERIALIZED ({context_postings}),
        {bm25},
        {context_bm25},
        top AS MATERIALIZED (
            SELECT x.id, x.f, x.rel FROM ({scored}) x
            WHERE %(q_floor)s::float8 <= 0 OR x.rel >= %(q_floor)s::float8 - %(q_err)s
            ORDER BY x.f DESC LIMIT %(q_wide)s
        ),
        cut AS MATERIALIZED (
            SELECT c.f, (SELECT count(*) FROM top) = %(q_wide)s AND (SELECT min(f) FROM top) >= c.f AS short
            FROM (SELECT coalesce((SELECT f FROM top
                                   WHERE %(q_floor)s::float8 <= 0 OR rel >= %(q_floor)s::float8 + %(q_err)s
                                   ORDER BY f DESC OFFSET %(q_k)s - 1 LIMIT 1), '-Infinity'::float8)
                         - 2 * %(w_vec)s::float8 * %(q_err)s - %(w_sal)s::float8 AS f) c
        ),
        cand AS (
            SELECT top.id FROM top, cut WHERE top.f >= cut.f
            UNION
            SELECT x.id FROM ({scored}) x  -- only when the band below the cut is wider than ``top``
            WHERE (SELECT short FROM cut) AND x.f >= (SELECT f FROM cut)
              AND (%(q_floor)s::float8 <= 0 OR x.rel >= %(q_floor)s::float8 - %(q_err)s)
        )
        SELECT m.id, m.confidence, m.created_at, coalesce(1 - (m.embedding <=> q.v), 0) AS similarity,
               1 - (m.context_embedding <=> q.v) AS context_similarity,
               m.content_tsv::text AS tsv, m.context_tsv::text AS context_tsv, {prio} AS scope_priority,
               {salience} AS salience,
               (SELECT coalesce(jsonb_object_agg(lexeme, df), jsonb_build_object()) FROM df) AS kw_df,
               (SELECT n FROM n) AS kw_n
        FROM memory_items m, q
        WHERE m.id = ANY(ARRAY(SELECT id FROM cand)) AND {where}
        """
    ).format(counts=counts, postings=postings, scored=scored, prio=fragments["prio"],
             salience=sql.SQL(salience_at()), where=where, lex=QUERY_LEXEMES, bm25=bm25,
             clex=CONTEXT_LEXEMES, context_postings=context_postings, context_bm25=CONTEXT_BM25)
    return sql.SQL(query.as_string())


def skipped(keys: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """The parameters that leave the ranges ``keys`` (``(scope, scope_key)``) out of a keyed read
    (:func:`.visibility.visible_parts` with ``skip``)."""
    params: dict[str, Any] = {"vs_team": [], "vs_org": []}
    for scope, key in keys:
        if scope in ("team", "org"):
            params[f"vs_{scope}"].append(key)
        else:
            params[f"vs_{scope}"] = True
    return params


def uncopied_statistics(identity: Identity, *, scopes: Sequence[Scope] | None, types: Sequence[MemoryType] | None,
                        copied: Sequence[tuple[str, int]], query_text: str, extra_lexemes: Sequence[str]) -> Query:
    """BM25's statistics over the rows the caller sees outside the ``copied`` ranges: one row
    ``('n', NULL, rows)`` and one ``('df', lexeme, rows holding it)`` per query lexeme found, read
    from the same indexes as :func:`indexed_search` (the copies count their own ranges)."""
    _, params = item_filter(identity, scopes=scopes, types=types)
    params.update(visible_parts(identity, scopes, keyed=True, skip=True)[1])
    params.update(skipped(copied), q_text=query_text, q_extra=list(extra_lexemes), w_kw=1.0)
    return _uncopied_statistics_sql(_shape(identity), None if scopes is None else tuple(scopes),
                                    types is not None), params


def _shape(identity: Identity) -> Identity:
    """The identity's shape: which ids it has, not their values (statements are built per shape)."""
    return Identity(user_id="user", **{name: name if getattr(identity, name) is not None else None
                                       for name in ("project_id", "session_id", "team_id", "org_id")})


@functools.lru_cache(maxsize=256)
def _uncopied_statistics_sql(identity: Identity, scopes: tuple[Scope, ...] | None, typed: bool) -> sql.SQL:
    types = {"types": sql.SQL(" AND m.memory_type = ANY(%(f_types)s)" if typed else "")}
    counts = _keyed_union(identity, scopes, _COUNTS, skip=True, **types)[0]
    postings = _keyed_union(identity, scopes, _POSTINGS, skip=True, **types)[0]
    query = sql.SQL(
        "WITH {lex} SELECT 'n' AS kind, NULL::text AS lexeme, (SELECT coalesce(sum(c.c), 0) FROM ({counts}) c)::bigint AS n"
        " UNION ALL SELECT 'df', p.lexeme, count(*) FROM ({postings}) p GROUP BY p.lexeme"
    ).format(lex=QUERY_LEXEMES, counts=counts, postings=postings)
    return sql.SQL(query.as_string())


#: who may read a memory, from the fewest readers to the most: each reads what the one before does
VISIBILITY_RANK = {"owner_only": 0, "members": 1, "public": 2}
_ANY_VISIBILITY = tuple(VISIBILITY_RANK)
#: SQL: ``m``'s :data:`VISIBILITY_RANK`
_RANK_SQL = "(CASE m.visibility WHEN 'public' THEN 2 WHEN 'members' THEN 1 ELSE 0 END)"


def merge_rank(scope: Scope, visibility: str) -> int:
    """The least :data:`VISIBILITY_RANK` a memory of ``scope`` needs for a new one of ``visibility``
    to be merged into it as a duplicate: at least as visible, or the new one's readers would be
    left without it (a public note folded into a members-only one). In a user's or a session's
    memory visibility changes no reader: any (0)."""
    return 0 if scope in (Scope.USER, Scope.SESSION) else VISIBILITY_RANK[visibility]


def merge_visibilities(scope: Scope, visibility: str) -> list[str]:
    """The visibilities a memory of ``scope`` may have for a new one of ``visibility`` to be
    merged into it (:func:`merge_rank`)."""
    least = merge_rank(scope, visibility)
    return [v for v, rank in VISIBILITY_RANK.items() if rank >= least]


def similar_items(identity: Identity, scopes: Sequence[Scope] | None, vector: Sequence[float], threshold: float,
                  limit: int, visibilities: Sequence[str] = _ANY_VISIBILITY) -> Query:
    """The ``limit`` active rows the caller sees in ``scopes`` closest to ``vector`` at cosine
    similarity >= threshold, closest (then oldest) first, each with its ``similarity``; only rows
    of ``visibilities`` (a duplicate check: :func:`merge_visibilities`).

    Exact, from the search index: the ``halfvec`` distances (within :data:`HALF_ERROR`) pick
    every row that can be among them (within ``2 * HALF_ERROR`` of the ``limit``-th estimate);
    only those are read from the table and measured with the full vectors."""
    branches, params = _keyed_union(
        identity, scopes,
        "SELECT id, d FROM (SELECT m.id, m.embedding_half <=> q.h AS d FROM memory_items m, q"
        " WHERE {part} AND " + _ACTIVE + " AND m.visibility = ANY(%(d_vis)s::text[]) OFFSET 0) x"
        " WHERE d <= 1 - %(d_thr)s::float8 + %(d_err)s")
    filt, check = item_filter(identity, scopes=scopes)
    query = sql.SQL(
        "WITH q AS MATERIALIZED (SELECT %(d_vec)s::vector AS v, %(d_vec)s::halfvec AS h),"
        " est AS MATERIALIZED ({branches}),"
        " cut AS (SELECT coalesce((SELECT d FROM est ORDER BY d OFFSET %(d_limit)s - 1 LIMIT 1), 'Infinity'::float8)"
        "         + 2 * %(d_err)s AS d)"
        " SELECT {cols}, 1 - (m.embedding <=> q.v) AS similarity FROM memory_items m, q"
        " WHERE m.id = ANY(ARRAY(SELECT est.id FROM est, cut WHERE est.d <= cut.d)) AND {filt}"
        " AND m.visibility = ANY(%(d_vis)s::text[]) AND (m.embedding <=> q.v) <= 1 - %(d_thr)s::float8"
        " ORDER BY m.embedding <=> q.v, m.created_at LIMIT %(d_limit)s"
    ).format(branches=branches, cols=_COLS, filt=filt)
    return query, dict(params, **check, d_vec=vector_literal(vector), d_thr=threshold, d_limit=limit,
                       d_err=HALF_ERROR, d_vis=list(visibilities))


def cross_level_neighbours(identity: Identity, ids: Sequence[Any], threshold: float, per_item: int) -> Query:
    """For each of ``ids``: up to ``per_item`` active rows the caller sees at another level
    (scope) with cosine similarity >= threshold to it, closest first, each with ``anchor`` and
    ``similarity``.

    One pass over the caller's rows in the search index measures each against every anchor by
    its ``halfvec`` copy; per anchor, the rows within ``2 * HALF_ERROR`` of its ``per_item``-th
    estimate are read and measured exactly."""
    # a level is read only against the anchors of other levels, and not at all when there are none
    branches, params = _keyed_union(
        identity, None,
        "SELECT anchor, id, d FROM (SELECT a.id AS anchor, m.id, m.embedding_half <=> a.h AS d"
        " FROM memory_items m JOIN a ON a.scope <> {level} WHERE {part} AND " + _ACTIVE + ""
        " AND EXISTS (SELECT 1 FROM a WHERE a.scope <> {level}) OFFSET 0) x"
        " WHERE d <= 1 - %(n_thr)s::float8 + %(n_err)s")
    filt, check = item_filter(identity)
    query = sql.SQL(
        "WITH a AS MATERIALIZED (SELECT m.id, m.scope, m.embedding_half AS h, m.embedding AS v FROM memory_items m"
        "                        WHERE m.id = ANY(%(n_ids)s)),"
        " est AS MATERIALIZED ({branches}),"
        " ranked AS (SELECT anchor, id, d, row_number() OVER (PARTITION BY anchor ORDER BY d) AS r FROM est),"
        " cut AS (SELECT anchor, coalesce(max(d) FILTER (WHERE r = %(n_per)s), 'Infinity'::float8) + 2 * %(n_err)s AS d"
        "         FROM ranked GROUP BY anchor),"
        " cand AS (SELECT e.anchor, e.id FROM est e JOIN cut USING (anchor) WHERE e.d <= cut.d),"
        " exact AS (SELECT c.anchor, c.id, 1 - (m.embedding <=> a.v) AS similarity,"
        "                  row_number() OVER (PARTITION BY c.anchor ORDER BY m.embedding <=> a.v) AS r"
        "           FROM cand c JOIN a ON a.id = c.anchor JOIN memory_items m ON m.id = c.id"
        "           WHERE {filt} AND (m.embedding <=> a.v) <= 1 - %(n_thr)s::float8)"
        " SELECT e.anchor, {cols}, e.similarity FROM exact e JOIN memory_items m ON m.id = e.id"
        " WHERE e.r <= %(n_per)s ORDER BY e.anchor, e.r"
    ).format(branches=branches, cols=_COLS, filt=filt)
    return query, dict(params, **check, n_ids=list(ids), n_thr=threshold, n_per=per_item, n_err=HALF_ERROR)


def find_duplicate(identity: Identity, scope: Scope, vector: Sequence[float], threshold: float, *,
                   visibility: str) -> Query:
    """The closest active row of ``scope`` the caller sees at cosine similarity >= threshold that
    a new memory of ``visibility`` may be merged into (:func:`merge_visibilities`)."""
    return similar_items(identity, (scope,), vector, threshold, 1, merge_visibilities(scope, visibility))


def find_duplicates_bulk(identity: Identity, scope: Scope, vectors: Sequence[Sequence[float]],
                         threshold: float, visibilities: Sequence[str]) -> Query:
    """For each vector (by 1-based ordinal), the id of its closest duplicate among the active
    rows of ``scope`` the caller sees, if any, that the new memory (its visibility at the same
    place in ``visibilities``) may be merged into (:func:`merge_rank`): one pass over the scope
    in the search index measures every row against every vector by the ``halfvec`` copies; the
    rows within ``2 * HALF_ERROR`` of each vector's best estimate are measured exactly."""
    branches, params = _keyed_union(
        identity, (scope,),
        "SELECT ord, id, d FROM (SELECT t.ord, m.id, m.embedding_half <=> t.h AS d"
        " FROM memory_items m JOIN t ON " + _RANK_SQL + " >= t.vis_min WHERE {part} AND " + _ACTIVE + " OFFSET 0) x"
        " WHERE d <= 1 - %(b_thr)s::float8 + %(b_err)s")
    filt, check = item_filter(identity, scopes=(scope,))
    query = sql.SQL(
        "WITH t AS MATERIALIZED (SELECT ord, v, v::halfvec AS h, vis_min"
        "                        FROM unnest(%(b_vecs)s::vector[], %(b_vis_min)s::int[]) WITH ORDINALITY"
        "                        AS u(v, vis_min, ord)),"
        " est AS MATERIALIZED ({branches}),"
        " cand AS (SELECT ord, id FROM (SELECT ord, id, d, min(d) OVER (PARTITION BY ord) AS best FROM est) e"
        "          WHERE d <= best + 2 * %(b_err)s)"
        " SELECT DISTINCT ON (c.ord) c.ord, m.id FROM cand c JOIN t USING (ord) JOIN memory_items m ON m.id = c.id"
        " WHERE {filt} AND (m.embedding <=> t.v) <= 1 - %(b_thr)s::float8"
        " ORDER BY c.ord, m.embedding <=> t.v, m.created_at"
    ).format(branches=branches, filt=filt)
    return query, dict(params, **check, b_vecs=[vector_literal(v) for v in vectors], b_thr=threshold,
                       b_err=HALF_ERROR, b_vis_min=[merge_rank(scope, v) for v in visibilities])
