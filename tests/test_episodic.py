"""Episodic memory: runs resume from checkpoints in any process, snapshots are per user, old
checkpoints archive and restore exactly, and one checkpointer serves sync and async runs."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from psycopg_pool import ConnectionPool

from agent_memory import (
    ConfigurationError,
    InvalidInputError,
    MemoryConfig,
    MemoryService,
    MissingIdentityError,
    PermissionDeniedError,
)
from agent_memory.db.migrations import MIGRATIONS
from agent_memory.episodic import (
    ArchiveCounts,
    PostgresCheckpointer,
    build_snapshot,
    open_checkpointer,
)
from agent_memory.episodic.snapshots import MAX_STATE_VALUE_BYTES
from agent_memory.middleware.episodic import SessionSnapshotMiddleware
from agent_memory.testing import ScriptedChatModel, tool_call

sys.path.insert(0, str(Path(__file__).resolve().parent))
from episodic_agent import TODOS, build_agent, dump_messages, run_config

SCRIPT = Path(__file__).resolve().parent / "episodic_agent.py"
HOT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
LATER = timedelta(days=2)  # "now" two days on: every checkpoint just written is older than a day


@pytest.fixture(scope="module")
def checkpointer(dsn: str, config: MemoryConfig):
    with PostgresCheckpointer(dsn, config=config) as cp:
        yield cp


def user_says(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def play(dsn: str, thread: str, user: str, action: str, outbox: Path) -> dict:
    """One step of a session in a new Python process."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), dsn, thread, user, action], env=dict(os.environ, EPISODIC_OUTBOX=str(outbox)),
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def hot_rows(dsn: str, thread: str) -> dict[str, list[tuple]]:
    """Every row of a thread in LangGraph's tables, blobs included, to compare exactly."""
    with psycopg.connect(dsn) as conn:
        return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t} WHERE thread_id = %s", (thread,))))
                for t in HOT_TABLES}


def row_counts(dsn: str, thread: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t} WHERE thread_id = %s", (thread,)).fetchone()[0]
                for t in (*HOT_TABLES, "checkpoint_archive", "session_state_snapshot")}


# --- resuming ---------------------------------------------------------------------------------


def test_run_interrupted_for_approval_resumes_in_a_new_process(dsn, checkpointer, tenant, tmp_path):
    thread, outbox = f"{tenant.session}-hitl", tmp_path / "outbox.jsonl"
    first = play(dsn, thread, tenant.user, "start", outbox)
    assert first["next"] == ["HumanInTheLoopMiddleware.after_model"]
    [request] = first["interrupts"][0]["action_requests"]
    assert request["name"] == "send_email" and request["args"] == {"to": "bob"}
    assert not outbox.exists()  # nothing was sent while waiting for approval

    second = play(dsn, thread, tenant.user, "approve", outbox)
    assert second["pid"] != first["pid"] and second["next"] == [] and second["interrupts"] == []
    assert [(m["type"], m["text"]) for m in second["messages"]] == [
        ("human", "please email bob"), ("ai", ""), ("tool", "sent to bob"), ("ai", "done: sent to bob"),
    ]
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert sent == [{"to": "bob", "pid": second["pid"]}]  # sent once, by the resuming process
    # and this process sees the finished run through its own checkpointer
    state = build_agent(checkpointer, hitl=True).get_state(run_config(thread, tenant.user))
    assert dump_messages(state.values["messages"]) == second["messages"]


def test_a_rejected_tool_call_does_not_run(dsn, config, tenant, tmp_path, monkeypatch):
    outbox = tmp_path / "outbox.jsonl"
    monkeypatch.setenv("EPISODIC_OUTBOX", str(outbox))
    run = run_config(f"{tenant.session}-reject", tenant.user)
    with PostgresCheckpointer(dsn, config=config) as first:
        build_agent(first, hitl=True).invoke(user_says("please email bob"), run)
        # the approval waits long enough for the archive to run: the paused checkpoint stays hot
        moved = first.archive(1, thread_id=run["configurable"]["thread_id"], now=datetime.now(UTC) + LATER)
        assert moved.checkpoints > 0
    with PostgresCheckpointer(dsn, config=config) as second:  # a new checkpointer, as after a restart
        agent = build_agent(second, hitl=True)
        assert agent.get_state(run).next == ("HumanInTheLoopMiddleware.after_model",)
        result = agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}), run)
    assert not outbox.exists()
    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error" and "not now" in tool_message.text
    assert result["messages"][-1].text.startswith("done: ")


