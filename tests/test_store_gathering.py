"""The async calls made on a store at once run as one batch, each with its own result or error.

LangGraph's async stores gather every call made in one event-loop tick into one ``abatch``;
ours ran each call as its own transaction (issue 28: 69.5 calls/s against 17,242 for
``AsyncPostgresStore`` on 1,200 gathered calls, and ``DatabaseBusyError`` at 6,000). These tests
prove the gathering (how many batches ran, how many embedding calls), that one refused call fails
alone, and that calls of different callers share a transaction but never an identity.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from langgraph.store.base import GetOp, PutOp
from psycopg import sql
from test_ops_scripted import drive

from agent_memory import Identity
from agent_memory.db.requests import Sql
from agent_memory.errors import DatabaseError, InvalidInputError, PermissionDeniedError
from agent_memory.store import AgentMemoryStore
from agent_memory.store.gathering import each_alone

SECRET = {"text": "the deploy key is AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


def _counting(store: AgentMemoryStore) -> list[int]:
    """Record the size of each batch the store runs for gathered calls."""
    sizes: list[int] = []
    run = store._run_gathered

    async def counted(ops: list[Any], callers: list[Any]) -> Any:
        sizes.append(len(ops))
        return await run(ops, callers)

    store._run_gathered = counted  # type: ignore[method-assign]
    return sizes


@pytest.mark.parametrize("kind", ["sync-service", "async-service"])
async def test_gathered_calls_run_as_few_batches_and_a_refused_one_fails_alone(
        kind: str, memory: Any, amemory: Any, embeddings: Any, monkeypatch: Any) -> None:
    user = f"gather-{uuid.uuid4().hex[:10]}"
    store = AgentMemoryStore(memory if kind == "sync-service" else amemory, caller=Identity(user_id=user))
    sizes = _counting(store)
    documents: list[list[str]] = []
    embed_documents = embeddings.embed_documents

    def counted(texts: list[str]) -> Any:
        documents.append(list(texts))
        return embed_documents(texts)

    monkeypatch.setattr(embeddings, "embed_documents", counted)
    ns = ("memories", user, "gathered")
    texts = [f"Gathered note {i}: the team lunch moved to the {i}th floor canteen" for i in range(40)]
    calls: list[Any] = [store.aput(ns, f"k{i}", {"text": t}) for i, t in enumerate(texts)]
    calls.append(store.aput(ns, "leak", SECRET))  # refused by the gate: only this call fails
    calls.append(store.aput(("memories", "someone-else"), "x", {"text": "writing into another user's memory"}))
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert outcomes[:40] == [None] * 40
    assert isinstance(outcomes[40], InvalidInputError)
    assert isinstance(outcomes[41], PermissionDeniedError)
    assert sum(sizes) == 42 and len(sizes) < 42  # gathered, not one transaction per call
    assert sum(len(d) for d in documents) == 40 and len(documents) <= len(sizes)  # one embedding call a batch
    assert not any("AKIA" in t for d in documents for t in d)
    items = await store.asearch(ns, limit=100)
    assert sorted(i.key for i in items) == sorted(f"k{i}" for i in range(40))
    gets = await asyncio.gather(*(store.aget(ns, f"k{i}") for i in range(40)), store.aget(ns, "leak"))
    assert [g.value["text"] for g in gets[:40]] == texts and gets[40] is None


async def test_gathered_calls_of_different_callers_keep_their_identities(amemory: Any) -> None:
    """A store without a fixed caller reads each call's identity from its run (LangGraph's
    config): calls of two users gathered into one batch each act as their own user."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import var_child_runnable_config

    alice, bob = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob"))
    store = AgentMemoryStore(amemory)  # identity from the run only
    sizes = _counting(store)

    async def as_user(user: str, make: Any) -> Any:
        config: RunnableConfig = {"configurable": {"user_id": user}}
        token = var_child_runnable_config.set(config)
        try:
            return await make()
        finally:
            var_child_runnable_config.reset(token)

    ns = ("memories",)
    puts = [as_user(u, lambda u=u: store.aput((*ns, u), "diary", {"text": f"{u}'s private diary: the plan is {u}"}))
            for u in (alice, bob)]
    assert await asyncio.gather(*puts) == [None, None]
    reads = await asyncio.gather(
        as_user(alice, lambda: store.aget((*ns, alice), "diary")),
        as_user(bob, lambda: store.aget((*ns, bob), "diary")),
        as_user(bob, lambda: store.aget((*ns, alice), "diary")),  # bob asks for alice's: refused
        as_user(alice, lambda: store.asearch(ns)),
        return_exceptions=True)
    assert reads[0].value["text"].startswith(alice) and reads[1].value["text"].startswith(bob)
    assert isinstance(reads[2], PermissionDeniedError)
    assert {i.namespace for i in reads[3]} == {(*ns, alice)}
    assert max(sizes) > 1  # the users' calls did share batches


