"""The statements of :class:`~agent_memory.store.AgentMemoryStore`, LangGraph's ``BaseStore`` over memory items.

A store item is a memory item with a ``key`` and, in its metadata under :data:`STORE_FIELD`,
its namespace (``ns``, a JSON array), its full JSON value (``value``), its TTL in minutes
(``ttl``) and whether it is searchable by a query (``indexed``). Every other memory the caller
may read (one saved with ``add``, extracted, imported) shows in the store too, at its level's
root namespace (``("memories", user_id)``, ``("projects", project_id)``...) with the value
``{"content": ...}``: that is what :func:`namespace_expression` and :func:`value_expression` say.

Each builder takes a ``where`` from :func:`.visibility.item_filter`, so tenancy travels with
every statement; namespaces are matched by whole segments, and what a caller types (prefix
segments, filter keys and values) only ever travels as parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql

from ..models import Scope
from ..filters import Filter
from .filters import filter_sql
from .items import vector_literal
from .store_vectors import FIELD_DISTANCES, field_score
from .types import Query
from .visibility import granted_to

__all__ = [
    "STORE_DISTANCES",
    "STORE_FIELD",
    "like_prefix",
    "list_store_namespaces",
    "listed_with",
    "namespace_expression",
    "op_savepoint",
    "readable_projects",
    "refresh_store_expiry",
    "renewal_savepoint",
    "search_store",
    "store_filter",
    "value_expression",
]

#: the metadata key a store item keeps its namespace, value, TTL and index flag under
STORE_FIELD = "_store"

#: a store's ``distance_type`` as LangGraph defines it: pgvector's operator (ordered ascending)
#: and the ``score`` made of its distance ``{d}``, higher is closer: cosine ``1 - d`` (a row
#: without a vector scores 0, as in every search), l2 ``-d``, inner product ``-d`` (pgvector's
#: ``<#>`` is the negated product, so the score is the product); without a vector, the last two
#: score None and come last
STORE_DISTANCES: dict[str, tuple[str, str]] = {
    "cosine": ("<=>", "coalesce(1 - ({d}), 0)"), "l2": ("<->", "(-({d}))"), "inner_product": ("<#>", "(-({d}))"),
}


def like_prefix(text: str) -> str:
    """The ``LIKE`` pattern (``ESCAPE '\\'``) for strings that start with ``text``: ``\\``,
    ``%`` and ``_`` are escaped, so what a caller typed is never a wildcard."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _store_row(roots: Mapping[Scope, str], params: dict[str, Any]) -> sql.Composable:
    """SQL: ``m`` is a store item whose namespace starts where its row lives (the root of its
    level, then its scope id), so no metadata written through another door can claim a
    namespace of someone else's."""
    cases = []
    for scope, root in roots.items():
        params[f"sr_{scope.value}"] = root
        cases.append(f"WHEN '{scope.value}' THEN %(sr_{scope.value})s")
    return sql.SQL(
        f"COALESCE(m.key IS NOT NULL AND m.metadata ? '{STORE_FIELD}'"
        f" AND m.metadata->'{STORE_FIELD}'->>'ns' IS NOT NULL"
        f" AND m.metadata->'{STORE_FIELD}'->'ns'->>0 = (CASE m.scope {' '.join(cases)} END)"
        f" AND m.metadata->'{STORE_FIELD}'->'ns'->>1 = m.scope_id, false)"
    )


def namespace_expression(roots: Mapping[Scope, str], params: dict[str, Any]) -> sql.Composable:
    """SQL: the namespace of row ``m`` as a JSON array: a store item's own, any other memory's
    the root of its level and its scope id. Adds its parameters to ``params``."""
    store_row = _store_row(roots, params)
    return sql.SQL(
        f"(CASE WHEN {{store_row}} THEN m.metadata->'{STORE_FIELD}'->'ns'"
        " ELSE jsonb_build_array(CASE m.scope {cases} END, m.scope_id) END)"
    ).format(store_row=store_row, cases=sql.SQL(" ".join(
        f"WHEN '{scope.value}' THEN %(sr_{scope.value})s::text" for scope in roots)))


