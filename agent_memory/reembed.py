"""Re-embedding every memory with another embedding model (``agent-memory reembed``).

The vector column is sized for one model (``vector(N)``, recorded in ``agent_memory_meta``),
so a service configured with a model of another size is refused at startup. This is the
way forward: the new model's vectors are made in batches into the side table
``memory_reembed`` (migration ``0009_reembed_staging``) while the database keeps serving
the old ones, each batch its own transaction, so an interrupted run resumes where it
stopped. At the end one transaction, holding off writers, embeds whatever changed
meanwhile, puts the new vectors in ``memory_items.embedding`` with its new size, and
records the new model and dimension, so the database never holds a mix of two models.

A staged vector remembers the md5 of the wording it was made from: a memory edited
during the run is embedded again, and a memory deleted takes its staged vector with it.
Running against another target model than an interrupted run starts over.

Written once as an op (:mod:`agent_memory.db.requests`), driven by :func:`reembed`
(blocking) or :func:`areembed` (asyncio).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .db.connection import AsyncConn, Conn
from .db.migrations import MIGRATION_LOCK_KEY, MIGRATIONS, SEARCH_INDEX_NAME, apply_migrations, search_index
from .db.requests import Commit, Embed, Op, Sql, arun, run
from .embeddings import embedding_dimensions, embedding_model_name
from .errors import EmbeddingError, InvalidInputError
from .queries import vector_literal

__all__ = ["DEFAULT_BATCH_SIZE", "Progress", "ReembedReport", "areembed", "reembed", "reembed_op"]

DEFAULT_BATCH_SIZE = 128
_TARGET_KEY = "reembed_target"

#: called with (memories embedded so far, memories in all) after each batch
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ReembedReport:
    """What a re-embed run did. ``switched`` is False when the database already used the model
    (nothing to do, unless forced); ``embedded`` counts the vectors this run made (a resumed run
    makes only the missing ones)."""

    model: str
    dimensions: int
    previous_model: str | None
    previous_dimensions: int
    total: int
    embedded: int
    resumed: int
    switched: bool


# --- SQL (pure) --------------------------------------------------------------------------------

_LOCK = Sql("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,), fetch="none")
_META = Sql("SELECT key, value FROM agent_memory_meta")
_COUNTS = Sql(
    "SELECT (SELECT count(*) FROM memory_items) AS total,"
    " (SELECT count(*) FROM memory_reembed r JOIN memory_items m ON m.id = r.id"
    "  WHERE r.content_md5 = md5(m.content)) AS done",
    fetch="one",
)


def _set_meta(key: str, value: str) -> Sql:
    return Sql("INSERT INTO agent_memory_meta (key, value) VALUES (%s, %s)"
               " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value), fetch="none")


def _pending(limit: int | None) -> Sql:
    """Memories with no staged vector for their current wording, in id order."""
    query = ("SELECT m.id, m.content FROM memory_items m LEFT JOIN memory_reembed r ON r.id = m.id"
             " WHERE r.id IS NULL OR r.content_md5 <> md5(m.content) ORDER BY m.id")
    if limit is None:
        return Sql(query)
    return Sql(query + " LIMIT %s", (limit,))


def _stage(rows: Sequence[dict[str, Any]], vectors: Sequence[Sequence[float]]) -> Sql:
    """Stage one vector per memory, for the wording it was made from; memories deleted
    meanwhile are skipped (the join), vectors of an older wording replaced."""
    payload = [{"id": str(r["id"]), "content": r["content"], "embedding": vector_literal(v)}
               for r, v in zip(rows, vectors, strict=True)]
    return Sql(
        "INSERT INTO memory_reembed (id, content_md5, embedding)"
        " SELECT m.id, md5(p.content), p.embedding::vector"
        " FROM jsonb_to_recordset(%s) AS p(id uuid, content text, embedding text)"
        " JOIN memory_items m ON m.id = p.id"
        " ON CONFLICT (id) DO UPDATE SET content_md5 = EXCLUDED.content_md5, embedding = EXCLUDED.embedding",
        (Jsonb(payload),), fetch="rowcount",
    )


#: indexes that use the vector column; dropped before its type changes and made again after
_VECTOR_INDEXES = Sql(
    "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i"
    " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'memory_items'::regclass"
    " AND pg_get_indexdef(i.indexrelid) LIKE '%%embedding%%'"
)


def swap_statements(dimensions: int, indexes: Sequence[dict[str, str]]) -> list[Sql]:
    """The switch: unsize the column, copy the staged vectors in, size it again, rebuild the
    indexes on it. Every memory has a staged vector when these run.

    The ``halfvec`` copy the search index reads is generated from the column, so it is dropped
    first and generated again after; the search index is made for the new size (it carries
    the vector only up to :data:`SEARCH_INDEX_MAX_DIMENSIONS`)."""
    dims = sql.Literal(int(dimensions))
    indexes = [ix for ix in indexes if ix["name"] != SEARCH_INDEX_NAME]
    statements = [Sql(sql.SQL("DROP INDEX {}").format(sql.Identifier(ix["name"])), fetch="none") for ix in indexes]
    statements += [
        Sql(f"DROP INDEX IF EXISTS {SEARCH_INDEX_NAME}", fetch="none"),
        Sql("ALTER TABLE memory_items DROP COLUMN embedding_half", fetch="none"),
        Sql("ALTER TABLE memory_items ALTER COLUMN embedding TYPE vector USING embedding::vector", fetch="none"),
        Sql("UPDATE memory_items m SET embedding = r.embedding FROM memory_reembed r WHERE r.id = m.id",
            fetch="none"),
        Sql(sql.SQL("ALTER TABLE memory_items ALTER COLUMN embedding TYPE vector({d}) USING embedding::vector({d})")
            .format(d=dims), fetch="none"),
        Sql("ALTER TABLE memory_items ADD COLUMN embedding_half halfvec"
            " GENERATED ALWAYS AS (embedding::halfvec) STORED", fetch="none"),
    ]
    statements += [Sql(ix["definition"], fetch="none") for ix in indexes]
    statements.append(Sql(search_index(dimensions), fetch="none"))
    return statements


# --- the op ------------------------------------------------------------------------------------


def _check_vectors(vectors: Any, count: int, dimensions: int, model: str) -> list[Sequence[float]]:
    vectors = list(vectors)
    if len(vectors) != count or any(len(v) != dimensions for v in vectors):
        raise EmbeddingError(
            f"{model} returned {len(vectors)} vectors for {count} texts, not all {dimensions}-dimensional; "
            "check the embedding model's configuration (MEMORY_EMBEDDINGS, MEMORY_EMBEDDING_MODEL)"
        )
    return vectors


def _embed_pending(rows: Sequence[dict[str, Any]], dimensions: int, model: str) -> Op[int]:
    vectors = yield Embed(tuple(r["content"] for r in rows))
    return (yield _stage(rows, _check_vectors(vectors, len(rows), dimensions, model)))


def reembed_op(model: str, dimensions: int, *, batch_size: int = DEFAULT_BATCH_SIZE, force: bool = False,
               progress: Progress | None = None) -> Op[ReembedReport]:
    """Bring the schema up to date, stage the model's vectors batch by batch (resuming a run
    for the same model), then switch in one transaction. ``progress`` is told after each batch."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 10_000:
        raise InvalidInputError("batch_size", f"must be a whole number from 1 to 10000, got {batch_size!r}")
    yield from apply_migrations(MIGRATIONS, dimensions)

    target = json.dumps({"model": model, "dimensions": dimensions})
    yield _LOCK
    meta = {r["key"]: r["value"] for r in (yield _META)}
    previous_model, previous_dims = meta.get("embedding_model"), int(meta["embedding_dimensions"])
    if meta.get(_TARGET_KEY) != target:  # another model's run was interrupted: its vectors are no use
        yield Sql("DELETE FROM memory_reembed", fetch="none")
        yield _set_meta(_TARGET_KEY, target)
    counts = yield _COUNTS
    total, resumed = int(counts["total"]), int(counts["done"])
    if not force and (previous_model, previous_dims) == (model, dimensions) and resumed == 0:
        yield Sql("DELETE FROM agent_memory_meta WHERE key = %s", (_TARGET_KEY,), fetch="none")
        return ReembedReport(model, dimensions, previous_model, previous_dims, total, 0, 0, switched=False)
    yield Commit()

    done, embedded = resumed, 0
    if progress is not None:
        progress(done, total)
    while True:
        rows = yield _pending(batch_size)
        yield Commit()  # no connection is held while the model embeds
        if not rows:
            break
        embedded += len(rows)
        done = min(total, done + (yield from _embed_pending(rows, dimensions, model)))
        yield Commit()
        if progress is not None:
            progress(done, total)

    # the switch: writers wait (readers don't) while the last changes are embedded and swapped in
    yield _LOCK
    yield Sql("LOCK TABLE memory_items IN SHARE ROW EXCLUSIVE MODE", fetch="none")
    late = yield _pending(None)
    if late:
        embedded += len(late)
        yield from _embed_pending(late, dimensions, model)
    total = int((yield _COUNTS)["total"])
    indexes = yield _VECTOR_INDEXES
    for statement in swap_statements(dimensions, indexes):
        yield statement
    yield _set_meta("embedding_dimensions", str(dimensions))
    yield _set_meta("embedding_model", model)
    yield Sql("DELETE FROM agent_memory_meta WHERE key = %s", (_TARGET_KEY,), fetch="none")
    yield Sql("DELETE FROM memory_reembed", fetch="none")
    if progress is not None:
        progress(total, total)
    return ReembedReport(model, dimensions, previous_model, previous_dims, total, embedded, resumed, switched=True)


# --- drivers -----------------------------------------------------------------------------------


def reembed(conn: Conn, embeddings: Any, *, batch_size: int = DEFAULT_BATCH_SIZE, force: bool = False,
            progress: Progress | None = None) -> ReembedReport:
    """Re-embed every memory in the database behind ``conn`` (a connection or pool) with
    ``embeddings`` and make it the database's model. Safe to interrupt and run again."""
    op = reembed_op(embedding_model_name(embeddings), embedding_dimensions(embeddings), batch_size=batch_size,
                    force=force, progress=progress)
    return run(op, conn, embeddings)


async def areembed(conn: AsyncConn, embeddings: Any, *, batch_size: int = DEFAULT_BATCH_SIZE, force: bool = False,
                   progress: Progress | None = None) -> ReembedReport:
    """The asyncio twin of :func:`reembed`."""
    dimensions = await asyncio.to_thread(embedding_dimensions, embeddings)  # may ask the model once
    op = reembed_op(embedding_model_name(embeddings), dimensions, batch_size=batch_size, force=force,
                    progress=progress)
    return await arun(op, conn, embeddings)