def test_failed_model_call_resumes_from_the_last_checkpoint_on_retry(checkpointer, tenant):
    run = run_config(f"{tenant.session}-retry", tenant.user)
    agent = build_agent(checkpointer, fail_times=1)
    with pytest.raises(RuntimeError, match="scripted model failure"):
        agent.invoke(user_says("hello there"), run)
    assert [m.text for m in agent.get_state(run).values["messages"]] == ["hello there"]

    result = agent.invoke(None, run)  # retry: no new input, resume where it failed
    assert [(m.type, m.text) for m in result["messages"]] == [("human", "hello there"), ("ai", "echo: hello there")]


def test_page_refresh_in_a_new_process_sees_the_same_session(dsn, checkpointer, tenant, tmp_path):
    thread = f"{tenant.session}-refresh"
    run = run_config(thread, tenant.user)
    agent = build_agent(checkpointer)
    agent.invoke(user_says("hello there"), run)
    agent.invoke(user_says("how are you?"), run)
    here = dump_messages(agent.get_state(run).values["messages"])

    there = play(dsn, thread, tenant.user, "state", tmp_path / "outbox.jsonl")
    assert there["messages"] == here and there["next"] == []
    snapshot = there["snapshot"]
    assert snapshot["title"] == "hello there" and snapshot["message_count"] == 4
    assert snapshot["recent_messages"] == [
        {"type": m["type"], "content": m["text"]} for m in here
    ]
    assert snapshot["state"] == {"todos": TODOS}
    assert there["snapshot_load_seconds"] < 1.0
    # another user refreshing the same thread id gets neither its snapshot nor its checkpoints
    assert checkpointer.load_snapshot(thread, user_id=tenant.other_user) is None
    refused = subprocess.run([sys.executable, str(SCRIPT), dsn, thread, tenant.other_user, "state"],
                             env=dict(os.environ, EPISODIC_OUTBOX=str(tmp_path / "outbox.jsonl")),
                             capture_output=True, text=True, timeout=180, check=False)
    assert refused.returncode != 0 and "PermissionDeniedError" in refused.stderr
    assert "hello there" not in refused.stdout


# --- one checkpointer, sync and async ----------------------------------------------------------


def _conversation(result: dict) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in result["messages"]]


@pytest.mark.parametrize("kind", ["dsn", "connection", "pool"])
def test_sync_and_async_runs_share_one_checkpointer(dsn, config, tenant, kind):
    if kind == "dsn":
        given, owned = dsn, None
    elif kind == "connection":
        given = owned = psycopg.connect(dsn, autocommit=True)
    else:
        given = owned = ConnectionPool(dsn, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True)
    try:
        with open_checkpointer(given, config=config) as cp:
            agent = build_agent(cp)
            threads = {name: run_config(f"{tenant.session}-{kind}-{name}", tenant.user)
                       for name in ("invoke", "ainvoke", "ainvoke2", "stream", "astream")}
            sync = agent.invoke(user_says("hello"), threads["invoke"])
            first = asyncio.run(agent.ainvoke(user_says("hello"), threads["ainvoke"]))
            second = asyncio.run(agent.ainvoke(user_says("hello"), threads["ainvoke2"]))  # a second loop
            assert _conversation(sync) == _conversation(first) == _conversation(second) == [
                ("human", "hello"), ("ai", "echo: hello")]

            streamed = [list(chunk) for chunk in agent.stream(user_says("email me"), threads["stream"])]

            async def astream() -> list[list[str]]:
                return [list(chunk) async for chunk in agent.astream(user_says("email me"), threads["astream"])]

            assert asyncio.run(astream()) == streamed
            assert "tools" in {node for chunk in streamed for node in chunk}
            # each thread reads back the same through either side
            for run in threads.values():
                state = agent.get_state(run)
                assert asyncio.run(agent.aget_state(run)).values["messages"] == state.values["messages"]
            assert cp.load_snapshot(threads["ainvoke2"]["configurable"]["thread_id"], user_id=tenant.user)
    finally:
        if owned is not None:
            owned.close()


