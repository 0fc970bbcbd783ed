"""Forgetting a user's episodic memory: their threads go with every checkpoint, blob, write,
archive row and snapshot, other users' threads stay and resume, and a database without the
checkpoint tables is no error."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg_pool import ConnectionPool

from agent_memory import InvalidInputError, MemoryConfig
from agent_memory.db.requests import arun, run
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.episodic.forget import (
    FORGET_TABLES,
    delete_snapshots,
    delete_thread_rows,
    forget_user_threads,
)
from agent_memory.queries import USER_DATA_TABLES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from episodic_agent import build_agent, run_config

THREAD_TABLES = tuple(t.name for t in USER_DATA_TABLES if t.forget == "episodic" and not t.user_columns)
ALL_KEYS = {"threads", *FORGET_TABLES}
LATER = timedelta(days=2)


@pytest.fixture(scope="module")
def checkpointer(dsn: str, config: MemoryConfig):
    with PostgresCheckpointer(dsn, config=config) as cp:
        yield cp


def user_says(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def rows_of(dsn: str, user: str, threads: list[str]) -> dict[str, int]:
    """What forgetting ``user`` (owner of ``threads``) should delete, counted straight from the tables."""
    with psycopg.connect(dsn) as conn:
        def count(query: str, params: tuple) -> int:
            return conn.execute(query, params).fetchone()[0]

        counts = {t: count(f"SELECT count(*) FROM {t} WHERE thread_id = ANY(%s)", (threads,)) for t in THREAD_TABLES}
        counts["session_state_snapshot"] = count(
            "SELECT count(*) FROM session_state_snapshot WHERE user_id = %s OR thread_id = ANY(%s)", (user, threads))
        counts["checkpoint_thread_owner"] = count(
            "SELECT count(*) FROM checkpoint_thread_owner WHERE user_id = %s", (user,))
    return counts


def everything_of(dsn: str, user: str, thread: str) -> dict[str, list[tuple]]:
    """Every row of ``thread`` in every table, ``user``'s snapshot of it and ``user``'s owner rows."""
    with psycopg.connect(dsn) as conn:
        rows = {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t} WHERE thread_id = %s", (thread,))))
                for t in THREAD_TABLES}
        rows["session_state_snapshot"] = sorted(map(tuple, conn.execute(
            "SELECT * FROM session_state_snapshot WHERE user_id = %s AND thread_id = %s", (user, thread))))
        rows["checkpoint_thread_owner"] = sorted(map(tuple, conn.execute(
            "SELECT * FROM checkpoint_thread_owner WHERE user_id = %s", (user,))))
    return rows


def forget(dsn: str, user: str, mode: str) -> dict[str, int]:
    """Run the op the way a caller would: on a connection, a pool, or asyncio."""
    if mode == "connection":
        with psycopg.connect(dsn, autocommit=True) as conn:
            return run(forget_user_threads(user), conn, None)
    if mode == "pool":
        with ConnectionPool(dsn, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True) as pool:
            return run(forget_user_threads(user), pool, None)

    async def go() -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            return await arun(forget_user_threads(user), conn, None)

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["connection", "pool", "async"])
def test_forgetting_a_user_deletes_their_threads_and_nothing_else(dsn, config, checkpointer, tenant, mode):
    a, b = tenant.user, tenant.other_user
    a_threads = [f"{tenant.session}-{mode}-a1", f"{tenant.session}-{mode}-a2"]
    b_thread = f"{tenant.session}-{mode}-b1"
    agent = build_agent(checkpointer)
    for text in ("hello", "please email bob", "thanks"):  # a tool call, so writes of several tasks
        agent.invoke(user_says(text), run_config(a_threads[0], a))
    agent.invoke(user_says("hi"), run_config(a_threads[1], a))
    archived = checkpointer.archive(1, thread_id=a_threads[0], now=datetime.now(UTC) + LATER)
    assert archived.checkpoints > 0
    agent.invoke(user_says("b's question"), run_config(b_thread, b))
    # A's own snapshot of B's thread goes; B's snapshot of A's thread goes with the thread
    checkpointer.save_snapshot({"messages": [HumanMessage("a's note")]}, user_id=a, thread_id=b_thread)
    checkpointer.save_snapshot({"messages": [HumanMessage("b peeked")]}, user_id=b, thread_id=a_threads[1])

    before = rows_of(dsn, a, a_threads)
    assert before["checkpoint_archive"] == archived.checkpoints
    assert before["session_state_snapshot"] == 4  # A's of a1 and a2, B's of a2, A's of b1
    assert before["checkpoint_thread_owner"] == 2
    assert all(before[t] > 0 for t in THREAD_TABLES)
    b_snapshot = checkpointer.load_snapshot(b_thread, user_id=b)
    assert b_snapshot is not None and b_snapshot.title == "b's question"
    b_before = everything_of(dsn, b, b_thread)
    assert len(b_before["session_state_snapshot"]) == 1 and len(b_before["checkpoint_thread_owner"]) == 1

    counts = forget(dsn, a, mode)

    assert counts == {"threads": 2, **before}
    assert set(counts) == ALL_KEYS
    assert rows_of(dsn, a, a_threads) == dict.fromkeys(before, 0)
    assert everything_of(dsn, b, b_thread) == b_before
    assert checkpointer.load_snapshot(b_thread, user_id=a) is None
    assert checkpointer.load_snapshot(a_threads[1], user_id=b) is None
    assert checkpointer.list_sessions(user_id=a) == []

    # B's session resumes where it was
    result = agent.invoke(user_says("and then?"), run_config(b_thread, b))
    assert [(m.type, m.text) for m in result["messages"]] == [
        ("human", "b's question"), ("ai", "echo: b's question"), ("human", "and then?"), ("ai", "echo: and then?")]

    # idempotent
    assert forget(dsn, a, mode) == dict.fromkeys(ALL_KEYS, 0)

    # A's threads are really gone: a new process finds nothing, and the ids are free to claim
    with PostgresCheckpointer(dsn, config=config) as fresh:
        assert fresh.get_tuple(run_config(a_threads[0], a)) is None
        assert fresh.restore(a_threads[0]).checkpoints == 0  # nothing left in the archive either
        reused = build_agent(fresh).invoke(user_says("new owner"), run_config(a_threads[1], b))
        assert [m.text for m in reused["messages"]] == ["new owner", "echo: new owner"]


def test_forgetting_a_user_with_nothing_deletes_nothing(dsn, checkpointer, tenant):
    agent = build_agent(checkpointer)
    thread = f"{tenant.session}-bystander"
    agent.invoke(user_says("hello"), run_config(thread, tenant.other_user))
    before = everything_of(dsn, tenant.other_user, thread)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert run(forget_user_threads(tenant.user), conn, None) == dict.fromkeys(ALL_KEYS, 0)
    assert everything_of(dsn, tenant.other_user, thread) == before


def test_a_failure_part_way_deletes_nothing(dsn, checkpointer, tenant):
    """One transaction: a caller's op that fails after forgetting rolls every delete back."""
    thread = f"{tenant.session}-rollback"
    build_agent(checkpointer).invoke(user_says("hello"), run_config(thread, tenant.user))
    before = everything_of(dsn, tenant.user, thread)
    assert before["checkpoints"] and before["session_state_snapshot"] and before["checkpoint_thread_owner"]

    def forget_then_fail():
        counts = yield from forget_user_threads(tenant.user)
        assert counts["checkpoints"] == len(before["checkpoints"])
        raise RuntimeError("the caller's next step failed")

    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(RuntimeError, match="next step failed"):
        run(forget_then_fail(), conn, None)
    assert everything_of(dsn, tenant.user, thread) == before


