"""LangChain middleware, LangGraph nodes and tools for agent-memory (``agent_memory.middleware``).

- :func:`create_memory_agent`: an agent with all four memory layers in one call.
- :class:`MemoryMiddleware`: long-term memory (profiles and memories) for any ``create_agent`` agent.
- :class:`ExtractionMiddleware`: learns memories from each run (inline or in the background).
- :func:`memory_tools`: ``memory_save``/``memory_search``/``memory_delete``/``memory_stats``
  (with ``user_id=``: for plain LangChain); :class:`MemoryRetriever`: a retriever over memories.
- :func:`graph_tools`: ``memory_explore``/``memory_traverse`` over the knowledge graph.
- :func:`memory_context_node`: the same context for a hand-built ``StateGraph``.
- :class:`WorkingMemoryMiddleware`: per-invocation todos, notes and tool-call log.
- :func:`short_term_memory`: summarization of long threads that never orphans a tool result.
"""

from .agent import create_memory_agent, memory_middleware_stack
from .backend import MemoryBackend
from .context import MemoryContext, build_query, render_context
from .extraction import ExtractionMiddleware
from .identity import identity_from
from .memory import MemoryMiddleware, MemoryState
from .plain import MemoryRetriever, bound_memory_tools
from .nodes import MemoryContextState, memory_context_node, system_prompt_with_memory
from .short_term import (
    ToolPairGuard,
    extractive_summary,
    repair_tool_pairs,
    short_term_memory,
)
from .tools import TOOL_NAMES, memory_tools
from .graph_tools import GRAPH_TOOL_NAMES, graph_tools
from .working import WorkingMemoryMiddleware, WorkingMemoryState

__all__ = [
    "GRAPH_TOOL_NAMES",
    "TOOL_NAMES",
    "ExtractionMiddleware",
    "MemoryBackend",
    "MemoryContext",
    "MemoryContextState",
    "MemoryMiddleware",
    "MemoryRetriever",
    "MemoryState",
    "ToolPairGuard",
    "WorkingMemoryMiddleware",
    "WorkingMemoryState",
    "bound_memory_tools",
    "build_query",
    "create_memory_agent",
    "extractive_summary",
    "graph_tools",
    "identity_from",
    "memory_context_node",
    "memory_middleware_stack",
    "memory_tools",
    "render_context",
    "repair_tool_pairs",
    "short_term_memory",
    "system_prompt_with_memory",
]
