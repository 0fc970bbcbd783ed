"""The statements a process's copy of big scopes' vectors (:mod:`agent_memory.vector_cache`) reads
through: which index ranges a caller reads and under which rule, what changed in a copied range
since the copy was made, and a range in full. Migration ``0016_scope_vector_cache`` keeps what
they read (``changed_xid``, ``memory_scope_resets``).

Transaction ids travel as text (``xid8`` has no Python type here) and are compared as ``xid8``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from ..models import Identity, Scope
from .items import item_columns, vector_literal
from .search import GENERIC_PLANS
from .types import Query
from .visibility import item_filter, level_members, member_of, scope_key, shared_with

__all__ = ["RANGE_COLUMNS", "cache_changes", "cache_load", "cache_plan", "closest_among", "visible_ranges"]

#: what a copy holds of each row (``v``: pgvector's binary form, 4 header bytes then big-endian
#: float32s; ``cv``: the context's vector so, NULL without context; ``expires``: seconds since the
#: epoch, NULL for never)
RANGE_COLUMNS = ("m.id, vector_send(m.embedding) AS v, vector_send(m.context_embedding) AS cv, m.confidence,"
                 " m.visibility, m.owner_key,"
                 " extract(epoch FROM m.expires_at)::float8 AS expires, m.memory_type, m.status = 'active' AS active,"
                 " m.content_tsv::text AS tsv, m.context_tsv::text AS ctsv")


def visible_ranges(identity: Identity, scopes: Sequence[Scope] | None) -> Query:
    """SQL rows ``(scope, scope_key, rule)``: each index range of ``memory_items_search_idx`` the
    caller reads, and which of its rows they see there (``rule``): ``all`` (their user level),
    ``mine`` (their rows: the session level), ``member`` (all but others' ``owner_only`` rows: a
    project, team or org they belong to) or ``public`` (a project shared with them).

    This is :func:`.visibility.visible_parts`'s rule (keyed) stated per range, so that the rows
    of a range can be told apart without the database; it only chooses candidates, and every row
    a search returns is read again under the full rule."""
    scopes = tuple(Scope) if scopes is None else tuple(scopes)
    params: dict[str, Any] = {"vr_user": identity.user_id}
    branches: list[str] = []
    if Scope.USER in scopes:
        params["vr_user_key"] = scope_key(identity.user_id)
        branches.append("SELECT 'user'::text, %(vr_user_key)s::bigint, 'all'::text")
    if Scope.SESSION in scopes and identity.session_id is not None:
        params["vr_session_key"] = scope_key(identity.session_id)
        branches.append("SELECT 'session', %(vr_session_key)s::bigint, 'mine'")
    if Scope.PROJECT in scopes and identity.project_id is not None:
        params.update(vr_project=identity.project_id, vr_project_key=scope_key(identity.project_id))
        branches.append(
            "SELECT 'project', %(vr_project_key)s::bigint, CASE WHEN x.member THEN 'member' ELSE 'public' END"
            " FROM (SELECT " + member_of("'project'", "%(vr_project)s", "%(vr_user)s") + " AS member, "
            + shared_with("%(vr_project)s", "%(vr_user)s") + " AS shared) x WHERE x.member OR x.shared")
    for scope, chosen in ((Scope.TEAM, identity.team_id), (Scope.ORG, identity.org_id)):
        if scope in scopes:
            branches.append(f"SELECT '{scope.value}', agent_memory_key(mm.scope_id), 'member' "
                            + level_members(scope, chosen, "vr", params))
    if not branches:
        branches.append("SELECT NULL::text, NULL::bigint, NULL::text WHERE FALSE")
    return sql.SQL(" UNION ALL ".join(branches)), params


def cache_plan(identity: Identity, scopes: Sequence[Scope] | None, *, known: Sequence[str], bound: int,
               query_text: str = "", extra_lexemes: Sequence[str] = ()) -> Query:
    """One row per range the caller reads (:func:`visible_ranges`), each with the last reset
    of the range (``reset``: a delete, a row moved out, or a truncation of the table), and for a
    range not in ``known`` (``"scope/key"`` strings) its active rows counted up to ``bound``
    (``size``); every row also carries the statement's snapshot as ``xmax`` and ``xip`` (every
    transaction below ``xmax`` but those in ``xip`` had ended when it ran), ``now`` and ``lexemes``,
    the query's lexemes as the search statement reads them (:data:`.search.QUERY_LEXEMES`). Also
    sets the transaction's plans to generic, as the indexed search wants
    (:data:`.search.GENERIC_PLANS`). Without ranges, one row with a NULL scope."""
    ranges, params = visible_ranges(identity, scopes)
    query = sql.SQL(
        "WITH s AS MATERIALIZED (SELECT pg_current_snapshot() AS s),"
        " h AS MATERIALIZED (SELECT pg_snapshot_xmax(s.s)::text AS xmax,"
        "                               ARRAY(SELECT x::text FROM pg_snapshot_xip(s.s) AS x) AS xip,"
        "                               extract(epoch FROM now())::float8 AS now, ({plans}) AS plans,"
        "                               ARRAY(SELECT DISTINCT u.lexeme FROM unnest(tsvector_to_array("
        "                                   to_tsvector('english', %(cp_text)s)) || %(cp_extra)s::text[]) AS u(lexeme)"
        "                               ) AS lexemes FROM s),"
        " r(scope, scope_key, rule) AS ({ranges})"
        " SELECT r.scope, r.scope_key, r.rule, h.xmax, h.xip, h.now, h.lexemes,"
        "  (SELECT s.xid::text FROM memory_scope_resets s"
        "   WHERE (s.scope = r.scope AND s.scope_key = r.scope_key) OR (s.scope = '*' AND s.scope_key = 0)"
        "   ORDER BY s.xid DESC LIMIT 1) AS reset,"
        "  CASE WHEN r.scope IS NULL OR r.scope || '/' || r.scope_key = ANY(%(cp_known)s::text[]) THEN NULL"
        "       ELSE (SELECT count(*) FROM (SELECT 1 FROM memory_items m WHERE m.scope = r.scope"
        "             AND m.scope_key = r.scope_key AND m.status = 'active' LIMIT %(cp_bound)s) c) END AS size"
        " FROM h LEFT JOIN r ON TRUE"
    ).format(plans=sql.SQL(GENERIC_PLANS), ranges=ranges)
    return query, dict(params, cp_known=list(known), cp_bound=bound, cp_text=query_text,
                       cp_extra=list(extra_lexemes))


def cache_changes(ranges: Sequence[tuple[str, int, str, Sequence[str]]]) -> Query:
    """For each copied range ``(scope, scope_key, xmax, xip)`` (the snapshot its copy is true as
    of, :func:`cache_plan`): its rows changed by transactions that had not ended then, those from
    ``xmax`` on or in ``xip`` (:data:`RANGE_COLUMNS`, with the range's ``scope`` and ``scope_key``).
    Two index ranges per copy, however old the oldest running transaction is."""
    query = sql.SQL(
        "SELECT c.scope, c.scope_key, {cols}"
        " FROM unnest(%(cc_scope)s::text[], %(cc_key)s::bigint[], %(cc_xmax)s::text[], %(cc_xip)s::text[])"
        "      AS c(scope, scope_key, xmax, xip)"
        " CROSS JOIN LATERAL ("  # two index ranges (an OR would read the whole range)
        "  SELECT * FROM memory_items m WHERE m.scope = c.scope AND m.scope_key = c.scope_key"
        "  AND m.changed_xid >= c.xmax::xid8"
        "  UNION ALL SELECT * FROM memory_items m WHERE m.scope = c.scope AND m.scope_key = c.scope_key"
        "  AND m.changed_xid = ANY(string_to_array(c.xip, ',')::xid8[]) AND m.changed_xid < c.xmax::xid8) m"
    ).format(cols=sql.SQL(RANGE_COLUMNS))
    return query, {"cc_scope": [r[0] for r in ranges], "cc_key": [r[1] for r in ranges],
                   "cc_xmax": [r[2] for r in ranges], "cc_xip": [",".join(r[3]) for r in ranges]}


def cache_load(scope: str, key: int) -> Query:
    """Every active row of one range (:data:`RANGE_COLUMNS`), to copy it."""
    return (sql.SQL("SELECT {cols} FROM memory_items m WHERE m.scope = %(cl_scope)s AND m.scope_key = %(cl_key)s"
                    " AND m.status = 'active'").format(cols=sql.SQL(RANGE_COLUMNS)),
            {"cl_scope": scope, "cl_key": key})


def closest_among(identity: Identity, scopes: Sequence[Scope], ids: Sequence[Any], vector: Sequence[float],
                  threshold: float, limit: int, visibilities: Sequence[str]) -> Query:
    """:func:`.search.similar_items` over the rows ``ids`` only (the rows a copy found near
    ``vector``): the ``limit`` active rows among them the caller sees in ``scopes`` at cosine
    similarity >= threshold, of ``visibilities`` (:func:`.search.merge_visibilities`), closest
    (then oldest) first, measured with the full vectors."""
    filt, params = item_filter(identity, scopes=scopes)
    query = sql.SQL(
        "SELECT {cols}, 1 - (m.embedding <=> %(d_vec)s::vector) AS similarity FROM memory_items m"
        " WHERE m.id = ANY(%(d_ids)s::uuid[]) AND {filt} AND m.visibility = ANY(%(d_vis)s::text[])"
        " AND (m.embedding <=> %(d_vec)s::vector) <= 1 - %(d_thr)s::float8"
        " ORDER BY m.embedding <=> %(d_vec)s::vector, m.created_at LIMIT %(d_limit)s"
    ).format(cols=item_columns(), filt=filt)
    return query, dict(params, d_ids=list(ids), d_vec=vector_literal(vector), d_thr=threshold, d_limit=limit,
                       d_vis=list(visibilities))
