"""The store and search under concurrent load: reads that write bookkeeping never fail or block.

A store read with ``refresh_on_read`` renews the TTL of what it read, and a memory search
records a recall on its hits; both are writes done by readers. Two readers of the same rows in
different orders used to lock them in those orders and deadlock (issue 28: 119 of 320 store
searches failed with ``DeadlockDetected``). These tests run many readers over shared rows at
once and assert that every read answers.
"""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from typing import Any

from langgraph.store.base import PutOp

from agent_memory import Identity
from agent_memory.store import AgentMemoryStore

WORDS = ["coffee", "tea", "garden", "bicycle", "piano", "harbour", "lantern", "meadow", "violin", "canyon",
         "glacier", "orchard", "falcon", "compass", "lighthouse", "volcano", "saffron", "marble", "thunder",
         "willow", "anchor", "citadel", "ember", "fjord", "granite", "horizon", "ivory", "juniper", "kettle", "lagoon"]


def _hammer(call: Any, threads: int, rounds: int) -> list[BaseException]:
    """Run ``call(thread, round)`` from ``threads`` threads at once; the errors raised."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        start.wait()
        for r in range(rounds):
            try:
                call(t, r)
            except Exception as exc:  # collected: the assertion shows them all
                errors.append(exc)

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return errors


def test_store_searches_that_refresh_ttl_never_deadlock(memory: Any) -> None:
    """8 threads x 40 searches over 30 items with a TTL, each search renewing what it read in
    its own similarity order: every search answers (the renewals once deadlocked each other)."""
    user = f"load-{uuid.uuid4().hex[:10]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user), ttl={"default_ttl": 60, "refresh_on_read": True})
    ns = ("memories", user, "load")
    store.batch([PutOp(ns, f"k{i}", {"text": f"a note about the {word} and the {WORDS[(i * 7) % 30]}"}, ttl=60)
        for i, word in enumerate(WORDS)])
    found: list[int] = []

    def search(t: int, r: int) -> None:
        hits = store.search(ns, query=f"{WORDS[(t * 11 + r * 3) % 30]} {WORDS[(t + r * 5) % 30]}", limit=30)
        found.append(len(hits))

    errors = _hammer(search, threads=8, rounds=40)
    assert errors == [], f"{len(errors)} of 320 searches failed, first: {errors[0]!r}"
    assert found == [30] * 320  # every search saw every item (none expired, none hidden by the renewals)


def test_memory_searches_over_shared_rows_never_deadlock(memory: Any) -> None:
    """8 threads x 25 ``search`` calls of project members over the same 30 project memories, in
    different orders: each call records a recall on its hits, and every call answers."""
    tag = uuid.uuid4().hex[:10]
    owner, project = f"own-{tag}", f"proj-{tag}"
    memory.create_project(project, user_id=owner)
    users = [f"u{i}-{tag}" for i in range(8)]
    for user in users:
        memory.add_member("project", project, user, "editor", user_id=owner)
    writer = memory.for_user(owner, project_id=project)
    for i, word in enumerate(WORDS):
        writer.add(f"The team decided the {word} project uses the {WORDS[(i * 7) % 30]} plan", scope="project")
    handles = [memory.for_user(user, project_id=project) for user in users]

    def search(t: int, r: int) -> None:
        assert len(handles[t].search(f"{WORDS[(t * 11 + r * 3) % 30]} {WORDS[(t + r * 5) % 30]}", k=20)) > 0

    errors = _hammer(search, threads=8, rounds=25)
    assert errors == [], f"{len(errors)} of 200 searches failed, first: {errors[0]!r}"


def test_a_renewal_that_deadlocks_undoes_itself_is_repeated_and_never_fails_the_read() -> None:
    """Driven with scripted answers (no server): a deadlock thrown at the renewal rolls back to
    its savepoint and the renewal runs again; failing twice, it is given up and the read still
    answers its items."""
    from datetime import UTC, datetime

    from psycopg import errors as pg_errors
    from test_ops_scripted import drive

    from agent_memory.config import MemoryConfig
    from agent_memory.principal import PrincipalOps
    from agent_memory.store.namespaces import resolve
    from agent_memory.store.ops import StoreSettings, search_items

    config = MemoryConfig.defaults()
    settings = StoreSettings(config=config, principal=lambda who: PrincipalOps(config, who, lambda llm: None))
    alice = Identity(user_id="alice")
    target = resolve(("memories", "alice"), alice, trusted=False, exact=False)
    now = datetime.now(UTC)
    row = {"id": uuid.uuid4(), "key": '["memories", "alice", "n", "k"]', "namespace": ["memories", "alice", "n"],
           "value": {"text": "dark roast"}, "created_at": now, "updated_at": now, "score": None, "renewable": True}

    def deadlock() -> Exception:
        return pg_errors.DeadlockDetected("deadlock detected")

    for renewals, tail in ((["set", "undo", "set", "release"], [None, deadlock(), None, None, None, None]),
                           (["set", "undo", "set", "undo"], [None, deadlock(), None, None, deadlock(), None])):
        requests: list[Any] = []
        [hit] = drive(search_items(settings, target, ("memories", "alice"), refresh=True), [[row], *tail], requests)
        assert hit.value == {"text": "dark roast"}
        said = [r.query.as_string(None) if hasattr(r.query, "as_string") else str(r.query) for r in requests[1:]]
        savepoints = [s.split()[0].lower() for s in said if "store_renewal" in s]
        assert savepoints == [{"set": "savepoint", "undo": "rollback", "release": "release"}[a] for a in renewals]
        assert sum(s.startswith("UPDATE memory_items SET expires_at") for s in said) == 2  # repeated once


class _Count:
    """Records each call of the session embedder's methods (the real model still answers)."""

    def __init__(self, monkeypatch: Any, embeddings: Any) -> None:
        self.documents: list[list[str]] = []
        self.queries: list[str] = []
        documents, query = embeddings.embed_documents, embeddings.embed_query

        def embed_documents(texts: list[str]) -> Any:
            self.documents.append(list(texts))
            return documents(texts)

        def embed_query(text: str) -> Any:
            self.queries.append(text)
            return query(text)

        monkeypatch.setattr(embeddings, "embed_documents", embed_documents)
        monkeypatch.setattr(embeddings, "embed_query", embed_query)


