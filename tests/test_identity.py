"""One identity rule for every layer of a run: the resolver (pure), ids taken exactly as given,
and the attacks it closes, run against a real agent on the embedded PostgreSQL:

- ``context={"user_id": "eve"}`` with ``configurable.user_id="alice"`` used to load alice's
  thread and file a snapshot of it under eve; now the run fails before anything is read or written;
- a checkpointer call that names no user used to read (and write) any user's thread; now a thread
  that has an owner is refused to it (``require_user=False`` gives the plain LangGraph behaviour).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime

from agent_memory import (
    ConfigurationError,
    IdentityConflictError,
    InvalidInputError,
    MemoryConfig,
    MissingIdentityError,
    PermissionDeniedError,
)
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.identity import identity_from, read_identity_fields, run_context, thread_and_user
from agent_memory.middleware import MemoryMiddleware, memory_tools
from agent_memory.middleware.episodic import SessionSnapshotMiddleware
from agent_memory.middleware.extraction import ExtractionMiddleware
from agent_memory.middleware.nodes import MemoryContextState, memory_context_node
from agent_memory.models import Identity
from agent_memory.testing import ScriptedChatModel, tool_call
from agent_memory.validation import check_id, check_identity, check_scope_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from episodic_agent import build_agent, run_config

HOT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@dataclass
class Ctx:
    user_id: str | None = None
    project_id: str | None = None
    thread_id: str | None = None


def conf(**configurable: Any) -> dict[str, Any]:
    return {"configurable": configurable}


def in_run(context: Any, **configurable: Any) -> dict[str, Any]:
    """A config as LangGraph hands it to a checkpointer inside a run: the Runtime rides along."""
    return conf(**configurable, __pregel_runtime=Runtime(context=context))


# --- the resolver (pure) -----------------------------------------------------------------------


def test_fields_come_from_the_config_or_the_context_and_the_session_from_the_thread() -> None:
    assert read_identity_fields(conf(user_id="alice", project_id="apollo", thread_id="t1")) == {
        "user_id": "alice", "project_id": "apollo", "session_id": "t1", "team_id": None, "org_id": None}
    assert read_identity_fields(conf(thread_id="t1"), Ctx("alice", "apollo"))["project_id"] == "apollo"
    assert read_identity_fields(None, {"user_id": "alice", "session_id": "s"})["session_id"] == "s"
    # agreeing sources are one source; a thread id 7 and "7" are one thread
    assert read_identity_fields(conf(user_id="alice", thread_id=7), Ctx("alice", thread_id="7"))["user_id"] == "alice"
    # the context LangGraph puts into the config is read when none is passed
    assert run_context(in_run(Ctx("eve"))) == Ctx("eve")
    assert read_identity_fields(in_run(Ctx("eve"), thread_id="t"))["user_id"] == "eve"
    assert run_context(None) is None and run_context({"configurable": "junk"}) is None


@pytest.mark.parametrize("field", ["user_id", "project_id", "session_id", "team_id", "org_id", "thread_id"])
def test_a_field_named_twice_with_two_values_is_refused(field: str) -> None:
    context = {field: "eve"}
    with pytest.raises(IdentityConflictError) as caught:
        read_identity_fields(conf(**{field: "alice"}), context)
    err = caught.value
    assert (err.field, err.context_value, err.config_value) == (field, "eve", "alice")
    message = str(err)
    assert f"two different {field}s" in message and "'eve' in its context" in message
    assert "'alice' in config['configurable']" in message and "nothing was read or written" in message
    assert isinstance(err, ConfigurationError) and isinstance(err, ValueError)
    # the same through the run's own context, and through every reader
    with pytest.raises(IdentityConflictError):
        identity_from(in_run(context, **{field: "alice"}), required=False)
    with pytest.raises(IdentityConflictError):
        thread_and_user(in_run(context, **{"thread_id": "t", field: "alice"}))


def test_a_run_without_a_user_says_how_to_pass_one() -> None:
    with pytest.raises(MissingIdentityError, match="configurable.*context"):
        identity_from(conf(thread_id="t"))
    assert identity_from(conf(thread_id="t"), required=False) is None
    assert identity_from(conf(thread_id=42), Ctx("alice")) == Identity(user_id="alice", session_id="42")


def test_the_checkpointer_reads_the_user_the_middleware_reads() -> None:
    assert thread_and_user(conf(thread_id="t", user_id="alice")) == ("t", "alice")
    assert thread_and_user(in_run(Ctx("alice"), thread_id=5)) == ("5", "alice")
    assert thread_and_user(conf(thread_id="t")) == ("t", None)
    assert thread_and_user(None) == (None, None)
    with pytest.raises(InvalidInputError, match="user_id: has whitespace .* config or context"):
        thread_and_user(conf(thread_id="t", user_id="alice "))


# --- ids are taken exactly as given ------------------------------------------------------------

HIDDEN = ["alice ", " alice", "alice\t", "alice\u00a0", "\u3000alice", "al\u200bice", "alice\u200d", "\ufeffalice",
          "\u202ealice", "al\u2028ice", "al\u2029ice", "al\x7fice", "alice\u00ad", "al\nice"]


@pytest.mark.parametrize("value", HIDDEN)
@pytest.mark.parametrize("field", ["user_id", "session_id", "project_id", "team_id", "org_id"])
def test_ids_with_hidden_or_surrounding_characters_are_refused_not_rewritten(field: str, value: str) -> None:
    kwargs = {"user_id": "alice", field: value}
    with pytest.raises(InvalidInputError) as caught:
        check_identity(**kwargs)
    assert caught.value.field == field
    assert "whitespace" in str(caught.value) or "control characters or invisible" in str(caught.value)


def test_printable_ids_keep_their_exact_spelling() -> None:
    for value in ("alice", "alice smith", "Åsa", "用户-7", "a.b@c+d", "o'neil"):
        assert check_id("user_id", value) == value
    assert check_id("user_id", 42) == "42"
    assert check_scope_name("project_id", "ａｃｍｅ/web") == "acme/web"  # NFKC for scope ids stays


def test_the_service_refuses_a_user_spelled_with_a_trailing_space(memory, tenant) -> None:
    memory.for_user(tenant.user).add("Prefers dark mode in every editor")
    for spelling in (f"{tenant.user} ", f"{tenant.user}\u00a0", f"{tenant.user}\u200b"):
        with pytest.raises(InvalidInputError, match="user_id"):
            memory.for_user(spelling).list()
        with pytest.raises(InvalidInputError, match="user_id"):
            memory.for_user(spelling).add("Uses vim keybindings")
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["Prefers dark mode in every editor"]


# --- the attack: context eve, configurable alice -------------------------------------------------


@pytest.fixture(scope="module")
def checkpointer(dsn: str, config: MemoryConfig):
    with PostgresCheckpointer(dsn, config=config) as cp:
        yield cp


def says(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def hot_rows(dsn: str, thread: str) -> dict[str, list[tuple]]:
    with psycopg.connect(dsn) as conn:
        return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t} WHERE thread_id = %s", (thread,))))
                for t in HOT_TABLES}


def snapshot_rows(dsn: str, thread: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return sorted(map(tuple, conn.execute(
            "SELECT user_id, title, message_count, updated_at FROM session_state_snapshot WHERE thread_id = %s",
            (thread,))))


def full_agent(memory, checkpointer: PostgresCheckpointer, model: ScriptedChatModel) -> Any:
    """Every layer that reads the identity: memory lookup and tools, extraction, snapshots, checkpoints."""
    return create_agent(model, [], context_schema=Ctx, checkpointer=checkpointer, middleware=[
        MemoryMiddleware(memory), ExtractionMiddleware(memory, mode="off"), SessionSnapshotMiddleware(checkpointer)])


@pytest.fixture
def alices_thread(memory, checkpointer, dsn, tenant) -> dict[str, Any]:
    """alice (``tenant.user``) has a thread with a secret in it, and a snapshot of it."""
    thread = f"{tenant.session}-{uuid.uuid4().hex[:6]}"
    memory.for_user(tenant.user).add("Alice's merger codename is BLUEBIRD")
    model = ScriptedChatModel(script=["noted"])
    full_agent(memory, checkpointer, model).invoke(says("the merger codename is BLUEBIRD"),
                                                   run_config(thread, tenant.user))
    assert [s.thread_id for s in checkpointer.list_sessions(user_id=tenant.user)] == [thread]
    return {"thread": thread, "rows": hot_rows(dsn, thread), "snapshots": snapshot_rows(dsn, thread)}


def assert_untouched(dsn, checkpointer, tenant, alices_thread, model) -> None:
    """Nothing was read for the intruder or written anywhere."""
    assert model.requests == []  # the model never saw a prompt (no memories, no thread)
    assert hot_rows(dsn, alices_thread["thread"]) == alices_thread["rows"]
    assert snapshot_rows(dsn, alices_thread["thread"]) == alices_thread["snapshots"]
    assert checkpointer.list_sessions(user_id=tenant.other_user) == []
    assert checkpointer.load_snapshot(alices_thread["thread"], user_id=tenant.other_user) is None


@pytest.mark.parametrize("how", ["invoke", "stream", "ainvoke", "astream"])
def test_context_eve_with_configurable_alice_fails_and_writes_nothing(
        memory, checkpointer, dsn, tenant, alices_thread, how) -> None:
    eve, alice = tenant.other_user, tenant.user
    model = ScriptedChatModel(script=["here is everything"])
    agent = full_agent(memory, checkpointer, model)
    config = run_config(alices_thread["thread"], alice)
    with pytest.raises(IdentityConflictError, match=f"two different user_ids: '{eve}' in its context"):
        if how == "invoke":
            agent.invoke(says("show me the thread"), config, context=Ctx(eve))
        elif how == "stream":
            for _ in agent.stream(says("show me the thread"), config, context=Ctx(eve), stream_mode="values"):
                raise AssertionError("a chunk of alice's thread was streamed to eve")
        elif how == "ainvoke":
            asyncio.run(agent.ainvoke(says("show me the thread"), config, context=Ctx(eve)))
        else:
            async def drain() -> None:
                async for _ in agent.astream(says("show me the thread"), config, context=Ctx(eve)):
                    raise AssertionError("a chunk of alice's thread was streamed to eve")
            asyncio.run(drain())
    assert_untouched(dsn, checkpointer, tenant, alices_thread, model)


def test_context_alice_with_configurable_eve_fails_too(memory, checkpointer, dsn, tenant, alices_thread) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = full_agent(memory, checkpointer, model)
    with pytest.raises(IdentityConflictError, match="user_id"):
        agent.invoke(says("hi"), run_config(alices_thread["thread"], tenant.other_user), context=Ctx(tenant.user))
    # and a context thread that is not the config's thread
    with pytest.raises(IdentityConflictError, match="thread_id"):
        agent.invoke(says("hi"), run_config(alices_thread["thread"], tenant.user),
                     context=Ctx(tenant.user, thread_id=f"{alices_thread['thread']}-other"))
    assert_untouched(dsn, checkpointer, tenant, alices_thread, model)


def test_agreeing_context_and_config_run_normally(memory, checkpointer, tenant, alices_thread) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = full_agent(memory, checkpointer, model)
    result = agent.invoke(says("what was the codename?"), run_config(alices_thread["thread"], tenant.user),
                          context=Ctx(tenant.user))
    assert [m.text for m in result["messages"] if isinstance(m, HumanMessage)] == [
        "the merger codename is BLUEBIRD", "what was the codename?"]
    assert "BLUEBIRD" in model.system_prompts[0]


def test_eve_in_the_context_alone_is_refused_alices_thread(memory, checkpointer, dsn, tenant, alices_thread) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = full_agent(memory, checkpointer, model)
    with pytest.raises(PermissionDeniedError, match="belongs to another user"):
        agent.invoke(says("show me"), conf(thread_id=alices_thread["thread"]), context=Ctx(tenant.other_user))
    assert_untouched(dsn, checkpointer, tenant, alices_thread, model)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # ToolRuntime serializing a dataclass context
def test_memory_lookup_and_tools_refuse_the_run_without_a_checkpointer(memory, tenant) -> None:
    memory.for_user(tenant.user).add("Alice's salary is 250k")
    model = ScriptedChatModel(script=["ok"])
    agent = create_agent(model, [], context_schema=Ctx, middleware=[MemoryMiddleware(memory, fail_open=True)])
    with pytest.raises(IdentityConflictError, match="user_id"):
        agent.invoke(says("what is my salary?"), conf(user_id=tenant.user), context=Ctx(tenant.other_user))
    assert model.requests == []
    # the tools alone: a save that would go to one of the two users fails the run instead
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[tool_call(
        "memory_save", "c1", content="Prefers green tea", memory_type="preference", scope="user")]), "done"])
    agent = create_agent(model, memory_tools(memory), context_schema=Ctx)
    with pytest.raises(IdentityConflictError, match="user_id"):
        agent.invoke(says("remember I like green tea"), conf(user_id=tenant.user), context=Ctx(tenant.other_user))
    assert len(model.requests) == 1  # the model asked for the tool; the tool failed the run
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["Alice's salary is 250k"]
    assert memory.for_user(tenant.other_user).list() == []


def test_a_graph_node_and_extraction_read_the_same_rule(memory, tenant) -> None:
    graph = StateGraph(MemoryContextState, context_schema=Ctx)
    graph.add_node("memory", memory_context_node(memory))
    graph.add_edge(START, "memory")
    app = graph.compile()
    with pytest.raises(IdentityConflictError):
        app.invoke(says("hi"), run_config("t", tenant.user), context=Ctx(tenant.other_user))
    agent = create_agent(ScriptedChatModel(script=["ok"]), [], context_schema=Ctx,
                         middleware=[ExtractionMiddleware(memory)])
    with pytest.raises(IdentityConflictError):
        agent.invoke(says("I prefer tea"), run_config("t", tenant.user), context=Ctx(tenant.other_user))
    assert memory.for_user(tenant.user).list() == memory.for_user(tenant.other_user).list() == []


def test_a_run_with_a_padded_user_id_fails_before_anything_is_written(checkpointer, dsn, tenant) -> None:
    thread = f"{tenant.session}-padded"
    agent = build_agent(checkpointer)
    with pytest.raises(InvalidInputError, match="user_id: has whitespace"):
        agent.invoke(says("hello"), run_config(thread, f"{tenant.user} "))
    assert hot_rows(dsn, thread) == {t: [] for t in HOT_TABLES}
    assert snapshot_rows(dsn, thread) == []


# --- owner-less reads and writes -----------------------------------------------------------------


def owned_thread(checkpointer: PostgresCheckpointer, tenant) -> tuple[str, dict[str, Any]]:
    """A thread alice ran, and the config of its latest checkpoint without any user."""
    thread = f"{tenant.session}-{uuid.uuid4().hex[:6]}"
    build_agent(checkpointer).invoke(says("alice's secret"), run_config(thread, tenant.user))
    latest = checkpointer.get_tuple(run_config(thread, tenant.user))
    bare = {"configurable": {k: v for k, v in latest.config["configurable"].items() if k != "user_id"}}
    return thread, bare


def every_call(cp: PostgresCheckpointer, config: dict[str, Any], thread: str, *,
               delete_as: str | None = None) -> dict[str, Any]:
    """Each checkpoint call, sync and async, as a thunk."""
    def put() -> Any:
        return cp.put({"configurable": {**config["configurable"], "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})

    async def aput() -> Any:
        return await cp.aput({"configurable": {**config["configurable"], "checkpoint_ns": ""}}, empty_checkpoint(),
                             {}, {})

    async def alist() -> list[Any]:
        return [c async for c in cp.alist(config)]

    return {
        "get_tuple": lambda: cp.get_tuple(config),
        "list": lambda: list(cp.list(config)),
        "put": put,
        "put_writes": lambda: cp.put_writes(config, [("messages", "eve was here")], "task-1"),
        "delete_thread": lambda: cp.delete_thread(thread, user_id=delete_as),
        "aget_tuple": lambda: asyncio.run(cp.aget_tuple(config)),
        "alist": lambda: asyncio.run(alist()),
        "aput": lambda: asyncio.run(aput()),
        "aput_writes": lambda: asyncio.run(cp.aput_writes(config, [("messages", "eve was here")], "task-1")),
        "adelete_thread": lambda: asyncio.run(cp.adelete_thread(thread, user_id=delete_as)),
    }


CALLS = ["get_tuple", "list", "put", "put_writes", "delete_thread",
         "aget_tuple", "alist", "aput", "aput_writes", "adelete_thread"]


@pytest.mark.parametrize("call", CALLS)
def test_a_call_naming_no_user_is_refused_an_owned_thread(checkpointer, dsn, tenant, call) -> None:
    thread, bare = owned_thread(checkpointer, tenant)
    before = hot_rows(dsn, thread)
    with pytest.raises(PermissionDeniedError, match="belongs to a user, and this call names none") as caught:
        every_call(checkpointer, bare, thread)[call]()
    assert "user_id" in str(caught.value) and "require_user=False" in str(caught.value)
    assert hot_rows(dsn, thread) == before


@pytest.mark.parametrize("call", CALLS)
def test_another_users_id_is_refused_an_owned_thread(checkpointer, dsn, tenant, call) -> None:
    thread, bare = owned_thread(checkpointer, tenant)
    before = hot_rows(dsn, thread)
    eve = {"configurable": {**bare["configurable"], "user_id": tenant.other_user}}
    with pytest.raises(PermissionDeniedError, match="belongs to another user"):
        every_call(checkpointer, eve, thread, delete_as=tenant.other_user)[call]()
    assert hot_rows(dsn, thread) == before


def test_the_owner_deletes_their_thread_by_name(checkpointer, dsn, tenant) -> None:
    thread, _ = owned_thread(checkpointer, tenant)
    checkpointer.delete_thread(thread, user_id=tenant.user)
    assert hot_rows(dsn, thread) == {t: [] for t in HOT_TABLES}
    thread, _ = owned_thread(checkpointer, tenant)
    asyncio.run(checkpointer.adelete_thread(thread, user_id=tenant.user))
    assert hot_rows(dsn, thread) == {t: [] for t in HOT_TABLES}


def test_get_state_without_a_user_is_refused_and_time_travel_keeps_the_user(checkpointer, tenant) -> None:
    thread, bare = owned_thread(checkpointer, tenant)
    agent = build_agent(checkpointer)
    with pytest.raises(PermissionDeniedError, match="names none"):
        agent.get_state(conf(thread_id=thread))
    with pytest.raises(PermissionDeniedError, match="names none"):
        list(agent.get_state_history(conf(thread_id=thread)))
    with pytest.raises(PermissionDeniedError, match="belongs to another user"):
        agent.get_state(run_config(thread, tenant.other_user))
    # the configs the checkpointer hands back name the user, so time travel with them works
    history = list(agent.get_state_history(run_config(thread, tenant.user)))
    assert all(s.config["configurable"]["user_id"] == tenant.user for s in history)
    assert agent.get_state(history[-1].config).values == history[-1].values


def test_listing_across_threads_is_refused(checkpointer, tenant) -> None:
    owned_thread(checkpointer, tenant)
    for config in (None, conf(user_id=tenant.other_user)):
        with pytest.raises(PermissionDeniedError, match="without a thread_id would read every user's threads"):
            list(checkpointer.list(config, limit=5))

        async def alist(config: Any = config) -> list[Any]:
            return [c async for c in checkpointer.alist(config, limit=5)]
        with pytest.raises(PermissionDeniedError, match="every user's threads"):
            asyncio.run(alist())


def test_threads_nobody_owns_stay_plain_langgraph(checkpointer, tenant) -> None:
    thread = f"{tenant.session}-anonymous"
    agent = build_agent(checkpointer)
    agent.invoke(says("hello"), conf(thread_id=thread))
    assert agent.get_state(conf(thread_id=thread)).values["messages"]


def test_require_user_false_is_the_plain_langgraph_behaviour(dsn, config, checkpointer, tenant) -> None:
    thread, bare = owned_thread(checkpointer, tenant)
    with PostgresCheckpointer(dsn, config=config, require_user=False) as plain:
        assert plain.get_tuple(bare) is not None
        assert list(plain.list(None, limit=1))
        # a named user is still checked
        with pytest.raises(PermissionDeniedError, match="belongs to another user"):
            plain.get_tuple({"configurable": {**bare["configurable"], "user_id": tenant.other_user}})
        plain.delete_thread(thread)
        assert plain.get_tuple(bare) is None
    with pytest.raises(ConfigurationError, match="require_user must be True or False"):
        PostgresCheckpointer(dsn, config=config, require_user="no")  # type: ignore[arg-type]
