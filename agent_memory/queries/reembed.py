"""Re-embedding: staging the next model's vectors in ``memory_reembed`` and switching them in.

The target model is recorded in ``agent_memory_meta``; the switch changes the size of the
vector column, so it drops and makes again every index on it (definitions passed in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .items import vector_literal
from .types import Statement

__all__ = [
    "clear_staged_vectors",
    "count_staged",
    "delete_meta",
    "hold_off_writers",
    "items_without_vectors",
    "pending_passages",
    "pending_reembed",
    "select_meta",
    "set_item_vectors",
    "set_meta",
    "set_passage_vectors",
    "stage_vectors",
    "swap_statements",
    "vector_indexes",
]


def select_meta() -> Statement:
    """What the database records about itself (``key``, ``value``): the embedding model and size."""
    return "SELECT key, value FROM agent_memory_meta", None


def set_meta(key: str, value: str) -> Statement:
    return ("INSERT INTO agent_memory_meta (key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value))


def delete_meta(key: str) -> Statement:
    return "DELETE FROM agent_memory_meta WHERE key = %s", (key,)


def count_staged() -> Statement:
    """Memories in all (``total``), and those with a staged vector of their current wording (``done``)."""
    return (
        "SELECT (SELECT count(*) FROM memory_items) AS total,"
        " (SELECT count(*) FROM memory_reembed r JOIN memory_items m ON m.scope_id = r.scope_id AND m.id = r.id"
        "  WHERE r.content_md5 = md5(m.content)) AS done",
        None,
    )


def pending_reembed(limit: int | None) -> Statement:
    """Memories with no staged vector for their current wording, in id order (all, or ``limit``)."""
    query = ("SELECT m.id, m.content, m.context FROM memory_items m LEFT JOIN memory_reembed r"
             " ON r.scope_id = m.scope_id AND r.id = m.id"
             " WHERE r.id IS NULL OR r.content_md5 <> md5(m.content) ORDER BY m.id")
    if limit is None:
        return query, None
    return query + " LIMIT %s", (limit,)


def stage_vectors(rows: Sequence[Mapping[str, Any]], vectors: Sequence[Sequence[float]],
                  context_vectors: Sequence[Sequence[float] | None] | None = None) -> Statement:
    """Stage one vector per memory, for the wording it was made from, and its context's vector
    (``context_vectors``, None where it has no context); memories deleted meanwhile are skipped
    (the join), vectors of an older wording replaced."""
    contexts = context_vectors if context_vectors is not None else [None] * len(rows)
    payload = [{"id": str(r["id"]), "content": r["content"], "embedding": vector_literal(v),
                "context_embedding": None if c is None else vector_literal(c)}
               for r, v, c in zip(rows, vectors, contexts, strict=True)]
    return (
        "INSERT INTO memory_reembed (scope_id, id, content_md5, embedding, context_embedding)"
        " SELECT m.scope_id, m.id, md5(p.content), p.embedding::vector, p.context_embedding::vector"
        " FROM jsonb_to_recordset(%s) AS p(id uuid, content text, embedding text, context_embedding text)"
        " JOIN memory_items m ON m.id = p.id"
        " ON CONFLICT (scope_id, id) DO UPDATE SET content_md5 = EXCLUDED.content_md5, embedding = EXCLUDED.embedding,"
        " context_embedding = EXCLUDED.context_embedding",
        (Jsonb(payload),),
    )


def clear_staged_vectors() -> Statement:
    return "DELETE FROM memory_reembed", None


def hold_off_writers() -> Statement:
    """Until the transaction ends, writers of memory items wait; readers don't."""
    return "LOCK TABLE memory_items IN SHARE ROW EXCLUSIVE MODE", None


def vector_indexes() -> Statement:
    """The indexes that use the vector column (``name``, ``definition``)."""
    return (
        "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'memory_items'::regclass"
        " AND pg_get_indexdef(i.indexrelid) LIKE '%%embedding%%'",
        None,
    )