def test_a_batch_of_puts_embeds_once_and_a_repeated_value_not_again(memory: Any, embeddings: Any,
                                                                    monkeypatch: Any) -> None:
    """Five puts in one batch: one embedding call with their five texts (each put embedded its own).
    The same values put again, and a query asked twice: no call for what the store already embedded.
    A value with a secret is refused before anything of it reaches the embedder."""
    user = f"emb-{uuid.uuid4().hex[:10]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user))
    ns = ("memories", user, "notes")
    values = [{"text": f"Remember that the {word} meeting moved to Thursday"} for word in WORDS[:5]]
    count = _Count(monkeypatch, embeddings)
    store.batch([PutOp(ns, f"k{i}", value) for i, value in enumerate(values)])
    assert count.documents == [[v["text"] for v in values]]
    store.batch([PutOp(ns, f"k{i}", value) for i, value in enumerate(values)])
    store.put(ns, "k0", values[0])
    store.put(ns, "again", values[1])  # another key, a text already embedded
    assert len(count.documents) == 1
    assert [i.key for i in store.search(ns, query="the coffee meeting", limit=1)] == ["k0"]
    store.search(ns, query="the coffee meeting", limit=1)
    assert count.queries == ["the coffee meeting"]
    assert {i.key: i.value for i in store.search(ns, limit=10)} == {**{f"k{i}": v for i, v in enumerate(values)},
                                                                     "again": values[1]}

    import pytest

    from agent_memory.errors import InvalidInputError

    secret = {"text": "the deploy key is AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    with pytest.raises(InvalidInputError):
        store.batch([PutOp(ns, "ok", {"text": "A harmless note about the weekly garden club"}),
                     PutOp(ns, "leak", secret)])
    assert not any("AKIA" in text for call in count.documents for text in call)
    assert store.get(ns, "ok") is None  # the batch is one transaction: nothing of it was written
