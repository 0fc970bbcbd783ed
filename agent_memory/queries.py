"""SQL for memory items, built by pure functions: ``(query, params)`` and no I/O.

The one rule every read here follows: rows are filtered by the caller's
identity through :func:`visible_filter` before anything else, so no read path
can forget tenancy. Values always travel as parameters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from .models import Identity, MemoryType, Scope, Status

__all__ = [
    "ITEM_COLUMNS",
    "granted_to",
    "member_of",
    "shared_with",
    "vector_literal",
    "visible_filter",
]

#: columns read back into a MemoryItem (embedding and tsvector stay in the database)
ITEM_COLUMNS = (
    "id", "content", "memory_type", "scope", "scope_id", "user_id", "project_id", "session_id",
    "source", "source_id", "confidence", "visibility", "status", "created_at", "updated_at",
    "last_used_at", "access_count", "metadata", "valid_from", "valid_to", "superseded_by", "version",
)
_COLS = sql.SQL(", ").join(sql.SQL("m.") + sql.Identifier(c) for c in ITEM_COLUMNS)
_RETURNING = sql.SQL(", ").join(sql.Identifier(c) for c in ITEM_COLUMNS)

Query = tuple[sql.Composable, dict[str, Any]]


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form; works for any embedder without registering types on the caller's connections."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def member_of(kind: str, scope_id: str, user: str, alias: str = "mm") -> str:
    """SQL: ``user`` is a member of the project/team/org ``(kind, scope_id)``. The arguments are
    SQL expressions (a column, a literal or a placeholder), so every read builds its membership
    test here, whether it names the scope by parameter or by column."""
    return (f"EXISTS (SELECT 1 FROM memory_members {alias} WHERE {alias}.kind = {kind}"
            f" AND {alias}.scope_id = {scope_id} AND {alias}.user_id = {user})")


def granted_to(user: str, share: str = "ps") -> str:
    """SQL: the project share row ``share`` is granted to ``user``, or to a team or org of theirs."""
    return (f"(({share}.grantee_kind = 'user' AND {share}.grantee_id = {user}) OR "
            + member_of(f"{share}.grantee_kind", f"{share}.grantee_id", user, "gm") + ")")


def shared_with(project_id: str, user: str) -> str:
    """SQL: the project ``project_id`` is shared with ``user`` (directly or through a team/org)."""
    return (f"EXISTS (SELECT 1 FROM memory_project_shares ps WHERE ps.project_id = {project_id}"
            f" AND {granted_to(user)})")


def visible_filter(identity: Identity, scopes: Sequence[Scope] | None = None) -> Query:
    """``m`` rows the caller may read; the tenancy rule every read goes through.

    - user memories: their own; session memories: their own, of their current session;
    - the project's memories if they are a member (all but other members' owner_only ones),
      or only its public ones if the project is shared with them (or a team/org of theirs);
    - team and org memories of every team and org they belong to (only ``team_id`` /
      ``org_id`` when the identity names one), except other members' owner_only ones.

    Membership is read in the same statement, so a read never sees a role older than itself.
    """
    scopes = tuple(Scope) if scopes is None else tuple(scopes)
    parts: list[sql.Composable] = []
    params: dict[str, Any] = {"vf_user": identity.user_id}
    if Scope.USER in scopes:
        parts.append(sql.SQL("(m.scope = 'user' AND m.scope_id = %(vf_user)s)"))
    if Scope.SESSION in scopes and identity.session_id is not None:
        params["vf_session"] = identity.session_id
        parts.append(sql.SQL("(m.scope = 'session' AND m.scope_id = %(vf_session)s AND m.user_id = %(vf_user)s)"))
    if Scope.PROJECT in scopes and identity.project_id is not None:
        params["vf_project"] = identity.project_id
        parts.append(sql.SQL(
            "(m.scope = 'project' AND m.scope_id = %(vf_project)s AND ("
            "(" + member_of("'project'", "%(vf_project)s", "%(vf_user)s")
            + " AND (m.visibility <> 'owner_only' OR m.user_id = %(vf_user)s))"
            " OR (m.visibility = 'public' AND " + shared_with("%(vf_project)s", "%(vf_user)s") + ")))"
        ))
    for scope, chosen in ((Scope.TEAM, identity.team_id), (Scope.ORG, identity.org_id)):
        if scope not in scopes:
            continue
        narrow = ""
        if chosen is not None:
            params[f"vf_{scope.value}"] = chosen
            narrow = f" AND mm.scope_id = %(vf_{scope.value})s"
        parts.append(sql.SQL(
            f"(m.scope = '{scope.value}' AND m.scope_id IN (SELECT mm.scope_id FROM memory_members mm"
            f" WHERE mm.kind = '{scope.value}' AND mm.user_id = %(vf_user)s{narrow})"
            " AND (m.visibility <> 'owner_only' OR m.user_id = %(vf_user)s))"
        ))
    if not parts:
        return sql.SQL("FALSE"), params
    return sql.SQL("(") + sql.SQL(" OR ").join(parts) + sql.SQL(")"), params


def item_filter(
    identity: Identity,
    *,
    scopes: Sequence[Scope] | None = None,
    types: Sequence[MemoryType] | None = None,
    statuses: Sequence[Status] | None = (Status.ACTIVE,),
    as_of: datetime | None = None,
) -> Query:
    """:func:`visible_filter` narrowed by type and status; with ``as_of``, only items whose fact
    held at that time (``valid_from <= as_of < valid_to``)."""
    where, params = visible_filter(identity, scopes)
    clauses = [where]
    if as_of is not None:
        clauses.append(sql.SQL("m.valid_from <= %(f_as_of)s AND (m.valid_to IS NULL OR m.valid_to > %(f_as_of)s)"))
        params["f_as_of"] = as_of
    if types is not None:
        clauses.append(sql.SQL("m.memory_type = ANY(%(f_types)s)"))
        params["f_types"] = [t.value for t in types]
    if statuses is not None:
        clauses.append(sql.SQL("m.status = ANY(%(f_statuses)s)"))
        params["f_statuses"] = [s.value for s in statuses]
    return sql.SQL(" AND ").join(clauses), params


def _scope_priority_expr() -> sql.Composable:
    return sql.SQL(
        "(CASE m.scope WHEN 'session' THEN %(p_session)s::float8 WHEN 'project' THEN %(p_project)s::float8"
        " WHEN 'team' THEN %(p_team)s::float8 WHEN 'org' THEN %(p_org)s::float8 ELSE %(p_user)s::float8 END)"
    )


def search_candidates(
    where: Query,
    *,
    query_vector: Sequence[float],
    query_text: str,
    pool: int,
    vector_weight: float,
    confidence_weight: float,
    scope_weight: float,
    scope_priority: dict[str, float],
    keyword_weight: float = 0.0,
    k1: float = 1.2,
    half: float = 5.0,
) -> Query:
    """Everything a search reads, in one statement: candidates and BM25 statistics.

    Write ``final = A + B`` with ``A`` the score without keyword evidence and
    ``B = keyword_weight * bm25 / (bm25 + half)``. The vector list holds the
    ``pool`` best rows by ``A``; the keyword list the ``pool`` best rows that
    match any query lexeme, by ``A + B`` (BM25 with b = 0 and IDF over the
    caller's rows, as :func:`agent_memory.ranking.bm25_scores` computes it). A
    row that matches no lexeme has ``final = A``, so every row of the true top
    ``k <= pool`` is in one of the lists: the union always contains the exact
    answer, and no ANN index can lose rows under the scope filter.

    Rows carry only what ranking needs; the winners are read in full afterwards
    (:func:`touch_items` / :func:`select_items_by_ids`). Each row also carries ``kw_df`` (lexeme -> rows containing it) and
    ``kw_n`` (rows visible), counted in one pass over the caller's rows rather
    than one index probe per lexeme, whose cost grows with the whole table.
    """
    filt, params = where
    params = dict(params)
    params.update(
        q_vec=vector_literal(query_vector), q_text=query_text, q_pool=pool,
        w_vec=vector_weight, w_conf=confidence_weight, w_scope=scope_weight,
        **{f"p_{level}": float(weight) for level, weight in scope_priority.items()},
        w_kw=keyword_weight, kw_k1=k1, kw_half=half,
    )
    prior = sql.SQL(
        "%(w_vec)s::float8 * (1 - (m.embedding <=> q.v)) + %(w_conf)s::float8 * m.confidence"
        " + %(w_scope)s::float8 * {prio}"
    ).format(prio=_scope_priority_expr())
    if keyword_weight > 0:
        keyword_ctes = sql.SQL(
            """
            lex AS MATERIALIZED (
                SELECT u.lex, quote_literal(u.lex)::tsquery AS tq
                FROM unnest(tsvector_to_array(to_tsvector('english', %(q_text)s))) AS u(lex)
            ),
            stats AS MATERIALIZED (
                SELECT l.lex, count(*) FILTER (WHERE m.content_tsv @@ l.tq) AS df, count(*) AS n
                FROM memory_items m CROSS JOIN lex l WHERE {filt} GROUP BY l.lex
            ),
            idf AS MATERIALIZED (
                SELECT lex, ln(1 + (n - df + 0.5)::float8 / (df + 0.5)::float8) AS w FROM stats WHERE df > 0
            ),
            """
        ).format(filt=filt)
        keyword_branch = sql.SQL(
            """
            UNION
            (SELECT m.id FROM memory_items m CROSS JOIN q CROSS JOIN LATERAL (
                 SELECT coalesce(sum(i.w * coalesce(cardinality(u.positions), 1) * (%(kw_k1)s::float8 + 1)
                                     / (coalesce(cardinality(u.positions), 1) + %(kw_k1)s::float8)), 0) AS s
                 FROM unnest(m.content_tsv) AS u JOIN idf i ON u.lexeme = i.lex) AS b
             WHERE q.tq IS NOT NULL AND m.content_tsv @@ q.tq AND {filt}
             ORDER BY {prior} + %(w_kw)s::float8 * (b.s / (b.s + %(kw_half)s::float8)) DESC, m.id
             LIMIT %(q_pool)s)
            """
        ).format(filt=filt, prior=prior)
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
                   CASE WHEN numnode(plainto_tsquery('english', %(q_text)s)) = 0 THEN NULL
                        ELSE replace(plainto_tsquery('english', %(q_text)s)::text, ' & ', ' | ')::tsquery
                   END AS tq
        ),
        {keyword_ctes}
        cand AS (
            (SELECT m.id FROM memory_items m, q WHERE {filt} ORDER BY {prior} DESC, m.id LIMIT %(q_pool)s)
            {keyword_branch}
        )
        SELECT m.id, m.confidence, m.created_at, 1 - (m.embedding <=> q.v) AS similarity,
               m.content_tsv::text AS tsv, {prio} AS scope_priority, {stats_cols}
        FROM memory_items m, q
        WHERE m.id IN (SELECT id FROM cand)
        """
    ).format(filt=filt, prior=prior, keyword_ctes=keyword_ctes, keyword_branch=keyword_branch,
             prio=_scope_priority_expr(), stats_cols=stats_cols)
    return query, params


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