def test_repeated_asyncio_run_does_not_leak_connections(dsn, config, tenant):
    def backends() -> int:
        with psycopg.connect(dsn) as conn:
            return conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]

    def settled(expected: int) -> int:  # a backend exits a moment after its client hangs up
        for _ in range(50):
            if (now := backends()) <= expected:
                return now
            time.sleep(0.02)
        return now

    with open_checkpointer(dsn, config=config) as cp:
        agent = build_agent(cp)
        run = run_config(f"{tenant.session}-loops", tenant.user)
        agent.invoke(user_says("zero"), run)
        baseline = backends()
        for text in ("one", "two", "three"):
            asyncio.run(agent.ainvoke(user_says(text), run))
            assert settled(baseline) == baseline  # the loop's connection closed with the loop
        assert [m.text for m in agent.get_state(run).values["messages"]][-2:] == ["three", "echo: three"]


async def test_async_runs_in_a_long_lived_loop(checkpointer, tenant):
    """A notebook's loop never ends: the same checkpointer keeps working in it."""
    agent = build_agent(checkpointer)
    run = run_config(f"{tenant.session}-notebook", tenant.user)
    await agent.ainvoke(user_says("hello"), run)
    result = await agent.ainvoke(user_says("again"), run)
    assert _conversation(result)[-2:] == [("human", "again"), ("ai", "echo: again")]
    assert (await checkpointer.aload_snapshot(run["configurable"]["thread_id"], user_id=tenant.user)).message_count == 4
    assert [s.thread_id for s in await checkpointer.alist_sessions(user_id=tenant.user)] == [
        run["configurable"]["thread_id"]]


def test_every_checkpoint_saver_method_is_delegated():
    """LangGraph adds saver methods over time; a missing one would fall back to NotImplementedError."""
    base = {n for n, v in vars(BaseCheckpointSaver).items() if callable(v) and not n.startswith("_")}
    built_on_the_others = {"get", "aget"}
    assert sorted(base - built_on_the_others - set(vars(PostgresCheckpointer))) == []


def test_methods_langgraph_postgres_lacks_are_ours_now(checkpointer):
    # copy_thread and delete_for_runs run on PostgreSQL (tests/test_checkpointer_conformance.py);
    # a thread nobody owns copies as nothing, and run ids without a user would reach every thread
    checkpointer.copy_thread(f"missing-{uuid.uuid4()}", f"copy-{uuid.uuid4()}")
    with pytest.raises(MissingIdentityError, match="delete_for_runs needs user_id"):
        asyncio.run(checkpointer.adelete_for_runs(["run"]))


def test_closed_checkpointer_says_so(dsn, config, tenant):
    cp = open_checkpointer(dsn, config=config)
    cp.close()
    with pytest.raises(ConfigurationError, match="closed"):
        cp.get_tuple(run_config(tenant.session, tenant.user))
    with pytest.raises(ConfigurationError, match="closed"):
        cp.load_snapshot(tenant.session, user_id=tenant.user)
    with pytest.raises(ConfigurationError, match="closed"):
        asyncio.run(cp.aget_tuple(run_config(tenant.session, tenant.user)))


def test_checkpointer_refuses_connections_it_cannot_use(dsn, config):
    with pytest.raises(ConfigurationError, match="DSN string"):
        PostgresCheckpointer(42, config=config)  # type: ignore[arg-type]
    with psycopg.connect(dsn) as conn, pytest.raises(ConfigurationError, match="autocommit"):
        PostgresCheckpointer(conn, config=config)
    with pytest.raises(ConfigurationError, match="MemoryConfig"):
        PostgresCheckpointer(dsn, config={"database_url": dsn})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="PostgresCheckpointer"):
        SessionSnapshotMiddleware(object())  # type: ignore[arg-type]


# --- session snapshots ------------------------------------------------------------------------


def test_snapshot_is_written_after_each_run_and_only_for_a_known_user(checkpointer, tenant):
    agent = build_agent(checkpointer)
    thread = f"{tenant.session}-snap"
    agent.invoke(user_says("first question"), run_config(thread, tenant.user))
    agent.invoke(user_says("second question"), run_config(thread, tenant.user))
    snap = checkpointer.load_snapshot(thread, user_id=tenant.user)
    assert snap.title == "first question" and snap.message_count == 4 and snap.thread_id == thread
    assert [m["content"] for m in snap.recent_messages] == [
        "first question", "echo: first question", "second question", "echo: second question"]
    assert snap.checkpoint_id and snap.updated_at >= snap.created_at and dict(snap.state) == {"todos": TODOS}

    anonymous = f"{tenant.session}-anon"
    agent.invoke(user_says("who am I?"), {"configurable": {"thread_id": anonymous}})  # no user: skipped
    with psycopg.connect(checkpointer._db.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM session_state_snapshot WHERE thread_id = %s",
                            (anonymous,)).fetchone() == (0,)


