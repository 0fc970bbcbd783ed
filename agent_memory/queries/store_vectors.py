"""The statements of a LangGraph store's per-field vectors (``store_vectors``, migration 0025).

A store built with an index config embeds each indexed field path of a value on its own, as
LangGraph's stores do; the vectors live beside the memory (which keeps its own vector of its
content for ``memory_search``). ``space`` names the embedder that made a vector: a query is only
ever compared with vectors of its own space and size. Pure builders, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from .items import vector_literal
from .types import Query

__all__ = ["FIELD_DISTANCES", "delete_store_vectors", "field_score", "insert_store_vectors"]

#: a store's ``distance_type`` as LangGraph defines it: the score of one vector ``{e}`` against
#: the query ``{q}``, higher is closer: cosine ``1 - d``, l2 ``-d``, inner product the product
#: (pgvector's ``<#>`` is the negated product)
FIELD_DISTANCES: dict[str, str] = {
    "cosine": "1 - ({e} <=> {q})", "l2": "-({e} <-> {q})", "inner_product": "-({e} <#> {q})",
}


def delete_store_vectors(memory_id: Any) -> Query:
    """Remove the field vectors of one memory (a put replaces them; a delete drops them)."""
    return sql.SQL("DELETE FROM store_vectors WHERE memory_id = %(sv_id)s"), {"sv_id": memory_id}


def insert_store_vectors(scope: str, scope_id: str, memory_id: Any, user_id: str, space: str,
                         fields: Sequence[tuple[str, Sequence[float]]]) -> Query:
    """One row per ``(path, vector)`` of ``fields`` for the memory ``memory_id``, in order."""
    params: dict[str, Any] = {"sv_scope": scope, "sv_scope_id": scope_id, "sv_id": memory_id, "sv_user": user_id,
                              "sv_space": space, "sv_paths": [path for path, _ in fields],
                              "sv_vectors": [vector_literal(v) for _, v in fields]}
    return (
        sql.SQL(
            "INSERT INTO store_vectors (scope, scope_id, memory_id, ord, user_id, space, path, embedding)"
            " SELECT %(sv_scope)s, %(sv_scope_id)s, %(sv_id)s, f.ord, %(sv_user)s, %(sv_space)s, f.path,"
            " f.embedding::vector FROM unnest(%(sv_paths)s::text[], %(sv_vectors)s::text[])"
            " WITH ORDINALITY AS f(path, embedding, ord)"
        ),
        params,
    )


def field_score(distance: str, space: str, vector: Sequence[float], params: dict[str, Any]) -> sql.Composable:
    """SQL: the best score of row ``m``'s field vectors of ``space`` against ``vector`` (NULL
    when it has none: it was saved without them). Adds its parameters to ``params``."""
    params["fv_space"], params["fv_dims"], params["fv_query"] = space, len(vector), vector_literal(vector)
    scored = FIELD_DISTANCES[distance].format(e="sv.embedding", q="%(fv_query)s::vector")
    return sql.SQL(
        f"(SELECT max({scored}) FROM store_vectors sv WHERE sv.scope = m.scope AND sv.scope_id = m.scope_id"
        " AND sv.memory_id = m.id AND sv.space = %(fv_space)s AND vector_dims(sv.embedding) = %(fv_dims)s)"
    )
