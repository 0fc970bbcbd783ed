"""LangGraph's ``BaseStore`` over agent-memory: :class:`AgentMemoryStore`.

``create_agent(model, tools, store=AgentMemoryStore(memory))``: what LangGraph code and
langmem's tools save through the store is a memory like any other (injected by
``MemoryMiddleware``, found by ``memory_search``), and the reverse. Namespaces map to levels
of memory (:data:`NAMESPACE_ROOTS`): ``("memories", user_id, ...)``, ``("sessions",
session_id, ...)``, ``("projects", project_id, ...)``, ``("teams", team_id, ...)``,
``("orgs", org_id, ...)``.
"""

from .namespaces import NAMESPACE_ROOTS, InvalidNamespaceError
from .store import AgentMemoryStore

__all__ = ["NAMESPACE_ROOTS", "AgentMemoryStore", "InvalidNamespaceError"]