def test_a_subagent_does_not_overwrite_the_session_snapshot(checkpointer, tenant):
    """An agent run inside another agent's tool shares the thread id but is not the session."""
    inner = build_agent(checkpointer)

    def ask_helper(question: str) -> str:
        """Ask the helper agent."""
        return inner.invoke(user_says(question))["messages"][-1].text

    def outer_reply(messages):
        last = messages[-1]
        if last.type == "human":
            return AIMessage("", tool_calls=[tool_call("ask_helper", "call_h", question="inner question")])
        return f"helper said: {last.text}"

    def outer(middleware: list) -> object:
        return create_agent(ScriptedChatModel(script=outer_reply), [ask_helper], checkpointer=checkpointer,
                            middleware=middleware)

    thread = f"{tenant.session}-outer"
    result = outer([]).invoke(user_says("outer question"), run_config(thread, tenant.user))
    assert result["messages"][-1].text == "helper said: echo: inner question"
    assert checkpointer.load_snapshot(thread, user_id=tenant.user) is None  # the helper wrote none

    # the session's own agent does (a middleware without arguments uses the agent's checkpointer)
    outer([SessionSnapshotMiddleware()]).invoke(user_says("outer question"), run_config(thread, tenant.user))
    snap = checkpointer.load_snapshot(thread, user_id=tenant.user)
    assert snap.title == "outer question" and snap.message_count == 8


def test_every_snapshot_read_is_scoped_to_its_user(checkpointer, tenant):
    shared_thread = f"{tenant.session}-shared"  # both users happen to use the same thread id
    mine = {"messages": [HumanMessage("alice's secret plan"), AIMessage("noted")]}
    theirs = {"messages": [HumanMessage("bob's grocery list")]}
    checkpointer.save_snapshot(mine, user_id=tenant.user, thread_id=shared_thread, project_id=tenant.project)
    checkpointer.save_snapshot(theirs, user_id=tenant.other_user, thread_id=shared_thread)
    checkpointer.save_snapshot(mine, user_id=tenant.user, thread_id=f"{tenant.session}-2",
                               project_id=tenant.other_project)

    assert checkpointer.load_snapshot(shared_thread, user_id=tenant.user).title == "alice's secret plan"
    assert checkpointer.load_snapshot(shared_thread, user_id=tenant.other_user).title == "bob's grocery list"
    assert checkpointer.load_snapshot(f"{tenant.session}-2", user_id=tenant.other_user) is None
    assert asyncio.run(checkpointer.aload_snapshot(f"{tenant.session}-2", user_id=tenant.other_user)) is None

    assert {s.thread_id for s in checkpointer.list_sessions(user_id=tenant.user)} == {
        shared_thread, f"{tenant.session}-2"}
    assert [s.title for s in checkpointer.list_sessions(user_id=tenant.other_user)] == ["bob's grocery list"]
    assert [s.thread_id for s in checkpointer.list_sessions(user_id=tenant.user, project_id=tenant.project)] == [
        shared_thread]
    assert checkpointer.list_sessions(user_id=tenant.other_user, project_id=tenant.project) == []
    assert [s.title for s in asyncio.run(checkpointer.alist_sessions(user_id=tenant.other_user))] == [
        "bob's grocery list"]
    assert checkpointer.list_sessions(user_id=f"nobody-{tenant.user}") == []
    # newest first, paged
    newest = checkpointer.list_sessions(user_id=tenant.user, limit=1)
    assert [s.thread_id for s in newest] == [f"{tenant.session}-2"]
    assert [s.thread_id for s in checkpointer.list_sessions(user_id=tenant.user, limit=1, offset=1)] == [
        shared_thread]


