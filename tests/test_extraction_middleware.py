"""ExtractionMiddleware: an agent that learns from its own conversations, inline or in the background."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent_memory import MemoryConfig, MemoryService
from agent_memory.errors import ConfigurationError
from agent_memory.middleware import (
    ExtractionMiddleware,
    MemoryMiddleware,
    create_memory_agent,
)
from agent_memory.testing import ScriptedChatModel, tool_call


def cfg(user: str | None, thread: str, project: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread}
    if user is not None:
        configurable["user_id"] = user
    if project is not None:
        configurable["project_id"] = project
    return {"configurable": configurable}


def say(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


def agent_with(memory: Any, model: ScriptedChatModel | None = None, **extraction: Any) -> tuple[Any, Any, Any]:
    """(agent, model, extraction middleware) with a checkpointer, so turns of a thread add up."""
    model = model or ScriptedChatModel(script=lambda messages: "ok")
    mw = ExtractionMiddleware(memory, **{"llm": None, **extraction})
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory), mw], checkpointer=InMemorySaver())
    return agent, model, mw


def contents(memory: Any, user: str, **ids: Any) -> list[str]:
    return sorted(m.content for m in memory.for_user(user, **ids).list())


def test_inline_extraction_learns_before_invoke_returns(memory: MemoryService, tenant) -> None:
    agent, model, mw = agent_with(memory)
    config = cfg(tenant.user, tenant.session)
    result = agent.invoke(say("I prefer concise answers."), config)
    assert result["messages"][-1].text == "ok"
    assert contents(memory, tenant.user) == ["Prefers concise answers."]
    [report] = mw.reports
    assert report.status == "done" and report.extractor == "rules" and report.profiles_rebuilt == ("user",)
    [item] = memory.for_user(tenant.user).list()
    assert item.source.value == "conversation"
    source = memory.for_user(tenant.user).source(item.id)
    assert source.session_id == tenant.session and "user: I prefer concise answers." in source.content
    assert "assistant: ok" in source.content

    # the next turn is answered with the profile, then the memory, in the system prompt
    agent.invoke(say("What do you remember about how I like my answers?"), config)
    prompt = model.system_prompts[-1]
    assert "<user_profile>" in prompt and "Communication style: concise" in prompt
    assert "<long_term_memory>" in prompt and "Prefers concise answers." in prompt
    assert prompt.index("<user_profile>") < prompt.index("<long_term_memory>")
    assert mw.reports[-1].status == "done" and not mw.reports[-1].outcomes  # a question: nothing to learn
    assert contents(memory, tenant.user) == ["Prefers concise answers."]


def test_every_n_waits_for_the_nth_user_turn(memory: MemoryService, tenant) -> None:
    direct = memory.for_user(tenant.user, session_id=tenant.other_session).extract(["I own a canoe."], llm=None, min_new_turns=2)
    assert direct.status == "waiting"
    agent, _, mw = agent_with(memory, every=2)
    config = cfg(tenant.user, tenant.session)
    agent.invoke(say("I live in Lisbon."), config)
    # a new session of the user starts: the turn that waited in the other one is read first
    assert [r.status for r in mw.reports] == ["done", "waiting"]
    assert contents(memory, tenant.user) == ["Owns a canoe."]
    assert memory.for_user(tenant.user, session_id=tenant.session).extraction_budget() == 3  # waiting costs nothing
    agent.invoke(say("I use Neovim."), config)
    assert [r.status for r in mw.reports] == ["done", "waiting", "done"]
    assert contents(memory, tenant.user) == ["Lives in Lisbon.", "Owns a canoe.", "Uses Neovim."]
    agent.invoke(say("I am a nurse."), config)
    assert mw.reports[-1].status == "waiting" and mw.reports[-1].waiting_turns == 2  # the answer waits with it
    assert memory.for_user(tenant.user, session_id=tenant.session).extraction_budget() == 2
    mw.close()  # nothing is left behind: what waits is read when the middleware closes
    assert "Is a nurse." in contents(memory, tenant.user)


def test_background_extraction_is_flushed(memory: MemoryService, tenant) -> None:
    seen: list[Any] = []
    agent, _, mw = agent_with(memory, mode="background", on_report=seen.append)
    assert mw.mode == "background"
    agent.invoke(say("I prefer answers with code examples."), cfg(tenant.user, tenant.session))
    assert mw.flush(timeout=30)
    assert contents(memory, tenant.user) == ["Prefers answers with code examples."]
    assert [r.status for r in seen] == ["done"] and list(mw.reports) == seen
    mw.close()
    assert mw.flush(timeout=1)


def test_mode_off_learns_nothing(memory: MemoryService, tenant) -> None:
    agent, model, mw = agent_with(memory, mode="off")
    agent.invoke(say("I prefer concise answers."), cfg(tenant.user, tenant.session))
    assert model.requests and not mw.reports
    assert memory.for_user(tenant.user).list() == []
    assert memory.for_user(tenant.user).list_resources() == []


def test_without_a_user_nothing_happens(memory: MemoryService, tenant) -> None:
    model = ScriptedChatModel(script=lambda messages: "ok")
    mw = ExtractionMiddleware(memory, llm=None)
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory, require_user=False), mw],
                         checkpointer=InMemorySaver())
    result = agent.invoke(say("I prefer concise answers."), cfg(None, tenant.session))
    assert result["messages"][-1].text == "ok"
    assert not mw.reports
    assert "<long_term_memory>" not in model.system_prompts[-1]


def test_extraction_middleware_settings_are_checked(memory: MemoryService) -> None:
    for kwargs in ({"mode": "sometimes"}, {"every": 0}, {"every": True}, {"on_report": "print"}):
        with pytest.raises(ConfigurationError):
            ExtractionMiddleware(memory, **kwargs)


@pytest.fixture
def limited(dsn: str, embeddings) -> Iterator[MemoryService]:
    with MemoryService(dsn, config=MemoryConfig(max_extractions=1), embeddings=embeddings) as service:
        yield service


def test_turns_beyond_the_budget_wait_for_the_next_allowed_run(limited: MemoryService, dsn: str, tenant,
                                                                caplog) -> None:
    """One run in the window: it is kept for the end of the thread; turns after it wait for the
    next run the limit allows, logged once, counted, and none dropped."""
    agent, _, mw = agent_with(limited)
    config = cfg(tenant.user, tenant.session)
    agent.invoke(say("I live in Lisbon."), config)
    agent.invoke(say("I use Neovim."), config)
    assert [r.status for r in mw.reports] == ["waiting", "waiting"]  # the only run is kept for the end
    mw.close()  # the thread ends: one run reads both turns
    assert mw.reports[-1].status == "done" and mw.reports[-1].runs_left == 0
    assert contents(limited, tenant.user) == ["Lives in Lisbon.", "Uses Neovim."]

    with caplog.at_level("WARNING", logger="agent_memory"):
        agent.invoke(say("I am a nurse."), config)
        agent.invoke(say("I speak Portuguese."), config)
    assert [r.status for r in list(mw.reports)[-2:]] == ["rate_limited", "rate_limited"]
    assert mw.reports[-1].waiting_turns == 4 and "MEMORY_MAX_EXTRACTIONS" in mw.reports[-1].error
    assert "4 messages waiting" in mw.reports[-1].summary()
    warned = [r for r in caplog.records if "MEMORY_MAX_EXTRACTIONS" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"  # once per session
    stats = limited.for_user(tenant.user, session_id=tenant.session).stats()
    assert stats.extraction_waits == 2 and stats.turns_waiting == 4 and stats.extractions_remaining == 0
    assert contents(limited, tenant.user) == ["Lives in Lisbon.", "Uses Neovim."]

    # another session has its own budget
    agent.invoke(say("I own a bicycle."), cfg(tenant.user, tenant.other_session))
    mw.close()
    assert "Owns a bicycle." in contents(limited, tenant.user)

    # the window passes: the next run reads every turn that waited, none dropped
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE memory_extraction_runs SET created_at = now() - interval '25 hours'"
                     " WHERE user_id = %s AND session_id = %s", (tenant.user, tenant.session))
    agent.invoke(say("Thanks!"), config)
    mw.close()
    assert contents(limited, tenant.user) == ["Is a nurse.", "Lives in Lisbon.", "Owns a bicycle.",
                                              "Speaks Portuguese.", "Uses Neovim."]
    assert limited.for_user(tenant.user, session_id=tenant.session).stats().turns_waiting == 0


async def test_ainvoke_learns_too(memory: MemoryService, tenant) -> None:
    agent, model, mw = agent_with(memory)
    config = cfg(tenant.user, tenant.session, project=tenant.project)
    await agent.ainvoke(say("We decided to use PostgreSQL because it has pgvector."), config)
    assert mw.reports[-1].status == "done"
    assert contents(memory, tenant.user, project_id=tenant.project) == [
        "The team decided to use PostgreSQL because it has pgvector."]
    await agent.ainvoke(say("Which database did we pick?"), config)
    prompt = model.system_prompts[-1]
    assert "<project_profile>" in prompt and "The team decided to use PostgreSQL" in prompt


async def test_background_with_ainvoke(memory: MemoryService, tenant) -> None:
    agent, _, mw = agent_with(memory, mode="background")
    await agent.ainvoke(say("I prefer plain text answers."), cfg(tenant.user, tenant.session))
    assert await mw.aflush(timeout=30)
    assert contents(memory, tenant.user) == ["Prefers plain text answers."]


def _fails_once() -> Any:
    calls: list[int] = []

    def extract(messages: list[Any]) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return {"memories": [
            {"content": "Prefers concise answers.", "memory_type": "preference", "scope": "user", "confidence": 0.95},
            {"content": "Lives in Porto.", "memory_type": "fact", "scope": "user", "confidence": 0.95}]}

    return extract


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_failing_extraction_model_never_breaks_the_agent(memory: MemoryService, tenant, use_async) -> None:
    llm = ScriptedChatModel(structured={"ExtractedMemories": _fails_once(), "UserProfileUpdate": [{}]})
    agent, _, mw = agent_with(memory, llm=llm)
    config = cfg(tenant.user, tenant.session)

    async def turn(text: str) -> Any:
        return await agent.ainvoke(say(text), config) if use_async else agent.invoke(say(text), config)

    result = await turn("I prefer concise answers.")
    assert result["messages"][-1].text == "ok"
    [report] = mw.reports
    assert report.status == "failed" and "boom" in report.error and report.extractor.startswith("llm:")
    assert memory.for_user(tenant.user).list() == []
    # the messages wait: the next run reads them again, with what was said since
    await turn("I also live in Porto.")
    assert mw.reports[-1].status == "done"
    [_, (_, messages)] = [r for r in llm.structured_requests if r[0] == "ExtractedMemories"]
    assert "I prefer concise answers." in messages[-1].text and "I also live in Porto." in messages[-1].text
    assert contents(memory, tenant.user) == ["Lives in Porto.", "Prefers concise answers."]


def test_create_memory_agent_extracts_by_default(memory: MemoryService, tenant) -> None:
    model = ScriptedChatModel(script=lambda messages: "ok")
    agent = create_memory_agent(model, memory=memory, checkpointer=False)
    agent.invoke(say("I prefer concise answers."), cfg(tenant.user, tenant.session))
    assert contents(memory, tenant.user) == ["Prefers concise answers."]
    off = create_memory_agent(model, memory=memory, checkpointer=False, extraction=False)
    off.invoke(say("I live in Lisbon."), cfg(tenant.other_user, tenant.session))
    assert memory.for_user(tenant.other_user).list() == []


def test_memory_search_with_history_marks_what_is_no_longer_true(memory: MemoryService, tenant) -> None:
    old = memory.for_user(tenant.user).add("Uses Vim as their editor.")
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(["I switched from Vim to VS Code."], llm=None)
    [outcome] = report.superseded
    new = outcome.memory

    calls = [tool_call("memory_search", query="which code editor", k=5, include_history=True),
             tool_call("memory_search", query="which code editor", k=5)]
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), "done"])
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory)])
    result = agent.invoke(say("What editor did I use before?"), cfg(tenant.user, tenant.other_session))
    by_id = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    with_history, current = by_id[calls[0]["id"]], by_id[calls[1]["id"]]
    assert with_history.status == "success" and current.status == "success"
    [old_line] = [line for line in with_history.text.splitlines() if str(old.id) in line]
    assert "Uses Vim as their editor." in old_line
    assert "[no longer true: replaced on" in old_line and str(new.id) in old_line
    [new_line] = [line for line in with_history.text.splitlines() if str(new.id) in line and line != old_line]
    assert "no longer true" not in new_line
    assert str(old.id) not in current.text and str(new.id) in current.text


def test_create_memory_agent_extracts_with_the_agents_own_model_by_default(memory: MemoryService, tenant) -> None:
    # "Rex, my dog, barked all night" states nothing the rules know; a real model does
    rex = {"memories": [{"content": "Has a dog named Rex.", "memory_type": "fact", "scope": "user",
                         "confidence": 0.9}]}
    model = ScriptedChatModel(script=lambda messages: "ok", structured={
        "ExtractedMemories": [rex], "UserProfileUpdate": [{}], "ConsolidationDecisions": [{"decisions": []}]})
    agent = create_memory_agent(model, memory=memory, checkpointer=False)
    agent.invoke(say("Rex, my dog, barked all night."), cfg(tenant.user, tenant.session))
    assert contents(memory, tenant.user) == ["Has a dog named Rex."]
    assert [name for name, _ in model.structured_requests][0] == "ExtractedMemories"
    # asked for the rules, the same model is not asked, and the sentence teaches nothing
    rules = create_memory_agent(model, memory=memory, checkpointer=False, extraction_llm=None)
    asked = len(model.structured_requests)
    rules.invoke(say("Rex, my dog, barked all night."), cfg(tenant.other_user, tenant.session))
    assert len(model.structured_requests) == asked and memory.for_user(tenant.other_user).list() == []


def test_the_default_extractor_is_named_and_falls_back_to_rules(memory: MemoryService, tenant) -> None:
    from agent_memory.middleware.agent import extraction_model
    from agent_memory.middleware.backend import MemoryBackend
    from agent_memory.service import SERVICE_LLM

    backend = MemoryBackend.of(memory)
    capable = ScriptedChatModel(script=["ok"], structured={"ExtractedMemories": [{"memories": []}]})
    plain = ScriptedChatModel(script=["ok"])  # no structured output: like a model without tool calling
    assert extraction_model(capable, backend) is capable
    assert extraction_model(plain, backend) is None
    assert extraction_model(capable, backend, None) is None
    assert extraction_model(plain, backend, capable) is capable
    configured = MemoryService(memory.conn, config=memory.config, embeddings=memory.embeddings, llm=capable)
    assert extraction_model(plain, MemoryBackend.of(configured)) is SERVICE_LLM
    # and the run's report says which one learned
    agent, _, mw = agent_with(memory, llm=extraction_model(plain, backend))
    agent.invoke(say("I prefer concise answers."), cfg(tenant.user, tenant.session))
    assert mw.reports[-1].extractor == "rules"
