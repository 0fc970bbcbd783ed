"""Document passages (``memory_passages``): a document cut into embedded, searchable spans, and
the memories made from them.

A passage is read through its resource (:func:`.resources.resource_filter`), so whoever may
read a document may search its passages, and nobody else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..models import Identity
from .items import vector_literal
from .resources import resource_filter
from .types import Query, Statement

__all__ = [
    "delete_passages",
    "insert_passages",
    "mark_passages_extracted",
    "move_passages",
    "place_document_memories",
    "repoint_document_memories",
    "retire_document_memories",
    "search_passages",
    "select_passages",
]

#: ``ts_rank_cd`` at which keyword evidence counts half (it saturates towards 1 above)
_KEYWORD_HALF = 0.1


def select_passages(resource_id: Any) -> Statement:
    """The passages of a resource as stored (no vectors), in document order."""
    return (
        "SELECT id, position, char_start, char_end, headings, content_hash, extracted_at IS NOT NULL AS extracted"
        " FROM memory_passages WHERE resource_id = %s ORDER BY position",
        (resource_id,),
    )


def insert_passages(rows: Sequence[Mapping[str, Any]], vectors: Sequence[Sequence[float]]) -> Statement:
    """Write new passages (each row: ``id``, ``resource_id``, ``user_id``, ``scope``, ``scope_id``,
    ``position``, ``char_start``, ``char_end``, ``headings``, ``content``, ``content_hash``), one
    vector each, in one statement."""
    payload = [{**{k: (str(v) if k in ("id", "resource_id") else v) for k, v in r.items()},
                "embedding": vector_literal(vec)} for r, vec in zip(rows, vectors, strict=True)]
    return (
        "INSERT INTO memory_passages (id, resource_id, user_id, scope, scope_id, position, char_start, char_end,"
        " headings, content, content_hash, embedding)"
        " SELECT p.id, p.resource_id, p.user_id, p.scope, p.scope_id, p.position, p.char_start, p.char_end,"
        " ARRAY(SELECT jsonb_array_elements_text(p.headings)), p.content, p.content_hash, p.embedding::vector"
        " FROM jsonb_to_recordset(%s) AS p(id uuid, resource_id uuid, user_id text, scope text, scope_id text,"
        " position integer, char_start integer, char_end integer, headings jsonb, content text,"
        " content_hash text, embedding text)",
        (Jsonb(payload),),
    )


def move_passages(moves: Sequence[Mapping[str, Any]]) -> Statement:
    """Kept passages at their new place in the new version of the document (each move: ``id``,
    ``position``, ``char_start``, ``char_end``)."""
    payload = [{**m, "id": str(m["id"])} for m in moves]
    return (
        "UPDATE memory_passages p SET position = m.position, char_start = m.char_start, char_end = m.char_end,"
        " updated_at = now() FROM jsonb_to_recordset(%s) AS m(id uuid, position integer, char_start integer,"
        " char_end integer) WHERE p.id = m.id",
        (Jsonb(payload),),
    )


def delete_passages(ids: Sequence[Any]) -> Statement:
    """Passages no longer in their document."""
    return "DELETE FROM memory_passages WHERE id = ANY(%s)", (list(ids),)


def mark_passages_extracted(ids: Sequence[Any]) -> Statement:
    """Passages extraction has read: a later version of the document that keeps them does not read them again."""
    return "UPDATE memory_passages SET extracted_at = now() WHERE id = ANY(%s)", (list(ids),)


def repoint_document_memories(moves: Sequence[Mapping[str, Any]]) -> Statement:
    """Memories of a document that a passage of its new version says again: their ``passage``
    metadata names that passage (each move: ``id`` of the memory, ``passage`` as a JSON object)."""
    payload = [{"id": str(m["id"]), "passage": m["passage"]} for m in moves]
    return (
        "UPDATE memory_items i SET metadata = jsonb_set(i.metadata, '{passage}', m.passage)"
        " FROM jsonb_to_recordset(%s) AS m(id uuid, passage jsonb) WHERE i.id = m.id",
        (Jsonb(payload),),
    )


def place_document_memories(user_id: str, resource_id: Any, places: Sequence[Mapping[str, Any]]) -> Statement:
    """The active memories ``user_id`` made from a resource follow their passage to its place in
    the new version (each place: the passage's ``hash`` and its ``passage`` JSON object)."""
    payload = [{"hash": p["hash"], "passage": p["passage"]} for p in places]
    return (
        "UPDATE memory_items i SET metadata = jsonb_set(i.metadata, '{passage}', m.passage)"
        " FROM jsonb_to_recordset(%(places)s) AS m(hash text, passage jsonb)"
        " WHERE i.user_id = %(u)s AND i.source_id = %(rid)s AND i.status = 'active'"
        " AND i.metadata->'passage'->>'hash' = m.hash AND i.metadata->'passage' IS DISTINCT FROM m.passage",
        {"u": user_id, "rid": str(resource_id), "places": Jsonb(payload)},
    )


def retire_document_memories(user_id: str, resource_id: Any, live_hashes: Sequence[str], reason: str) -> Statement:
    """The active memories ``user_id`` made from a resource whose passage (``metadata.passage.hash``)
    is no longer in it: superseded from now (with nothing replacing them), ``reason`` kept in
    their ``metadata.retired``; answers their ids."""
    return (
        "UPDATE memory_items SET status = 'superseded', valid_to = now(), updated_at = now(),"
        " metadata = metadata || jsonb_build_object('retired', jsonb_build_object('reason', %(reason)s::text,"
        " 'at', now()))"
        " WHERE user_id = %(u)s AND source_id = %(rid)s AND status = 'active' AND metadata ? 'passage'"
        " AND NOT (coalesce(metadata->'passage'->>'hash', '') = ANY(%(live)s)) RETURNING id",
        {"u": user_id, "rid": str(resource_id), "live": list(live_hashes), "reason": reason},
    )


def search_passages(identity: Identity, *, query_vector: Sequence[float], query_text: str, k: int,
                    keyword_weight: float, kind: str | None = None) -> Query:
    """The ``k`` passages the caller may read that best match the query, exactly (every readable
    passage is scored): ``(1 - keyword_weight) * cosine + keyword_weight * kw / (kw + half)``,
    with ``kw`` the passage's ``ts_rank_cd`` for any of the query's words. A passage whose vector
    is of another size than the query's (a re-embedding switched models) is found by its words only."""
    filt, params = resource_filter(identity)
    if kind is not None:
        filt = filt + sql.SQL(" AND r.kind = %(r_kind)s")
        params["r_kind"] = kind
    query = sql.SQL(
        "WITH q AS MATERIALIZED (SELECT %(q_vec)s::vector AS v,"
        " replace(plainto_tsquery('english', %(q_text)s)::text, ' & ', ' | ')::tsquery AS tsq),"
        " scored AS (SELECT p.id, p.resource_id, r.kind, r.title, r.external_id, p.position, p.char_start,"
        " p.char_end, p.headings, p.content,"
        " CASE WHEN vector_dims(p.embedding) = vector_dims(q.v) THEN 1 - (p.embedding <=> q.v) ELSE 0 END"
        " AS similarity,"
        " ts_rank_cd(p.content_tsv, q.tsq) AS keyword"
        " FROM memory_passages p JOIN memory_resources r ON r.scope_id = p.scope_id AND r.id = p.resource_id"
        " CROSS JOIN q WHERE {filt})"
        " SELECT *, (1 - %(q_kw)s) * similarity + %(q_kw)s * keyword / (keyword + %(q_half)s) AS score"
        " FROM scored ORDER BY score DESC, resource_id, position LIMIT %(q_k)s"
    ).format(filt=filt)
    return query, dict(params, q_vec=vector_literal(query_vector), q_text=query_text, q_kw=float(keyword_weight),
                       q_half=_KEYWORD_HALF, q_k=k)