def test_a_thread_belongs_to_the_user_who_started_it(checkpointer, config, dsn, tenant):
    thread = f"{tenant.session}-owned"
    agent = build_agent(checkpointer)
    agent.invoke(user_says("alice's secret plan for the merger"), run_config(thread, tenant.user))

    intruder = run_config(thread, tenant.other_user)
    with pytest.raises(PermissionDeniedError, match="belongs to another user"):
        agent.get_state(intruder)
    with pytest.raises(PermissionDeniedError):
        agent.invoke(user_says("show me everything"), intruder)
    streamed = []
    with pytest.raises(PermissionDeniedError):
        for chunk in agent.stream(user_says("show me everything"), intruder, stream_mode="values"):
            streamed.append(chunk)
    assert streamed == []
    with pytest.raises(PermissionDeniedError):
        asyncio.run(agent.ainvoke(user_says("show me everything"), intruder))
    with pytest.raises(PermissionDeniedError):
        list(checkpointer.list(intruder))
    # another process (a fresh checkpointer, no cache) gives the same answer
    with PostgresCheckpointer(dsn, config=config) as fresh:
        with pytest.raises(PermissionDeniedError):
            fresh.get_tuple(intruder)
        assert fresh.get_tuple(run_config(thread, tenant.user)) is not None
    # the owner carries on; the intruder wrote nothing
    result = agent.invoke(user_says("and the timeline?"), run_config(thread, tenant.user))
    assert [m.text for m in result["messages"] if isinstance(m, HumanMessage)] == [
        "alice's secret plan for the merger", "and the timeline?"]
    assert all("show me everything" not in str(row) for row in hot_rows(dsn, thread).values())


def test_a_deleted_thread_id_can_be_used_by_someone_else(checkpointer, tenant):
    thread = f"{tenant.session}-reused"
    agent = build_agent(checkpointer)
    agent.invoke(user_says("first owner"), run_config(thread, tenant.user))
    checkpointer.delete_thread(thread, user_id=tenant.user)
    result = agent.invoke(user_says("second owner"), run_config(thread, tenant.other_user))
    assert [m.text for m in result["messages"] if isinstance(m, HumanMessage)] == ["second owner"]
    with pytest.raises(PermissionDeniedError):
        agent.get_state(run_config(thread, tenant.user))


def test_runs_that_name_no_user_are_not_checked(checkpointer, tenant):
    thread = f"{tenant.session}-anonymous"
    agent = build_agent(checkpointer)
    agent.invoke(user_says("hello"), {"configurable": {"thread_id": thread}})
    assert agent.get_state({"configurable": {"thread_id": thread}}).values["messages"]


def test_snapshot_keeps_its_title_when_early_messages_are_summarized_away(checkpointer, tenant):
    thread = f"{tenant.session}-title"
    checkpointer.save_snapshot({"messages": [HumanMessage("plan the trip")]}, user_id=tenant.user, thread_id=thread)
    later = checkpointer.save_snapshot(
        {"messages": [AIMessage("summary: a trip"), HumanMessage("book the hotel")]},
        user_id=tenant.user, thread_id=thread)
    assert later.title == "plan the trip" and later.message_count == 2


def test_build_snapshot_is_compact_and_storable():
    long = "word " * 500
    built = build_snapshot({
        "messages": [HumanMessage(f"  Hello\x00   world {long}"), AIMessage("", tool_calls=[
            {"name": "search", "args": {}, "id": "1", "type": "tool_call"}]),
            ToolMessage("found", tool_call_id="1", name="search")] + [AIMessage(f"m{i}") for i in range(10)],
        "todos": [{"content": "x", "status": "pending"}],
        "working_memory": {"notes": "n" * (MAX_STATE_VALUE_BYTES + 10)},
        "unrelated": "ignored",
    })
    doc = built["document"]
    assert built["message_count"] == 13 and len(built["title"]) <= 80 and built["title"].startswith("Hello world")
    assert "\x00" not in json.dumps(doc) and len(doc["recent_messages"]) == 6
    assert all(len(m["content"]) <= 500 for m in doc["recent_messages"])
    assert doc["state"]["todos"] == [{"content": "x", "status": "pending"}]
    assert "omitted" in doc["state"]["working_memory"] and "unrelated" not in doc["state"]
    few = build_snapshot({"messages": [HumanMessage("q"), AIMessage("", tool_calls=[
        {"name": "search", "args": {}, "id": "1", "type": "tool_call"}]), ToolMessage("found", tool_call_id="1",
                                                                                      name="search")]})
    assert few["document"]["recent_messages"][1:] == [
        {"type": "ai", "content": "", "tool_calls": ["search"]}, {"type": "tool", "content": "found", "name": "search"}]
    assert build_snapshot({})["title"] is None and build_snapshot({})["message_count"] == 0