def select_item_by_id(where: Query, memory_id: Any) -> Query:
    filt, params = where
    return (
        sql.SQL("SELECT {cols} FROM memory_items m WHERE m.id = %(id)s AND {filt}").format(cols=_COLS, filt=filt),
        dict(params, id=memory_id),
    )


def similar_items(where: Query, vector: Sequence[float], threshold: float, limit: int) -> Query:
    """The ``limit`` rows in ``where`` closest to ``vector`` at cosine similarity >= threshold,
    closest first, each with its ``similarity``."""
    filt, params = where
    return (
        sql.SQL(
            "SELECT {cols}, 1 - (m.embedding <=> %(d_vec)s::vector) AS similarity FROM memory_items m"
            " WHERE {filt} AND (m.embedding <=> %(d_vec)s::vector) <= 1 - %(d_thr)s::float8"
            " ORDER BY m.embedding <=> %(d_vec)s::vector, m.created_at LIMIT %(d_limit)s"
        ).format(cols=_COLS, filt=filt),
        dict(params, d_vec=vector_literal(vector), d_thr=threshold, d_limit=limit),
    )


def cross_level_neighbours(where: Query, ids: Sequence[Any], threshold: float, per_item: int) -> Query:
    """For each of ``ids``: up to ``per_item`` rows of ``where`` at another level (scope) with
    cosine similarity >= threshold to it, closest first, each with ``anchor`` and ``similarity``."""
    filt, params = where
    return (
        sql.SQL(
            "SELECT a.id AS anchor, {cols}, n.similarity FROM memory_items a CROSS JOIN LATERAL ("
            " SELECT m.id AS nid, 1 - (m.embedding <=> a.embedding) AS similarity FROM memory_items m"
            " WHERE {filt} AND m.scope <> a.scope AND (m.embedding <=> a.embedding) <= 1 - %(n_thr)s::float8"
            " ORDER BY m.embedding <=> a.embedding LIMIT %(n_per)s) n JOIN memory_items m ON m.id = n.nid"
            " WHERE a.id = ANY(%(n_ids)s)"
        ).format(cols=_COLS, filt=filt),
        dict(params, n_ids=list(ids), n_thr=threshold, n_per=per_item),
    )