@pytest.mark.parametrize("mode", ["connection", "async"])
def test_a_database_without_the_checkpoint_tables_is_no_error(fresh_dsn, mode):
    dsn = fresh_dsn()
    assert forget(dsn, "alice", mode) == {"threads": 0}
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('checkpoints')").fetchone() == (None,)  # nothing was created


def test_only_the_tables_that_exist_are_counted(fresh_dsn):
    """LangGraph's own setup without ours: no owners, so no threads, and no snapshot table."""
    dsn = fresh_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        PostgresSaver(conn).setup()
        conn.execute("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) "
                     "VALUES ('t', '', '1', '{}', '{}')")
        assert run(forget_user_threads("alice"), conn, None) == {
            "threads": 0, "checkpoints": 0, "checkpoint_blobs": 0, "checkpoint_writes": 0}
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (1,)  # unowned: not alice's


@pytest.mark.parametrize("user_id", [None, "", "   ", ["alice"], "a\x00b"])
def test_a_bad_user_id_is_refused_before_any_query(user_id):
    with pytest.raises(InvalidInputError) as caught:
        run(forget_user_threads(user_id), object(), None)  # type: ignore[arg-type]  # never connects
    assert caught.value.field == "user_id"


def test_statements_match_whole_thread_ids_by_parameter():
    query, params = delete_thread_rows("checkpoint_writes", ["t1", "t2"])
    assert query == "DELETE FROM checkpoint_writes WHERE thread_id = ANY(%(ids)s)" and params == {"ids": ["t1", "t2"]}
    query, params = delete_snapshots("alice", ["t1"])
    assert "user_id = %(user_id)s OR thread_id = ANY(%(ids)s)" in query
    assert params == {"user_id": "alice", "ids": ["t1"]}
    with pytest.raises(ValueError, match="not a per-thread checkpoint table"):
        delete_thread_rows("memory_items", ["t1"])



def test_the_checkpointer_forgets_a_user_and_its_cached_claims(checkpointer):
    """After ``forget_user`` the running checkpointer no longer trusts its cached claim: another
    user can take the thread id over, and the forgotten user is refused on it."""
    import uuid

    from agent_memory.errors import PermissionDeniedError

    tag = uuid.uuid4().hex[:8]
    a, b, thread = f"a-{tag}", f"b-{tag}", f"t-{tag}"
    agent = build_agent(checkpointer)
    agent.invoke(user_says("hello"), run_config(thread, a))
    report = checkpointer.forget_user(user_id=a)
    assert report.user_id == a and report.removed["threads"] == 1 and report.removed["checkpoints"] >= 1
    agent.invoke(user_says("mine now"), run_config(thread, b))
    with pytest.raises(PermissionDeniedError, match="belongs to another user"):
        agent.invoke(user_says("back?"), run_config(thread, a))