# --- archive ------------------------------------------------------------------------------------


def _referenced_blobs(dsn: str, thread: str) -> set[tuple[str, str]]:
    """(channel, version) of every blob a hot checkpoint of ``thread`` names and that exists."""
    with psycopg.connect(dsn) as conn:
        return set(conn.execute(
            "SELECT DISTINCT b.channel, b.version FROM checkpoints c "
            "CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') v "
            "JOIN checkpoint_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            " AND b.channel = v.key AND b.version = v.value WHERE c.thread_id = %s", (thread,)))


def test_archive_moves_history_and_restore_brings_it_back_exactly(dsn, checkpointer, tenant):
    agent = build_agent(checkpointer)
    thread, other = f"{tenant.session}-arch", f"{tenant.session}-arch-other"
    run = run_config(thread, tenant.user)
    for text in ("hello", "please email bob", "thanks"):
        agent.invoke(user_says(text), run)
    agent.invoke(user_says("hello"), run_config(other, tenant.user))
    before, other_before = hot_rows(dsn, thread), hot_rows(dsn, other)
    state_before = agent.get_state(run)
    history_before = [c.config["configurable"]["checkpoint_id"] for c in checkpointer.list(run)]
    head_versions = checkpointer.get_tuple(run).checkpoint["channel_versions"]
    head_blobs = {(ch, str(v)) for ch, v in head_versions.items()} & _referenced_blobs(dsn, thread)
    # the todos blob was written in the first run and every later checkpoint shares it
    assert any(ch == "todos" for ch, _ in head_blobs)

    # nothing is a day old yet
    assert checkpointer.archive(1, thread_id=thread) == ArchiveCounts()
    moved = checkpointer.archive(1, thread_id=thread, now=datetime.now(UTC) + LATER)
    assert moved.threads == 1 and moved.checkpoints == len(history_before) - 1 and moved.skipped_threads == 0
    assert moved.blobs > 0 and moved.writes > 0
    counts = row_counts(dsn, thread)
    assert counts["checkpoints"] == 1 and counts["checkpoint_archive"] == moved.checkpoints
    assert counts["checkpoint_blobs"] == len(before["checkpoint_blobs"]) - moved.blobs
    assert counts["checkpoint_writes"] == len(before["checkpoint_writes"]) - moved.writes
    assert _referenced_blobs(dsn, thread) == head_blobs  # shared blobs stayed with the latest checkpoint
    assert hot_rows(dsn, other) == other_before  # scoped to the thread
    # the session still opens as it was, straight from the hot tables
    assert agent.get_state(run).values == state_before.values
    assert [c.config["configurable"]["checkpoint_id"] for c in checkpointer.list(run)] == history_before[:1]
    # idempotent
    assert checkpointer.archive(1, thread_id=thread, now=datetime.now(UTC) + LATER) == ArchiveCounts()

    restored = checkpointer.restore(thread)
    assert (restored.checkpoints, restored.blobs, restored.writes) == (moved.checkpoints, moved.blobs, moved.writes)
    assert hot_rows(dsn, thread) == before  # byte for byte
    assert row_counts(dsn, thread)["checkpoint_archive"] == 0
    assert checkpointer.restore(thread) == ArchiveCounts(threads=0)
    assert [c.config["configurable"]["checkpoint_id"] for c in checkpointer.list(run)] == history_before
    assert agent.get_state(run).values == state_before.values
    # and the agent carries on from there
    result = agent.invoke(user_says("one more"), run)
    assert _conversation(result) == [(m.type, m.text) for m in state_before.values["messages"]] + [
        ("human", "one more"), ("ai", "echo: one more")]


async def test_archive_and_restore_async(dsn, checkpointer, tenant):
    agent = build_agent(checkpointer)
    run = run_config(f"{tenant.session}-aarch", tenant.user)
    await agent.ainvoke(user_says("hello"), run)
    await agent.ainvoke(user_says("again"), run)
    before = hot_rows(dsn, run["configurable"]["thread_id"])
    moved = await checkpointer.aarchive(0.5, thread_id=run["configurable"]["thread_id"],
                                        now=datetime.now(UTC) + LATER)
    assert moved.checkpoints > 0
    result = await agent.ainvoke(user_says("after archive"), run)  # resumes from the hot head
    assert _conversation(result)[-1] == ("ai", "echo: after archive")
    assert (await checkpointer.arestore(run["configurable"]["thread_id"])).checkpoints == moved.checkpoints
    after = hot_rows(dsn, run["configurable"]["thread_id"])
    assert all(row in after[t] for t in HOT_TABLES for row in before[t])


def test_asking_for_an_archived_checkpoint_restores_its_thread(dsn, checkpointer, tenant):
    agent = build_agent(checkpointer)
    run = run_config(f"{tenant.session}-travel", tenant.user)
    agent.invoke(user_says("hello"), run)
    agent.invoke(user_says("again"), run)
    first_answer = next(s for s in agent.get_state_history(run) if len(s.values.get("messages", [])) == 2)
    checkpointer.archive(1, thread_id=run["configurable"]["thread_id"], now=datetime.now(UTC) + LATER)
    assert len(list(agent.get_state_history(run))) == 1

    old = agent.get_state(first_answer.config)  # time travel by checkpoint id
    assert [m.text for m in old.values["messages"]] == ["hello", "echo: hello"]
    assert row_counts(dsn, run["configurable"]["thread_id"])["checkpoint_archive"] == 0


def test_archive_of_every_thread_uses_the_configured_age(fresh_dsn, config):
    dsn = fresh_dsn()
    with open_checkpointer(dsn, config=config.replace(checkpoint_archive_days=3)) as cp:
        agent = build_agent(cp)
        for thread in ("a", "b"):
            agent.invoke(user_says("hello"), run_config(thread, "u"))
            agent.invoke(user_says("again"), run_config(thread, "u"))
        now = datetime.now(UTC)
        assert cp.archive(now=now + timedelta(days=2)) == ArchiveCounts()  # younger than 3 days
        moved = cp.archive(now=now + timedelta(days=4))
        assert moved.threads == 2 and moved.checkpoints > 0
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (2,)  # each thread's latest
        assert [m.text for m in agent.get_state(run_config("b", "u")).values["messages"]][-1] == "echo: again"
        assert cp.restore("a").threads == 1 and cp.restore("b").threads == 1


def test_archive_leaves_delta_channel_threads_alone(dsn, checkpointer, tenant):
    run = run_config(f"{tenant.session}-delta", tenant.user)
    build_agent(checkpointer).invoke(user_says("hello"), run)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE checkpoints SET metadata = metadata || '{\"counters_since_delta_snapshot\": {}}' "
                     "WHERE thread_id = %s", (run["configurable"]["thread_id"],))
    before = hot_rows(dsn, run["configurable"]["thread_id"])
    moved = checkpointer.archive(1, thread_id=run["configurable"]["thread_id"], now=datetime.now(UTC) + LATER)
    assert moved == ArchiveCounts(skipped_threads=1)
    assert hot_rows(dsn, run["configurable"]["thread_id"]) == before


def test_deleting_a_thread_deletes_its_archive_and_snapshots(dsn, checkpointer, tenant):
    thread = f"{tenant.session}-gone"
    agent = build_agent(checkpointer)
    agent.invoke(user_says("hello"), run_config(thread, tenant.user))
    agent.invoke(user_says("again"), run_config(thread, tenant.user))
    checkpointer.archive(1, thread_id=thread, now=datetime.now(UTC) + LATER)
    assert row_counts(dsn, thread)["checkpoint_archive"] > 0
    checkpointer.delete_thread(thread, user_id=tenant.user)
    assert set(row_counts(dsn, thread).values()) == {0}
    assert checkpointer.restore(thread) == ArchiveCounts()


# --- schema -------------------------------------------------------------------------------------


def test_checkpointer_sets_up_a_new_database_the_memory_service_then_uses(fresh_dsn, config, embeddings):
    dsn = fresh_dsn()
    with open_checkpointer(dsn, config=config) as cp:  # every migration, in order (see test_migrations)
        assert cp.applied_migrations == [m.name for m in MIGRATIONS]
    with open_checkpointer(dsn, config=config) as cp:
        assert cp.applied_migrations == []
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        assert memory.applied_migrations == []
    with psycopg.connect(dsn) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations",
            "session_state_snapshot", "checkpoint_archive", "memory_items"} <= tables


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("age", [0, -1, math.nan, math.inf, "7", True, None])
def test_bad_archive_age_is_refused_and_changes_nothing(dsn, checkpointer, tenant, age):
    thread = f"{tenant.session}-bad"
    build_agent(checkpointer).invoke(user_says("hello"), run_config(thread, tenant.user))
    before = hot_rows(dsn, thread)
    if age is None:  # None means "the configured age", which is valid
        assert checkpointer.archive(None, thread_id=thread).checkpoints == 0
    else:
        with pytest.raises(InvalidInputError, match="older_than_days: must be a positive number of days"):
            checkpointer.archive(age, thread_id=thread, now=datetime.now(UTC) + LATER)
    assert hot_rows(dsn, thread) == before