async def test_repeated_gathered_puts_to_one_key_keep_the_last(memory: Any) -> None:
    user = f"dedupe-{uuid.uuid4().hex[:10]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user))
    ns = ("memories", user)
    await asyncio.gather(*(store.aput(ns, "k", {"text": f"version number {i} of the same note"}) for i in range(5)))
    item = await store.aget(ns, "k")
    assert item is not None and item.value == {"text": "version number 4 of the same note"}


async def test_an_explicit_abatch_stays_all_or_nothing(memory: Any) -> None:
    user = f"atomic-{uuid.uuid4().hex[:10]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user))
    ns = ("memories", user)
    with pytest.raises(InvalidInputError):
        await store.abatch([PutOp(ns, "ok", {"text": "A harmless note about the garden club"}), PutOp(ns, "x", SECRET)])
    assert (await store.abatch([GetOp(ns, "ok")])) == [None]


def _said(request: Any) -> str:
    query = request.query
    return query.as_string(None) if isinstance(query, sql.Composable) else str(query)


def test_each_alone_undoes_a_failed_step_and_goes_on() -> None:
    """Scripted, no server: the second step's statement fails; its savepoint is rolled back, its
    error (worded as ours) is its outcome, and the third step runs and answers."""

    def step(value: str) -> Any:
        rows = yield Sql(sql.SQL("SELECT 1"), None)
        return (value, rows)

    def refused() -> Any:
        yield Sql(sql.SQL("SELECT 1"), None)
        raise InvalidInputError("value", "was not stored")

    requests: list[Any] = []
    failure = psycopg.errors.UniqueViolation("duplicate key value violates unique constraint")
    outcomes = drive(each_alone([step("a"), step("b"), InvalidInputError("key", "is empty"), refused(), step("c")]),
                     [None, ["r1"], None, None, failure, None, None, None, None, None, ["r3"], None], requests)
    assert outcomes[0] == ("a", ["r1"]) and outcomes[4] == ("c", ["r3"])
    assert isinstance(outcomes[1], DatabaseError) and isinstance(outcomes[2], InvalidInputError)
    assert isinstance(outcomes[3], InvalidInputError) and outcomes[3].field == "value"
    said = [_said(r) for r in requests]
    assert said == ["SAVEPOINT store_op", "SELECT 1", "RELEASE SAVEPOINT store_op",
                    "SAVEPOINT store_op", "SELECT 1", "ROLLBACK TO SAVEPOINT store_op",
                    "SAVEPOINT store_op", "SELECT 1", "ROLLBACK TO SAVEPOINT store_op",
                    "SAVEPOINT store_op", "SELECT 1", "RELEASE SAVEPOINT store_op"]


def test_each_alone_runs_reads_without_savepoints_and_a_read_the_database_refuses_ends_the_batch() -> None:
    def read(value: str) -> Any:
        rows = yield Sql(sql.SQL("SELECT 2"), None)
        return (value, rows)

    def refused_early() -> Any:
        raise InvalidInputError("limit", "must be at least 1")
        yield  # pragma: no cover - a generator

    requests: list[Any] = []
    outcomes = drive(each_alone([read("a"), refused_early(), read("b")], [False, False, False]), [["x"], ["y"]],
                     requests)
    assert outcomes[0] == ("a", ["x"]) and isinstance(outcomes[1], InvalidInputError) and outcomes[2] == ("b", ["y"])
    assert [_said(r) for r in requests] == ["SELECT 2", "SELECT 2"]
    failure = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    with pytest.raises(psycopg.errors.QueryCanceled):  # the transaction is aborted: the batch ends
        drive(each_alone([read("a"), read("b")], [False, False]), [failure])