def find_duplicate(where: Query, vector: Sequence[float], threshold: float) -> Query:
    """The closest active row in ``where`` at cosine similarity >= threshold."""
    return similar_items(where, vector, threshold, 1)


def find_duplicates_bulk(where: Query, vectors: Sequence[Sequence[float]], threshold: float) -> Query:
    """For each vector (by 1-based ordinal), the id of its closest duplicate in ``where`` if any."""
    filt, params = where
    return (
        sql.SQL(
            "SELECT t.ord, d.id FROM unnest(%(b_vecs)s::vector[]) WITH ORDINALITY AS t(v, ord)"
            " CROSS JOIN LATERAL (SELECT m.id FROM memory_items m WHERE {filt}"
            " AND (m.embedding <=> t.v) <= 1 - %(b_thr)s::float8 ORDER BY m.embedding <=> t.v LIMIT 1) d"
        ).format(filt=filt),
        dict(params, b_vecs=[vector_literal(v) for v in vectors], b_thr=threshold),
    )


COPY_COLUMNS = ("id", "content", "memory_type", "scope", "scope_id", "user_id", "project_id", "session_id",
                "source", "source_id", "confidence", "visibility", "metadata", "embedding")


def insert_item() -> sql.Composable:
    """One row from a dict keyed by :data:`COPY_COLUMNS`, returned as stored."""
    values = [sql.Placeholder(c) for c in COPY_COLUMNS]
    values[-1] = sql.SQL("{}::vector").format(values[-1])
    return sql.SQL("INSERT INTO memory_items ({cols}) VALUES ({vals}) RETURNING {ret}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in COPY_COLUMNS),
        vals=sql.SQL(", ").join(values), ret=_RETURNING,
    )