def value_expression(roots: Mapping[Scope, str], params: dict[str, Any]) -> sql.Composable:
    """SQL: the JSON value of row ``m``: a store item's own, any other memory's ``{"content": ...}``.
    Adds its parameters to ``params``."""
    return sql.SQL(
        f"(CASE WHEN {{store_row}} THEN m.metadata->'{STORE_FIELD}'->'value'"
        " ELSE jsonb_build_object('content', m.content) END)"
    ).format(store_row=_store_row(roots, params))


def store_filter(tree: Filter | None) -> Query:
    """SQL: the row's value (``v.value``, as :func:`search_store` names it) passes the parsed filter
    (:func:`agent_memory.store.values.check_filter`), as :func:`.filters.filter_sql` compiles it."""
    return filter_sql(tree, "v.value", prefix="sf")


def search_store(
    where: Query,
    *,
    roots: Mapping[Scope, str],
    key_prefix: str | None,
    plain_rows: bool,
    filters: Query,
    vector: Sequence[float] | None,
    limit: int,
    offset: int,
    distance: str = "cosine",
    space: str | None = None,
    own_vectors: bool = True,
) -> Query:
    """Rows of ``where`` in a namespace prefix that pass ``filters``, with their namespace, value
    and whether a read renews their TTL (``renewable``): by similarity to ``vector`` (``score``; rows put with ``index=False`` left out),
    or most recently updated first without one (``score`` NULL).

    ``key_prefix``: the text every store key under the prefix starts with (``None``: any store
    item of ``where``); ``plain_rows``: whether memories that are not store items (at their
    level's root namespace) are under the prefix too. ``space``: ``vector`` is of this embedder,
    and a row scores by its best field vector of that space (:mod:`.store_vectors`), else, with
    ``own_vectors`` (the space is the memory's own embedder), by the memory's vector; a row with
    neither comes after the scored ones with ``score`` NULL.
    """
    filt, params = where
    params = dict(params)
    store_row = _store_row(roots, params)
    in_prefix: sql.Composable = store_row
    if key_prefix is not None:
        params["ss_prefix"] = like_prefix(key_prefix)
        in_prefix = sql.SQL("({store_row} AND m.key LIKE %(ss_prefix)s ESCAPE '\\')").format(store_row=store_row)
    if plain_rows:
        in_prefix = sql.SQL("({in_prefix} OR NOT {store_row})").format(in_prefix=in_prefix, store_row=store_row)
    value_filter, filter_params = filters
    params.update(filter_params)
    namespace = namespace_expression(roots, params)
    value = value_expression(roots, params)
    if vector is None:
        score: sql.Composable = sql.SQL("NULL::float8")
        order = sql.SQL("m.updated_at DESC, m.id")
        searchable: sql.Composable = sql.SQL("TRUE")
    elif space is not None:
        own: sql.Composable = sql.SQL("NULL")
        if own_vectors:
            params["ss_vector"] = vector_literal(vector)
            own = sql.SQL(FIELD_DISTANCES[distance].format(e="m.embedding", q="%(ss_vector)s::vector"))
            own = sql.SQL("CASE WHEN m.embedding IS NOT NULL THEN {own} END").format(own=own)
        score = sql.SQL("COALESCE({fields}, {own})::float8").format(
            fields=field_score(distance, space, vector, params), own=own)
        # what has no vector of the space (put with index=False, or before the index was
        # configured) comes after the scored rows, unscored, as LangGraph's in-memory store fills a page
        order = sql.SQL("s.score DESC NULLS LAST, m.updated_at DESC, m.id")
        return _search(params, namespace, value, filt, in_prefix, value_filter, limit, offset, score, order,
                       sql.SQL("TRUE"))
    else:
        params["ss_vector"] = vector_literal(vector)
        operator, scored = STORE_DISTANCES[distance]
        score = sql.SQL(scored.format(d=f"m.embedding {operator} %(ss_vector)s::vector") + "::float8")
        order = sql.SQL(f"m.embedding {operator} %(ss_vector)s::vector, m.id")
        searchable = sql.SQL(f"COALESCE((m.metadata->'{STORE_FIELD}'->>'indexed')::boolean, true)")
    return _search(params, namespace, value, filt, in_prefix, value_filter, limit, offset, score, order, searchable)