@pytest.mark.parametrize("call, field", [
    (lambda cp: cp.archive(1, thread_id="", now=None), "thread_id"),
    (lambda cp: cp.archive(1, thread_id=["t"]), "thread_id"),
    (lambda cp: cp.archive(1, now=datetime(2030, 1, 1)), "now"),
    (lambda cp: cp.archive(1, now="tomorrow"), "now"),
    (lambda cp: cp.restore(""), "thread_id"),
    (lambda cp: cp.restore(None), "thread_id"),
    (lambda cp: cp.restore({"thread_id": "t"}), "thread_id"),
    (lambda cp: cp.load_snapshot("t", user_id=None), "user_id"),
    (lambda cp: cp.load_snapshot("   ", user_id="u"), "thread_id"),
    (lambda cp: cp.list_sessions(user_id="u", limit=0), "limit"),
    (lambda cp: cp.list_sessions(user_id="u", limit="5"), "limit"),
    (lambda cp: cp.list_sessions(user_id="u", offset=-1), "offset"),
    (lambda cp: cp.save_snapshot("hello", user_id="u", thread_id="t"), "state"),
    (lambda cp: cp.save_snapshot({"messages": "hello"}, user_id="u", thread_id="t"), "state"),
    (lambda cp: cp.save_snapshot({"messages": [42]}, user_id="u", thread_id="t"), "state"),
    (lambda cp: cp.save_snapshot({}, user_id="", thread_id="t"), "user_id"),
    (lambda cp: cp.save_snapshot({}, user_id="u", thread_id="t", checkpoint_id=3.5), "checkpoint_id"),
])
def test_malformed_arguments_raise_naming_the_field(dsn, checkpointer, call, field):
    with psycopg.connect(dsn) as conn:
        before = conn.execute("SELECT (SELECT count(*) FROM checkpoint_archive), "
                              "(SELECT count(*) FROM session_state_snapshot)").fetchone()
    with pytest.raises(InvalidInputError) as caught:
        call(checkpointer)
    assert caught.value.field == field and str(caught.value).startswith(f"{field}: ")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT (SELECT count(*) FROM checkpoint_archive), "
                            "(SELECT count(*) FROM session_state_snapshot)").fetchone() == before