def swap_statements(dimensions: int, indexes: Sequence[Mapping[str, str]], *, search_index_name: str,
                    search_index: str) -> list[Statement]:
    """The switch: unsize the column, copy the staged vectors in, size it again, rebuild the
    indexes on it. Every memory has a staged vector when these run.

    The ``halfvec`` copy the search index reads is generated from the column, so it is dropped
    first and generated again after; the search index (``search_index_name``) is made by the
    statement ``search_index``, for the new size."""
    dims = sql.Literal(int(dimensions))
    indexes = [ix for ix in indexes if ix["name"] != search_index_name]
    statements: list[Statement] = [(sql.SQL("DROP INDEX {}").format(sql.Identifier(ix["name"])), None)
                                   for ix in indexes]
    statements += [
        (sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(search_index_name)), None),
        ("ALTER TABLE memory_items DROP COLUMN embedding_half", None),
        ("ALTER TABLE memory_items DROP COLUMN context_half", None),
        ("ALTER TABLE memory_items ALTER COLUMN embedding TYPE vector USING embedding::vector", None),
        ("ALTER TABLE memory_items ALTER COLUMN context_embedding TYPE vector USING context_embedding::vector", None),
        # (stamped: a process's copy of a big scope's vectors takes the new ones; migration 0016)
        ("UPDATE memory_items m SET embedding = r.embedding, context_embedding = r.context_embedding,"
         " changed_xid = pg_current_xact_id() FROM memory_reembed r WHERE r.scope_id = m.scope_id AND r.id = m.id",
         None),
        # earlier wordings' vectors are the old model's: a search of the past falls back to the new one
        ("UPDATE memory_item_history SET embedding = NULL WHERE embedding IS NOT NULL", None),
        # documents' passages: emptied here, embedded again right after the switch (pending_passages)
        (sql.SQL("ALTER TABLE memory_passages ALTER COLUMN embedding TYPE vector({d}) USING NULL").format(d=dims),
         None),
        # the knowledge graph's node and storyline vectors (of description and notes): emptied here and
        # marked for the next maintain(), which describes and embeds them again with the new model
        # (until then explore scores them by text, recency and salience; migrations 0021, 0024)
        (sql.SQL("ALTER TABLE graph_nodes ALTER COLUMN embedding TYPE vector({d}) USING NULL").format(d=dims), None),
        ("UPDATE graph_nodes SET is_dirty = true WHERE NOT is_owner AND NOT is_dirty", None),
        (sql.SQL("ALTER TABLE graph_storylines ALTER COLUMN embedding TYPE vector({d}) USING NULL").format(d=dims),
         None),
        ("UPDATE graph_storylines SET is_dirty = true WHERE NOT is_dirty", None),
        (sql.SQL("ALTER TABLE memory_items ALTER COLUMN embedding TYPE vector({d}) USING embedding::vector({d})")
         .format(d=dims), None),
        (sql.SQL("ALTER TABLE memory_items ALTER COLUMN context_embedding TYPE vector({d})"
                 " USING context_embedding::vector({d})").format(d=dims), None),
        ("ALTER TABLE memory_items ADD COLUMN embedding_half halfvec GENERATED ALWAYS AS (embedding::halfvec) STORED",
         None),
        ("ALTER TABLE memory_items ADD COLUMN context_half halfvec"
         " GENERATED ALWAYS AS (context_embedding::halfvec) STORED", None),
    ]
    statements += [(ix["definition"], None) for ix in indexes]
    statements.append((search_index, None))
    return statements


def pending_passages(limit: int) -> Statement:
    """Passages of documents with no vector (a re-embedding's switch emptied them), in id order."""
    return ("SELECT id, headings, content FROM memory_passages WHERE embedding IS NULL ORDER BY id LIMIT %s", (limit,))


def items_without_vectors(limit: int) -> Statement:
    """Memories with no vector (saved by a LangGraph store without an index, migration
    ``0020``), in id order."""
    return ("SELECT id, content FROM memory_items WHERE embedding IS NULL ORDER BY id LIMIT %s", (limit,))


def set_item_vectors(rows: Sequence[Mapping[str, Any]], vectors: Sequence[Sequence[float]]) -> Statement:
    """Give each memory of ``rows`` the vector of the wording it was read with (a memory deleted,
    embedded or reworded meanwhile is skipped); stamped, as every change of a vector is (0016)."""
    return ("UPDATE memory_items m SET embedding = v.e::vector, changed_xid = pg_current_xact_id()"
            " FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS v(id, e, c)"
            " WHERE m.id = v.id AND m.embedding IS NULL AND m.content = v.c",
            ([r["id"] for r in rows], [vector_literal(v) for v in vectors], [r["content"] for r in rows]))


def set_passage_vectors(rows: Sequence[Mapping[str, Any]], vectors: Sequence[Sequence[float]]) -> Statement:
    """Give each passage of ``rows`` its vector (one statement; a passage deleted meanwhile is skipped)."""
    return ("UPDATE memory_passages p SET embedding = v.e::vector FROM unnest(%s::uuid[], %s::text[]) AS v(id, e)"
            " WHERE p.id = v.id AND p.embedding IS NULL",
            ([r["id"] for r in rows], [vector_literal(v) for v in vectors]))