def _search(params: dict[str, Any], namespace: sql.Composable, value: sql.Composable, filt: Any,
            in_prefix: sql.Composable, value_filter: Any, limit: int, offset: int, score: sql.Composable,
            order: sql.Composable, searchable: sql.Composable) -> Query:
    """The statement of :func:`search_store` from its parts."""
    params["ss_limit"], params["ss_offset"] = limit, offset
    return (
        sql.SQL(
            "SELECT m.id, m.key, m.scope, m.scope_id, m.created_at, m.updated_at, v.namespace, v.value,"
            f" m.expires_at IS NOT NULL AND jsonb_typeof(m.metadata->'{STORE_FIELD}'->'ttl') = 'number' AS renewable,"
            " s.score FROM memory_items m"
            " CROSS JOIN LATERAL (SELECT {namespace} AS namespace, {value} AS value) AS v"
            " CROSS JOIN LATERAL (SELECT {score} AS score) AS s"
            " WHERE {filt} AND {in_prefix} AND {value_filter} AND {searchable}"
            " ORDER BY {order} LIMIT %(ss_limit)s OFFSET %(ss_offset)s"
        ).format(namespace=namespace, value=value, score=score, filt=filt, in_prefix=in_prefix,
                 value_filter=value_filter, searchable=searchable, order=order),
        params,
    )


