"""Memory in a hand-built StateGraph: the memory node, the tools in a ToolNode, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agent_memory import InvalidInputError, MissingIdentityError
from agent_memory.middleware import (
    MemoryContextState,
    memory_context_node,
    memory_tools,
    system_prompt_with_memory,
)
from agent_memory.testing import ScriptedChatModel, tool_call


def build_graph(memory: Any, model: ScriptedChatModel, **node_options: Any):
    """The example graph of docs/how-to/stategraph.md."""
    tools = memory_tools(memory)

    def llm(state: MemoryContextState) -> dict[str, Any]:
        system = system_prompt_with_memory("You are a helpful assistant.", state.get("memory_context"))
        return {"messages": [model.bind_tools(tools).invoke([SystemMessage(system), *state["messages"]])]}

    graph = StateGraph(MemoryContextState)
    graph.add_node("memory", memory_context_node(memory, **node_options))
    graph.add_node("llm", llm)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "memory")
    graph.add_edge("memory", "llm")
    graph.add_conditional_edges("llm", tools_condition)
    graph.add_edge("tools", "llm")
    return graph.compile()


def script(msgs):
    if isinstance(msgs[-1], ToolMessage):
        return f"tool said: {msgs[-1].text}"
    if "remember" in msgs[-1].text:
        return AIMessage("", tool_calls=[tool_call("memory_save", content="Prefers answers in Portuguese",
                                                   memory_type="preference")])
    return "answer"


def cfg(user: str, project: str | None = None) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "project_id": project, "thread_id": "g1"}}


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_memory_node_and_tool_node(memory, tenant, use_async: bool) -> None:
    memory.for_user(tenant.user, project_id=tenant.project).add("The project targets Python 3.12 only", scope="project", memory_type="constraint")
    memory.for_user(tenant.other_user).add("Other user: prefers answers in French")
    model = ScriptedChatModel(script=script)
    graph = build_graph(memory, model)

    def run(text: str, user: str) -> dict[str, Any]:
        inputs, config = {"messages": [("user", text)]}, cfg(user, tenant.project)
        return asyncio.run(graph.ainvoke(inputs, config)) if use_async else graph.invoke(inputs, config)

    first = run("please remember that I prefer answers in Portuguese", tenant.user)
    assert first["messages"][-1].text.startswith("tool said: Saved memory")
    assert "Python 3.12" in first["memory_context"]
    assert "Python 3.12" in model.system_prompts[0]

    second = run("in which language and Python version should you answer?", tenant.user)
    assert "Prefers answers in Portuguese" in second["memory_context"]
    assert "Prefers answers in Portuguese" in model.system_prompts[-1]
    assert "French" not in second["memory_context"]

    outsider = run("in which language and Python version should you answer?", tenant.other_user)
    assert "Portuguese" not in outsider["memory_context"] and "French" in outsider["memory_context"]


def test_node_without_user(memory) -> None:
    graph = build_graph(memory, ScriptedChatModel(script=script))
    with pytest.raises(MissingIdentityError):
        graph.invoke({"messages": [("user", "hi")]})
    quiet = build_graph(memory, ScriptedChatModel(script=script), require_user=False)
    assert quiet.invoke({"messages": [("user", "hi")]})["memory_context"] == ""


def test_node_settings_are_validated(memory) -> None:
    with pytest.raises(InvalidInputError, match="k: must be between 1 and 50"):
        memory_context_node(memory, k=99)


def test_system_prompt_with_memory() -> None:
    assert system_prompt_with_memory("Be brief.", "") == "Be brief."
    assert system_prompt_with_memory("Be brief.", "<m/>") == "Be brief.\n\n<m/>"
    assert system_prompt_with_memory("", "<m/>") == "<m/>"
