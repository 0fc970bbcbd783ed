"""``enable_memory=False`` (the specification's switch) on the agent factory and the middleware:
no injection, no memory tools, no extraction, and the memory database is never touched."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from agent_memory import ConfigurationError, DatabaseUnavailableError
from agent_memory.middleware import ExtractionMiddleware, MemoryMiddleware, create_memory_agent
from agent_memory.middleware.agent import memory_middleware_stack
from agent_memory.testing import ScriptedChatModel, tool_call

#: nothing listens here: any attempt to open the memory would fail the run
NOWHERE = "postgresql://agent:none@127.0.0.1:9/nowhere?connect_timeout=1"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def cfg(user: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "thread_id": thread, "session_id": thread}}


def ask(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


def weather_script(msgs: list[Any]) -> AIMessage | str:
    if isinstance(msgs[-1], ToolMessage):
        return "It is sunny."
    return AIMessage("", tool_calls=[tool_call("weather", city="Oslo")])


def _tool_names(agent: Any) -> set[str]:
    return set(agent.nodes["tools"].bound.tools_by_name)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_the_factory_without_memory_never_opens_the_database(use_async, tenant) -> None:
    model = ScriptedChatModel(script=weather_script)
    agent = create_memory_agent(model, [weather], memory=NOWHERE, system_prompt="base", enable_memory=False)
    assert agent.checkpointer is None  # the default checkpointer lives in the memory database
    assert "weather" in _tool_names(agent) and not any(n.startswith("memory_") for n in _tool_names(agent))
    message = ask("I am a frontend engineer; remember that. What's the weather in Oslo?")
    config = cfg(tenant.user, tenant.session)
    result = await agent.ainvoke(message, config) if use_async else agent.invoke(message, config)
    assert result["messages"][-1].text == "It is sunny."
    assert all(p.startswith("base") and "long_term_memory" not in p and "profile" not in p for p in model.system_prompts)


def test_the_factory_without_memory_learns_nothing_and_keeps_a_given_checkpointer(memory, tenant) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    model = ScriptedChatModel(script=["Noted."])
    agent = create_memory_agent(model, memory=memory, checkpointer=saver, enable_memory=False)
    assert agent.checkpointer is saver
    agent.invoke(ask("Remember that I prefer dark mode in every editor."), cfg(tenant.user, tenant.session))
    assert memory.for_user(tenant.user).stats().total == 0
    # with memory on (the default), the same turn is learned
    on = create_memory_agent(ScriptedChatModel(script=["Noted."]), memory=memory, checkpointer=False)
    on.invoke(ask("Remember that I prefer dark mode in every editor."), cfg(tenant.user, tenant.session))
    assert memory.for_user(tenant.user).stats().total >= 1


def test_the_stack_without_memory_has_no_long_term_middleware() -> None:
    stack = memory_middleware_stack(None, NOWHERE, summarization=False, enable_memory=False)
    assert stack and not any(isinstance(m, (MemoryMiddleware, ExtractionMiddleware)) for m in stack)
    with pytest.raises(DatabaseUnavailableError):  # on, the same stack opens the memory (and fails here)
        memory_middleware_stack(None, NOWHERE, summarization=False)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_middlewares_switched_off_do_nothing_and_open_nothing(use_async, tenant) -> None:
    memory_mw = MemoryMiddleware(NOWHERE, enable_memory=False)
    extraction_mw = ExtractionMiddleware(NOWHERE, enable_memory=False, mode="inline")
    assert memory_mw.tools == []
    model = ScriptedChatModel(script=["ok"])
    agent = create_agent(model, [], system_prompt="base", middleware=[memory_mw, extraction_mw])
    message, config = ask("I live in Lisbon."), cfg(tenant.user, tenant.session)
    if use_async:
        await agent.ainvoke(message, config)
    else:
        agent.invoke(message, config)
    assert model.system_prompts == ["base"] and list(extraction_mw.reports) == []
    assert memory_mw.backend._sync is None and extraction_mw.backend._sync is None  # never opened


def test_enable_memory_must_be_a_bool() -> None:
    model = ScriptedChatModel(script=["ok"])
    with pytest.raises(ConfigurationError, match="enable_memory must be True or False"):
        create_memory_agent(model, memory=NOWHERE, enable_memory="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="enable_memory must be True or False"):
        ExtractionMiddleware(NOWHERE, enable_memory=1)  # type: ignore[arg-type]