def copy_items() -> sql.Composable:
    return sql.SQL("COPY memory_items ({cols}) FROM STDIN").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in COPY_COLUMNS)
    )


def touch_items(ids: Sequence[Any]) -> Query:
    """Record use of search hits and read them in full. Usage stats are bookkeeping, so this
    transaction's commit does not wait for its WAL flush (``synchronous_commit`` off, set in
    the same round trip)."""
    return (
        sql.SQL(
            "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true))"
            " UPDATE memory_items SET last_used_at = now(), access_count = access_count + 1"
            " FROM async_commit WHERE id = ANY(%(ids)s) RETURNING {ret}"
        ).format(ret=_RETURNING),
        {"ids": list(ids)},
    )


def select_items_by_ids(ids: Sequence[Any]) -> Query:
    """Rows by id, for ids a scoped query already returned."""
    return (
        sql.SQL("SELECT {cols} FROM memory_items m WHERE m.id = ANY(%(ids)s)").format(cols=_COLS),
        {"ids": list(ids)},
    )


def update_status(memory_id: Any, status: Status) -> Query:
    return (
        sql.SQL(
            "UPDATE memory_items SET status = %(status)s, updated_at = now() WHERE id = %(id)s RETURNING {ret}"
        ).format(ret=_RETURNING),
        {"id": memory_id, "status": status.value},
    )


def refresh_duplicate(memory_id: Any) -> Query:
    return (
        sql.SQL(
            "UPDATE memory_items SET last_used_at = now() WHERE id = %(id)s RETURNING {ret}"
        ).format(ret=_RETURNING),
        {"id": memory_id},
    )


def stats(where: Query) -> Query:
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
