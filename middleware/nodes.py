"""Memory for a hand-built LangGraph ``StateGraph``.

``create_agent`` users get everything from :class:`MemoryMiddleware`. Users
with their own graph add :func:`memory_context_node` in front of their LLM
node: it writes the same profile + memories text into ``state["memory_context"]``,
and their LLM node puts it into its system prompt with :func:`system_prompt_with_memory`.
The tools from :func:`~agent_memory.middleware.memory_tools` work in a
``ToolNode`` unchanged. Example::

    class State(MessagesState):
        memory_context: str

    def llm(state: State):
        system = system_prompt_with_memory("You are a helpful assistant.", state["memory_context"])
        return {"messages": [model.invoke([SystemMessage(system), *state["messages"]])]}

    graph = StateGraph(State)
    graph.add_node("memory", memory_context_node(memory))
    graph.add_node("llm", llm)
    graph.add_node("tools", ToolNode(memory_tools(memory)))
    graph.add_edge(START, "memory")
    graph.add_edge("memory", "llm")
    graph.add_conditional_edges("llm", tools_condition)
    graph.add_edge("tools", "llm")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import MessagesState

from .backend import MemoryBackend, MemoryLike
from .context import ContextBuilder
from .identity import identity_from

__all__ = ["MemoryContextState", "memory_context_node", "system_prompt_with_memory"]

class MemoryContextState(MessagesState):
    """``MessagesState`` plus the text :func:`memory_context_node` writes."""

    memory_context: NotRequired[str]


def system_prompt_with_memory(instructions: str, memory_context: str | None) -> str:
    """Your system prompt followed by the memory context (when there is any)."""
    if not memory_context:
        return instructions
    return f"{instructions}\n\n{memory_context}" if instructions else memory_context


def _field(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)


def memory_context_node(
    memory: MemoryLike | MemoryBackend = None, *, k: int = 6, budget_chars: int | None = None,
    min_relevance: float | None = None, require_user: bool = True, messages_key: str = "messages",
    output_key: str = "memory_context", inject_when: str | None = None,
) -> Runnable[Any, dict[str, str]]:
    """A graph node (sync and async) that looks up the memories relevant to ``state[messages_key]``
    for the run's user/project/session and returns ``{output_key: text}`` (``""`` when none).
    Identity comes from the run's config or context, as for the middleware; ``inject_when`` and
    ``min_relevance`` as for :class:`MemoryMiddleware`."""
    builder = ContextBuilder(MemoryBackend.of(memory), k=k, budget_chars=budget_chars, min_relevance=min_relevance,
                             inject_when=inject_when)

    def identity(config: RunnableConfig) -> Any:
        return identity_from(config, required=require_user)  # the context is read from the config's runtime

    def lookup(state: Any, config: RunnableConfig) -> dict[str, str]:
        who = identity(config)
        if who is None:
            return {output_key: ""}
        context = builder.build(who, _field(state, messages_key) or [])
        return {output_key: context.text if context else ""}

    async def alookup(state: Any, config: RunnableConfig) -> dict[str, str]:
        who = identity(config)
        if who is None:
            return {output_key: ""}
        context = await builder.abuild(who, _field(state, messages_key) or [])
        return {output_key: context.text if context else ""}

    return RunnableLambda(lookup, afunc=alookup, name="memory_context")
