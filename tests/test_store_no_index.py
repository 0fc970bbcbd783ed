"""A store built with ``index=None`` embeds nothing, as LangGraph's stores without an index.

Issue 28: LangGraph's ``test_large_batches`` took 72 s on our store against 15 s on
``PostgresStore`` partly because every put was embedded although no index was asked for. Such a
store's memories have no vector (migration ``0020_optional_embedding``): they are found by their
words, score 0 on meaning in every search, and ``agent-memory reembed`` gives them a vector.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
from langgraph.store.base import PutOp

from agent_memory import Identity, MemoryService
from agent_memory.reembed import reembed
from agent_memory.store import AgentMemoryStore


def _counting(monkeypatch: Any, embeddings: Any) -> list[str]:
    """Every text the session's embedder is asked to embed from now on (the real model answers)."""
    texts: list[str] = []
    documents, query = embeddings.embed_documents, embeddings.embed_query

    def embed_documents(given: list[str]) -> Any:
        texts.extend(given)
        return documents(given)

    def embed_query(text: str) -> Any:
        texts.append(text)
        return query(text)

    monkeypatch.setattr(embeddings, "embed_documents", embed_documents)
    monkeypatch.setattr(embeddings, "embed_query", embed_query)
    return texts


def test_a_store_without_an_index_never_calls_the_embedder(fresh_dsn: Any, config: Any, embeddings: Any,
                                                           monkeypatch: Any) -> None:
    dsn = fresh_dsn()
    user = f"noindex-{uuid.uuid4().hex[:8]}"
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        texts = _counting(monkeypatch, embeddings)
        store = AgentMemoryStore(memory, caller=Identity(user_id=user), index=None)
        ns = ("memories", user, "plain")
        store.put(ns, "a", {"text": "The quarterly tax return is due on the fifteenth"})
        store.batch([PutOp(ns, f"b{i}", {"text": f"Batch note {i} about the garden party"}) for i in range(5)])
        store.put(ns, "a", {"text": "The quarterly tax return moved to the twentieth"})  # a revision: no vector
        asyncio.run(store.aput(ns, "c", {"text": "Written through the async door"}))
        hits = store.search(ns, query="when is the tax return due?")  # the query is ignored, as LangGraph does
        assert texts == []
        assert {h.key for h in hits} == {"a", "c", *(f"b{i}" for i in range(5))}
        assert all(h.score is None for h in hits)
        assert store.get(ns, "a").value == {"text": "The quarterly tax return moved to the twentieth"}
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM memory_items WHERE embedding IS NULL").fetchone()[0] == 7

        # memory_search still finds them, by their words (similarity 0)
        [hit] = memory.for_user(user).search("quarterly tax return twentieth", k=1)
        assert hit.content.startswith("The quarterly tax return moved")

        # a store with an index (or none given: the default) embeds as before
        texts.clear()  # (memory_search embedded its query)
        indexed = AgentMemoryStore(memory, caller=Identity(user_id=user))
        indexed.put(ns, "d", {"text": "An indexed note about the piano recital"})
        assert texts == ["An indexed note about the piano recital"]

    with psycopg.connect(dsn, autocommit=True) as conn:
        report = reembed(conn, embeddings)  # the same model: fills in the missing vectors only
        assert report.switched is False and report.embedded == 7
        assert conn.execute("SELECT count(*) FROM memory_items WHERE embedding IS NULL").fetchone()[0] == 0
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        [hit] = memory.for_user(user).search("when must the taxes be filed?", k=1)
        assert "tax return" in hit.content and hit.similarity > 0.3
