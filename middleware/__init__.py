"""LangChain ``AgentMiddleware`` and LangGraph nodes for agent-memory (``agent_memory.middleware``).

The memory middleware, the four memory tools and the LangGraph nodes arrive
with the integration work; this package exists now so that the import path
``agent_memory.middleware`` is stable from the first release.
"""

__all__: list[str] = []
