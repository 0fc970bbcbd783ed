"""``agent-memory reembed``'s mechanics: switching a database to an embedding model of another
size, in batches, resumably, atomically, on the real database (each test on its own).

The embedders here are deterministic and tiny (hashed bags of words), so a test can tell which
model made a stored vector; the command line test runs the real local model."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from agent_memory import EmbeddingDimensionMismatchError, MemoryService
from agent_memory.documents.chunks import embedding_text
from agent_memory.errors import InvalidInputError
from agent_memory.reembed import areembed, reembed, reembed_op
from hash_embeddings import HashEmbeddings


FACTS = ["I keep my notes in Obsidian", "My dog is called Rex", "I prefer tea over coffee",
         "Our team deploys on Fridays", "The webshop uses PostgreSQL 16"]


def _seed(dsn: str, dims: int = 8) -> list[str]:
    with MemoryService(dsn, embeddings=HashEmbeddings(dims)) as memory:
        ids = [str(memory.for_user("u1").add(f).id) for f in FACTS]
        memory.for_user("u1").delete(ids[-1])  # archived memories are re-embedded too
    return ids


def _column_type(conn: psycopg.Connection) -> str:
    return conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                        " WHERE attrelid = 'memory_items'::regclass AND attname = 'embedding'").fetchone()[0]


def _meta(conn: psycopg.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM agent_memory_meta").fetchall())


def _stored(conn: psycopg.Connection) -> dict[str, tuple[str, list[float]]]:
    rows = conn.execute("SELECT id::text, content, embedding::text FROM memory_items").fetchall()
    return {i: (c, [float(x) for x in e.strip("[]").split(",")]) for i, c, e in rows}


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) < 1e-5 for x, y in zip(a, b))


class Stop(Exception):
    pass


def _interrupt_after(batches: int, seen: list[tuple[int, int]]):
    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if len(seen) > batches:  # the first call reports where the run starts
            raise Stop
    return progress


def test_reembed_switches_the_dimension_in_batches_and_search_works(fresh_dsn):
    dsn = fresh_dsn()
    ids = _seed(dsn)
    new = HashEmbeddings(16)
    with pytest.raises(EmbeddingDimensionMismatchError, match="agent-memory reembed"):
        MemoryService(dsn, embeddings=new)
    seen: list[tuple[int, int]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE INDEX memory_items_ann_idx ON memory_items USING hnsw (embedding vector_cosine_ops)")
        report = reembed(conn, new, batch_size=2, progress=lambda d, t: seen.append((d, t)))
        assert report.switched and report.total == 5 and report.embedded == 5 and report.resumed == 0
        assert (report.previous_dimensions, report.previous_model) == (8, "HashEmbeddings:hash-8")
        assert (report.dimensions, report.model) == (16, "HashEmbeddings:hash-16")
        assert new.calls == [2, 2, 1] and seen == [(0, 5), (2, 5), (4, 5), (5, 5), (5, 5)]
        assert _column_type(conn) == "vector(16)"
        meta = _meta(conn)
        assert meta["embedding_dimensions"] == "16" and meta["embedding_model"] == "HashEmbeddings:hash-16"
        assert "reembed_target" not in meta
        assert conn.execute("SELECT count(*) FROM memory_reembed").fetchone()[0] == 0
        # the index on the vector column was made again, for the new size
        assert "hnsw" in conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_items_ann_idx'"
                                      ).fetchone()[0]
        stored = _stored(conn)
        assert set(stored) == set(ids)
        assert all(_close(vector, new._vector(content)) for content, vector in stored.values())
    with MemoryService(dsn, embeddings=HashEmbeddings(16)) as memory:  # the new model starts, and finds
        [hit] = memory.for_user("u1").search("what is my dog called", k=1)
        assert hit.content == "My dog is called Rex"
        saved = memory.for_user("u1").add("I run on Tuesdays")
        assert not isinstance(saved, type(None)) and saved.content == "I run on Tuesdays"
    with pytest.raises(EmbeddingDimensionMismatchError):  # and the old one is refused now
        MemoryService(dsn, embeddings=HashEmbeddings(8))


def test_an_interrupted_run_resumes_and_embeds_edited_memories_again(fresh_dsn):
    dsn = fresh_dsn()
    _seed(dsn)
    new = HashEmbeddings(16)
    seen: list[tuple[int, int]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(Stop):
            reembed(conn, new, batch_size=2, progress=_interrupt_after(1, seen))
        # nothing switched: the old model still serves, and two vectors wait in the side table
        assert _column_type(conn) == "vector(8)" and _meta(conn)["embedding_dimensions"] == "8"
        # the active one first: an archived memory can be deleted but not edited
        staged = [r[0] for r in conn.execute(
            "SELECT r.id::text FROM memory_reembed r JOIN memory_items m ON m.id = r.id"
            " ORDER BY m.status <> 'active', r.id").fetchall()]
        assert len(staged) == 2
    with MemoryService(dsn, embeddings=HashEmbeddings(8)) as old:
        old.for_user("u1").edit(staged[0], content="My cat is called Tom")  # its staged vector is stale
        old.for_user("u1").delete(staged[1], hard=True)  # and this one's goes with it
    seen.clear()
    new.calls.clear()
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = reembed(conn, new, batch_size=2, progress=lambda d, t: seen.append((d, t)))
        assert report.switched and report.total == 4 and report.resumed == 0 and report.embedded == 4
        assert seen[0] == (0, 4) and seen[-1] == (4, 4)
        stored = _stored(conn)
        assert stored[staged[0]][0] == "My cat is called Tom" and staged[1] not in stored
        assert all(_close(vector, new._vector(content)) for content, vector in stored.values())


def test_a_resumed_run_keeps_what_was_staged(fresh_dsn):
    dsn = fresh_dsn()
    _seed(dsn)
    seen: list[tuple[int, int]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(Stop):
            reembed(conn, HashEmbeddings(16), batch_size=2, progress=_interrupt_after(2, seen))
        again = HashEmbeddings(16)
        report = reembed(conn, again, batch_size=2)
        assert report.resumed == 4 and report.embedded == 1 and again.calls == [1] and report.switched
        assert _column_type(conn) == "vector(16)"


def test_another_target_model_starts_over(fresh_dsn):
    dsn = fresh_dsn()
    _seed(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(Stop):
            reembed(conn, HashEmbeddings(16), batch_size=2, progress=_interrupt_after(2, []))
        report = reembed(conn, HashEmbeddings(12), batch_size=10)
        assert report.resumed == 0 and report.embedded == 5 and _column_type(conn) == "vector(12)"


def test_the_same_model_has_nothing_to_do_unless_forced(fresh_dsn):
    dsn = fresh_dsn()
    _seed(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        same = HashEmbeddings(8)
        report = reembed(conn, same)
        assert not report.switched and report.embedded == 0 and same.calls == []
        report = reembed(conn, same, force=True)
        assert report.switched and report.embedded == 5 and _column_type(conn) == "vector(8)"
        with pytest.raises(InvalidInputError, match="batch_size"):
            reembed(conn, same, batch_size=0)


def test_bad_vectors_stop_the_run_before_anything_switches(fresh_dsn):
    class Liar(HashEmbeddings):
        def embed_documents(self, texts):
            return [v[:3] for v in super().embed_documents(texts)]

    dsn = fresh_dsn()
    _seed(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        op = reembed_op("Liar:hash-16", 16)
        from agent_memory.db.requests import run
        from agent_memory.errors import EmbeddingError

        with pytest.raises(EmbeddingError, match="16-dimensional"):
            run(op, conn, Liar(16))
        assert _column_type(conn) == "vector(8)"


def test_the_async_driver_switches_too(fresh_dsn):
    dsn = fresh_dsn()
    _seed(dsn)

    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            return await areembed(conn, HashEmbeddings(16), batch_size=3)

    report = asyncio.run(go())
    assert report.switched and report.embedded == 5
    with MemoryService(dsn, embeddings=HashEmbeddings(16)) as memory:
        assert memory.for_user("u1").stats().by_status == {"active": 4, "archived": 1}  # statuses stay


def test_documents_passages_are_embedded_again_with_the_new_model(fresh_dsn):
    """The switch empties the passages' vectors (another size, or another model's) and embeds them
    again right after; an interrupted pass is finished by the next run; new documents work."""
    dsn = fresh_dsn()
    handbook = "# Handbook\n\nWe use PostgreSQL 16 for orders.\n\n## Deploys\n\nWe deploy on Tuesdays after review."
    with MemoryService(dsn, embeddings=HashEmbeddings(8)) as memory:
        memory.for_user("u1").add_document(handbook, title="Handbook", llm=None)
    new = HashEmbeddings(16)
    with psycopg.connect(dsn, autocommit=True) as conn:
        passages = conn.execute("SELECT count(*) FROM memory_passages").fetchone()[0]
        assert passages >= 2
        report = reembed(conn, new, batch_size=1)
        assert report.switched and report.passages == passages
        rows = conn.execute("SELECT headings, content, embedding::text FROM memory_passages").fetchall()
        assert all(_close([float(x) for x in e.strip("[]").split(",")], new._vector(embedding_text(h, c)))
                   for h, c, e in rows)  # under their headings, as add_document embeds them
        # a pass interrupted after the switch: the next run with the same model finishes it
        conn.execute("UPDATE memory_passages SET embedding = NULL")
        again = reembed(conn, new)
        assert not again.switched and again.passages == passages
        assert conn.execute("SELECT count(*) FROM memory_passages WHERE embedding IS NULL").fetchone()[0] == 0
    with MemoryService(dsn, embeddings=HashEmbeddings(16)) as memory:
        [hit] = memory.for_user("u1").search_documents("when do we deploy", k=1)
        assert "Tuesdays" in hit.content and hit.similarity > 0
        added = memory.for_user("u1").add_document("We use ruff for linting.", title="Style", llm=None)
        assert added.passages_added == 1


def test_a_reembedding_makes_the_contexts_vectors_with_the_new_model_in_the_same_batch(fresh_dsn):
    """Memories that keep their context (issue 29): the switch gives both vectors of the new model,
    the context's made in the batch of the memory's own; a memory without context keeps none."""
    dsn = fresh_dsn()
    turns = ["Ann: we should plan the trip to Porto", "Ben: I booked the train for Friday",
             "Ann: great, I will book the hotel"]
    with MemoryService(dsn, embeddings=HashEmbeddings(8)) as memory:
        memory.for_user("u1").add_transcript(turns, conversation="trip")
        memory.for_user("u1").add("I prefer window seats")
    new = HashEmbeddings(16)
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = reembed(conn, new, batch_size=10)
        assert report.switched and new.calls == [4 + 3]  # 4 memories and 3 contexts, one batch
        rows = conn.execute("SELECT content, context, context_embedding::text FROM memory_items").fetchall()
        assert conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid ="
                            " 'memory_items'::regclass AND attname = 'context_embedding'").fetchone()[0] == "vector(16)"
        # the knowledge graph's vectors follow the new size (emptied, for maintain() to make again), so
        # a save that names a person after the switch writes its node
        for table in ("graph_nodes", "graph_storylines"):
            assert conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid ="
                                " %s::regclass AND attname = 'embedding'", (table,)).fetchone()[0] == "vector(16)"
    for content, context, vector in rows:
        if context is None:
            assert vector is None and content == "I prefer window seats"
        else:
            assert _close([float(x) for x in vector.strip("[]").split(",")], new._vector(context))
    with MemoryService(dsn, embeddings=HashEmbeddings(16)) as memory:
        more = memory.for_user("u1").add_transcript(["Ben: and the museum on Saturday"], conversation="trip")
        assert len(more.inserted) == 1
