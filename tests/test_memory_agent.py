"""create_memory_agent: the four memory layers wired together, on the real database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from agent_memory import ConfigurationError, InvalidInputError
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.middleware import create_memory_agent
from agent_memory.testing import ScriptedChatModel, tool_call

SCRIPT = Path(__file__).with_name("memory_agent_script.py")


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def cfg(user: str, thread: str, project: str | None = None) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "thread_id": thread, "project_id": project}}


def ask(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


def first_turn_script(msgs):
    """Session 1: plan, save a preference and call a user tool at once; then answer."""
    if isinstance(msgs[-1], ToolMessage):
        return "All set."
    if "remember" in msgs[-1].text:
        return AIMessage("", tool_calls=[
            tool_call("update_todos", todos=[{"content": "check the weather", "status": "in_progress"}]),
            tool_call("memory_save", content="Prefers metric units for all measurements", memory_type="preference"),
            tool_call("weather", city="Oslo"),
        ])
    return "Noted."


def test_four_layers_in_one_call(memory, tenant) -> None:
    model = ScriptedChatModel(script=first_turn_script)
    agent = create_memory_agent(model, [weather], memory=memory, system_prompt="You are a travel assistant.")
    assert isinstance(agent.checkpointer, PostgresCheckpointer)

    one = cfg(tenant.user, f"{tenant.session}-1")
    result = agent.invoke(ask("remember that I prefer metric units, and what's the weather in Oslo?"), one)
    # working memory: the todo list and the tool calls of this invocation
    assert result["working_memory"]["todos"] == [{"content": "check the weather", "status": "in_progress"}]
    assert {c["name"] for c in result["working_memory"]["tool_calls"]} >= {"memory_save", "weather"}
    assert "<working_memory>" in model.system_prompts[-1] and "check the weather" in model.system_prompts[-1]
    # long-term memory: saved for the run's user
    assert [m.content for m in memory.for_user(tenant.user).list()] == [
        "Prefers metric units for all measurements"]
    # episodic memory: checkpoint and snapshot in PostgreSQL
    assert agent.checkpointer.get_tuple(one) is not None
    snapshot = agent.checkpointer.load_snapshot(f"{tenant.session}-1", user_id=tenant.user)
    assert snapshot is not None and snapshot.message_count == len(result["messages"])

    # session 2, a new thread: the memory is injected, the working memory starts empty
    two = cfg(tenant.user, f"{tenant.session}-2")
    agent.invoke(ask("how warm will it be tomorrow?"), two)
    system = model.system_prompts[-1]
    assert system.startswith("You are a travel assistant.")
    assert "Prefers metric units" in system and "<working_memory>" not in system
    # another user sees none of it
    agent.invoke(ask("how warm will it be tomorrow?"), cfg(tenant.other_user, f"{tenant.other_session}-1"))
    assert "metric" not in model.system_prompts[-1]


def test_refresh_sees_the_same_session(memory, tenant) -> None:
    config = cfg(tenant.user, f"{tenant.session}-refresh")
    first = create_memory_agent(ScriptedChatModel(script=["Hello!"]), [], memory=memory)
    first.invoke(ask("hi there"), config)
    again = create_memory_agent(ScriptedChatModel(script=["Welcome back."]), [], memory=memory)  # a new page load
    assert [m.text for m in again.get_state(config).values["messages"]] == ["hi there", "Hello!"]
    again.invoke(ask("still there?"), config)
    assert [m.text for m in first.get_state(config).values["messages"]][-2:] == ["still there?", "Welcome back."]


def play(dsn: str, thread: str, user: str, action: str, outbox: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(SCRIPT), dsn, thread, user, action], capture_output=True, text=True,
                          env=dict(os.environ, AGENT_OUTBOX=str(outbox)), timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_human_approval_resumes_in_a_new_process(memory, dsn, tenant, tmp_path) -> None:
    thread = f"{tenant.session}-hitl"
    paused = play(dsn, thread, tenant.user, "start", tmp_path / "outbox")
    assert paused["interrupts"] and "send_email" in paused["interrupts"][0]
    assert paused["next"] and paused["sent"] == []

    resumed = play(dsn, thread, tenant.user, "approve", tmp_path / "outbox")
    assert [json.loads(s)["to"] for s in resumed["sent"]] == ["bob"]
    assert resumed["messages"][-1] == ["AIMessage", "done: email sent to bob"]
    assert resumed["next"] == [] and [m[0] for m in resumed["messages"]].count("HumanMessage") == 1


def test_model_failure_resumes_from_the_last_checkpoint(memory, tenant) -> None:
    model = ScriptedChatModel(script=["Recovered answer."], fail_times=1)
    agent = create_memory_agent(model, [], memory=memory)
    config = cfg(tenant.user, f"{tenant.session}-fail")
    with pytest.raises(RuntimeError, match="scripted model failure"):
        agent.invoke(ask("what is my name?"), config)
    result = agent.invoke(None, config)  # retry: the input is already checkpointed
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert result["messages"][-1].text == "Recovered answer."


def test_sync_and_async_share_one_agent(memory, tenant) -> None:
    memory.for_user(tenant.user).add("Works as a marine biologist in Bergen", memory_type="fact")

    def script(msgs):
        system = msgs[0].text if isinstance(msgs[0], SystemMessage) else ""
        return "biologist" if "marine biologist" in system else "unknown"

    agent = create_memory_agent(ScriptedChatModel(script=script), [], memory=memory)
    question = ask("what is my job again, do you remember?")
    answers = [agent.invoke(question, cfg(tenant.user, f"{tenant.session}-s"))["messages"][-1].text]
    for n in range(2):  # two event loops in a row
        result = asyncio.run(agent.ainvoke(question, cfg(tenant.user, f"{tenant.session}-a{n}")))
        answers.append(result["messages"][-1].text)

    async def streamed() -> str:
        chunks = [c async for c in agent.astream(question, cfg(tenant.user, f"{tenant.session}-as"),
                                                 stream_mode="values")]
        return chunks[-1]["messages"][-1].text

    answers.append(asyncio.run(streamed()))
    answers.append(list(agent.stream(question, cfg(tenant.user, f"{tenant.session}-ss"),
                                     stream_mode="values"))[-1]["messages"][-1].text)
    assert answers == ["biologist"] * 5


def test_summarization_in_the_stack_keeps_tool_pairs(memory, tenant) -> None:
    def script(msgs):
        if isinstance(msgs[-1], ToolMessage):
            return f"It is {msgs[-1].text}."
        return AIMessage("", tool_calls=[tool_call("weather", city="Rome"), tool_call("weather", city="Oslo")])

    model = ScriptedChatModel(script=script)
    agent = create_memory_agent(model, [weather], memory=memory, working_memory=False,
                                summarization={"trigger": ("messages", 8), "keep": ("messages", 4)})
    config = cfg(tenant.user, f"{tenant.session}-sum")
    for turn in range(5):
        agent.invoke(ask(f"weather report number {turn}, please"), config)
    state = agent.get_state(config).values["messages"]
    assert any(isinstance(m, HumanMessage) and m.additional_kwargs.get("lc_source") == "summarization"
               for m in state)
    for request in model.requests:
        called: set[str] = set()
        for m in request:
            if isinstance(m, AIMessage):
                called |= {c["id"] for c in m.tool_calls}
            if isinstance(m, ToolMessage):
                assert m.tool_call_id in called, "a tool result was sent without its tool call"


def test_bad_arguments(memory) -> None:
    with pytest.raises(ConfigurationError, match="model must be a LangChain chat model"):
        create_memory_agent("gpt-4o", [], memory=memory)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="interrupt_on needs a checkpointer"):
        create_memory_agent(ScriptedChatModel(script=["x"]), [], memory=memory, checkpointer=False,
                            interrupt_on={"weather": True})


def test_the_middlewares_knobs_in_one_call(memory, tenant) -> None:
    """``inject_when``, ``min_relevance``, ``profiles``... as on ``MemoryMiddleware`` (issue 31)."""
    me = memory.for_user(tenant.user)
    me.update_profile({"background": "Backend engineer."})
    team = f"team-{tenant.user}"
    memory.create_team(team, user_id=tenant.user)  # a team memory: not in the user's profile
    memory.for_user(tenant.user, team_id=team).add("The team holds standup at 10:00.", scope="team")

    def prompt(**options: Any) -> str:
        model = ScriptedChatModel(script=["ok"])
        agent = create_memory_agent(model, memory=memory, checkpointer=False, extraction=False, **options)
        agent.invoke(ask("What time is standup?"), cfg(tenant.user, f"{tenant.session}-{len(options)}"))
        return model.system_prompts[-1]

    def memories(text: str) -> str:  # the memory block, not the profile (which is there on every turn)
        return text[text.index("<long_term_memory>"):] if "<long_term_memory>" in text else ""

    default = prompt()
    assert memories(default) == "" and "Backend engineer." in default  # a generic turn: the profile only
    assert "standup at 10:00" in memories(prompt(inject_when="always"))  # every turn searched
    assert memories(prompt(inject_when="always", min_relevance=0.99)) == ""  # the floor still applies
    assert "Backend engineer." not in prompt(profiles=False)
    with pytest.raises(InvalidInputError, match="inject_when"):
        create_memory_agent(ScriptedChatModel(script=["x"]), memory=memory, checkpointer=False, inject_when="often")
    with pytest.raises(ConfigurationError, match="graph_tools must be True or False"):
        create_memory_agent(ScriptedChatModel(script=["x"]), memory=memory, checkpointer=False,
                            graph_tools="yes")  # type: ignore[arg-type]


async def test_with_an_async_memory_service(amemory, tenant) -> None:
    await amemory.for_user(tenant.user).add("Keeps bees on the balcony", memory_type="habit")
    model = ScriptedChatModel(script=["ok"])
    agent = create_memory_agent(model, [], memory=amemory)
    assert isinstance(agent.checkpointer, PostgresCheckpointer)
    config = cfg(tenant.user, f"{tenant.session}-async-service")
    await agent.ainvoke(ask("what hobby with insects do I have?"), config)
    assert "Keeps bees" in model.system_prompts[0]
    assert (await agent.aget_state(config)).values["messages"][-1].text == "ok"


def test_default_database_comes_from_the_environment(dsn, tenant, monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", dsn)
    model = ScriptedChatModel(script=["ok"])
    agent = create_memory_agent(model, [])  # memory=None: DATABASE_URL, as MemoryService() would
    config = cfg(tenant.user, f"{tenant.session}-env")
    agent.invoke(ask("remember nothing, just say ok"), config)
    with psycopg.connect(dsn) as conn:
        owner = conn.execute("SELECT user_id FROM checkpoint_thread_owner WHERE thread_id = %s",
                             (f"{tenant.session}-env",)).fetchone()
    assert owner == (tenant.user,)  # the checkpoint went to the same database