@pytest.mark.parametrize("days", [0, -3, math.nan, math.inf, "30", True])
def test_archive_age_setting_is_validated(days):
    with pytest.raises(ConfigurationError, match="checkpoint_archive_days"):
        MemoryConfig(checkpoint_archive_days=days)


def test_archive_age_comes_from_the_environment():
    assert MemoryConfig.from_env({"MEMORY_CHECKPOINT_ARCHIVE_DAYS": "7.5"}).checkpoint_archive_days == 7.5
    with pytest.raises(ConfigurationError, match="MEMORY_CHECKPOINT_ARCHIVE_DAYS"):
        MemoryConfig.from_env({"MEMORY_CHECKPOINT_ARCHIVE_DAYS": "a week"})
    with pytest.raises(ConfigurationError, match="checkpoint_archive_days"):
        MemoryConfig.from_env({"MEMORY_CHECKPOINT_ARCHIVE_DAYS": "0"})


def test_thread_owner_read_from_the_agent_context(checkpointer, tenant):
    from dataclasses import dataclass

    @dataclass
    class Ctx:
        user_id: str

    model = ScriptedChatModel(script=lambda msgs: "ok")
    agent = create_agent(model, [], checkpointer=checkpointer, context_schema=Ctx)
    config = {"configurable": {"thread_id": f"{tenant.session}-ctx"}}
    agent.invoke(user_says("private words"), config, context=Ctx(tenant.user))
    with pytest.raises(PermissionDeniedError):
        agent.invoke(user_says("let me in"), config, context=Ctx(tenant.other_user))
    agent.invoke(user_says("still mine"), config, context=Ctx(tenant.user))
