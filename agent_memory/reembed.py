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

from . import queries
from .db.connection import AsyncConn, Conn
from .db.migrations import MIGRATION_LOCK_KEY, MIGRATIONS, SEARCH_INDEX_NAME, apply_migrations, search_index
from .db.requests import Commit, Embed, Op, Sql, arun, run
from .documents.chunks import embedding_text
from .embeddings import embedding_dimensions, embedding_model_name
from .errors import EmbeddingError, InvalidInputError

__all__ = ["DEFAULT_BATCH_SIZE", "Progress", "ReembedReport", "areembed", "reembed", "reembed_op"]

DEFAULT_BATCH_SIZE = 128
_TARGET_KEY = "reembed_target"

#: called with (memories embedded so far, memories in all) after each batch
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ReembedReport:
    """What a re-embed run did. ``switched`` is False when the database already used the model
    (nothing to do, unless forced); ``embedded`` counts the vectors this run made (a resumed run
    makes only the missing ones); ``passages``: documents' passages embedded again after the switch."""

    model: str
    dimensions: int
    previous_model: str | None
    previous_dimensions: int
    total: int
    embedded: int
    resumed: int
    switched: bool
    passages: int = 0


# --- the statements (built in agent_memory.queries.reembed) ----------------------------------

_LOCK = Sql(*queries.advisory_xact_lock(MIGRATION_LOCK_KEY), fetch="none")  # the migrations' lock
_META = Sql(*queries.select_meta())
_COUNTS = Sql(*queries.count_staged(), fetch="one")


def _set_meta(key: str, value: str) -> Sql:
    return Sql(*queries.set_meta(key, value), fetch="none")


def _pending(limit: int | None) -> Sql:
    """Memories with no staged vector for their current wording, in id order."""
    return Sql(*queries.pending_reembed(limit))


def swap_statements(dimensions: int, indexes: Sequence[dict[str, str]]) -> list[Sql]:
    """The switch (see :func:`agent_memory.queries.swap_statements`), the search index made for
    the new size (it carries the vector only up to :data:`SEARCH_INDEX_MAX_DIMENSIONS`)."""
    return [Sql(*statement, fetch="none") for statement in queries.swap_statements(
        dimensions, indexes, search_index_name=SEARCH_INDEX_NAME,
        search_index=search_index(dimensions, context=True))]


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
    """Stage the new model's vectors of ``rows``: each memory's text and, where it has one, its
    context (issue 29), in one batch, so no memory is left with a context vector of the old model."""
    contexts = [r["context"] for r in rows if r.get("context") is not None]
    answer = _check_vectors((yield Embed(tuple(r["content"] for r in rows) + tuple(contexts))),
                            len(rows) + len(contexts), dimensions, model)
    rest = iter(answer[len(rows):])
    context_vectors = [next(rest) if r.get("context") is not None else None for r in rows]
    return (yield Sql(*queries.stage_vectors(rows, answer[:len(rows)], context_vectors), fetch="rowcount"))


def _embed_missing(batch_size: int, dimensions: int, model: str) -> Op[int]:
    """Embed the memories that have no vector (a LangGraph store without an index saved them),
    batch by batch, each its own transaction; until then such a memory is found by its words."""
    done = 0
    while True:
        rows = yield Sql(*queries.items_without_vectors(batch_size))
        yield Commit()
        if not rows:
            return done
        vectors = _check_vectors((yield Embed(tuple(r["content"] for r in rows))), len(rows), dimensions, model)
        filled = yield Sql(*queries.set_item_vectors(rows, vectors), fetch="rowcount")
        yield Commit()
        done += filled
        if filled == 0:  # every row changed meanwhile: the next run picks up what is left
            return done


def _embed_passages(batch_size: int, dimensions: int, model: str) -> Op[int]:
    """Embed the documents' passages the switch emptied, batch by batch, each its own transaction
    (no connection held while the model works); until then a passage is found by its words. A
    run interrupted here is finished by the next ``reembed`` with the same model."""
    done = 0
    while True:
        rows = yield Sql(*queries.pending_passages(batch_size))
        yield Commit()
        if not rows:
            return done
        texts = tuple(embedding_text(r["headings"], r["content"]) for r in rows)  # as add_document embeds them
        vectors = _check_vectors((yield Embed(texts)), len(rows), dimensions, model)
        done += (yield Sql(*queries.set_passage_vectors(rows, vectors), fetch="rowcount"))
        yield Commit()


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
        yield Sql(*queries.clear_staged_vectors(), fetch="none")
        yield _set_meta(_TARGET_KEY, target)
    counts = yield _COUNTS
    total, resumed = int(counts["total"]), int(counts["done"])
    if not force and (previous_model, previous_dims) == (model, dimensions) and resumed == 0:
        yield Sql(*queries.delete_meta(_TARGET_KEY), fetch="none")
        yield Commit()
        passages = yield from _embed_passages(batch_size, dimensions, model)  # an interrupted run's, if any
        filled = yield from _embed_missing(batch_size, dimensions, model)
        return ReembedReport(model, dimensions, previous_model, previous_dims, total, filled, 0, switched=False,
                             passages=passages)
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
    yield Sql(*queries.hold_off_writers(), fetch="none")
    late = yield _pending(None)
    if late:
        embedded += len(late)
        yield from _embed_pending(late, dimensions, model)
    total = int((yield _COUNTS)["total"])
    indexes = yield Sql(*queries.vector_indexes())
    for statement in swap_statements(dimensions, indexes):
        yield statement
    yield _set_meta("embedding_dimensions", str(dimensions))
    yield _set_meta("embedding_model", model)
    yield Sql(*queries.delete_meta(_TARGET_KEY), fetch="none")
    yield Sql(*queries.clear_staged_vectors(), fetch="none")
    yield Commit()
    passages = yield from _embed_passages(batch_size, dimensions, model)
    if progress is not None:
        progress(total, total)
    return ReembedReport(model, dimensions, previous_model, previous_dims, total, embedded, resumed, switched=True,
                         passages=passages)


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