def list_store_namespaces(
    where: Query,
    *,
    roots: Mapping[Scope, str],
    prefix: Sequence[str] | None,
    suffix: Sequence[str] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> Query:
    """The distinct namespaces of the rows in ``where`` (store items' own, other memories' their
    level's root), each cut to ``max_depth`` segments, in tuple order (segments by code point).

    ``prefix`` / ``suffix``: the namespace starts / ends with these segments, compared whole
    (``"*"`` stands for any one segment)."""
    filt, params = where
    params = dict(params)
    namespace = namespace_expression(roots, params)
    clauses: list[sql.Composable] = []
    for name, path in (("prefix", prefix), ("suffix", suffix)):
        if not path:
            continue
        params[f"ln_{name}_n"] = len(path)
        clauses.append(sql.SQL(f"jsonb_array_length(ns) >= %(ln_{name}_n)s"))
        for i, segment in enumerate(path):
            if segment == "*":
                continue
            index = i if name == "prefix" else i - len(path)  # -1 is the last segment
            params[f"ln_{name}_{i}"] = segment
            clauses.append(sql.SQL(f"ns ->> {index} = %(ln_{name}_{i})s"))
    matches = sql.SQL(" AND ").join(clauses) if clauses else sql.SQL("TRUE")
    cut: sql.Composable = sql.SQL("ns")
    if max_depth is not None:
        params["ln_depth"] = max_depth
        cut = sql.SQL(
            "(SELECT jsonb_agg(e ORDER BY o) FROM jsonb_array_elements(ns) WITH ORDINALITY AS s(e, o)"
            " WHERE o <= %(ln_depth)s)"
        )
    params["ln_limit"], params["ln_offset"] = limit, offset
    return (
        sql.SQL(
            "SELECT ns FROM (SELECT DISTINCT {cut} AS ns FROM"
            " (SELECT {namespace} AS ns FROM memory_items m WHERE {filt}) AS rows WHERE {matches}) AS found"
            " ORDER BY (SELECT array_agg(e COLLATE \"C\" ORDER BY o)"
            " FROM jsonb_array_elements_text(ns) WITH ORDINALITY AS s(e, o))"
            " LIMIT %(ln_limit)s OFFSET %(ln_offset)s"
        ).format(cut=cut, namespace=namespace, filt=filt, matches=matches),
        params,
    )


def refresh_store_expiry(ids: Sequence[Any]) -> Query:
    """Start the TTL of store items again (a read with ``refresh_on_read``): each of ``ids``
    that has a TTL expires that many minutes from now.

    A read must never fail or wait because it renews: rows are locked in id order, and a row
    another transaction holds is skipped (``SKIP LOCKED``: a reader holding it is renewing it
    now, a writer is about to write it, which renews it too). Locked in the order each search
    found them, two searches over the same items deadlocked (issue 28)."""
    return (
        sql.SQL(
            "UPDATE memory_items SET expires_at = now() + make_interval(secs =>"
            f" (metadata->'{STORE_FIELD}'->>'ttl')::float8 * 60)"
            " FROM (SELECT id AS free_id FROM memory_items WHERE id = ANY(%(ids)s) AND expires_at IS NOT NULL"
            f" AND jsonb_typeof(metadata->'{STORE_FIELD}'->'ttl') = 'number'"
            " ORDER BY id FOR NO KEY UPDATE SKIP LOCKED) AS free WHERE id = free_id"
        ),
        {"ids": list(ids)},
    )


def renewal_savepoint(action: str) -> tuple[sql.Composable, None]:
    """``SAVEPOINT`` / ``RELEASE SAVEPOINT`` / ``ROLLBACK TO SAVEPOINT`` (``action``: ``"set"``,
    ``"release"``, ``"undo"``) around a renewal, so a renewal that fails undoes only itself and
    the batch's transaction goes on."""
    verb = {"set": "SAVEPOINT", "release": "RELEASE SAVEPOINT", "undo": "ROLLBACK TO SAVEPOINT"}[action]
    return sql.SQL(verb + " store_renewal"), None


def op_savepoint(action: str) -> tuple[sql.Composable, None]:
    """``SAVEPOINT`` / ``RELEASE SAVEPOINT`` / ``ROLLBACK TO SAVEPOINT`` (``action``: ``"set"``,
    ``"release"``, ``"undo"``) around one op of a batch that gathers the calls of many callers
    into one transaction: an op that fails undoes only its own writes, and the others go on."""
    verb = {"set": "SAVEPOINT", "release": "RELEASE SAVEPOINT", "undo": "ROLLBACK TO SAVEPOINT"}[action]
    return sql.SQL(verb + " store_op"), None


def readable_projects(user_id: str) -> Query:
    """The ids of the projects ``user_id`` reads something of (``project_id``): those
    they are a member of and those shared with them (or a team or org of theirs). A listing of
    ``("projects", "*")`` reads each of them under the tenancy rule with that project named."""
    return (
        sql.SQL(
            "SELECT mm.scope_id AS project_id FROM memory_members mm WHERE mm.kind = 'project'"
            " AND mm.user_id = %(rp_user)s UNION SELECT ps.project_id FROM memory_project_shares ps"
            " WHERE " + granted_to("%(rp_user)s")
        ),
        {"rp_user": user_id},
    )


def listed_with(listing: Query, projects: Query) -> Query:
    """The rows of :func:`list_store_namespaces` (``ns``; ``project_id`` NULL), then those of
    :func:`readable_projects` (``project_id``; ``ns`` NULL): one round trip where a listing of
    every project needs both. The caller orders the namespaces itself."""
    (listed, listed_params), (found, found_params) = listing, projects
    return (
        sql.SQL("SELECT ns, NULL::text AS project_id FROM ({listed}) AS listed"
                " UNION ALL SELECT NULL::jsonb, project_id FROM ({found}) AS readable").format(
                    listed=listed, found=found),
        {**listed_params, **found_params},
    )
