"""The memory tools and a retriever for plain LangChain, outside a LangGraph run.

Inside an agent the tools read whose memory it is from the run (``ToolRuntime``); a plain
LangChain chain, an ``AgentExecutor`` or a direct ``tool.invoke(...)`` has no run to read it
from, and the runtime-taking tools failed there with ``ValidationError ... runtime Field
required``. Here the identity is given once, explicitly, when the tools or the retriever are
built (by your server code, never by the model), and every call acts as that principal.
The tool bodies, descriptions and error texts are the agent tools' own (:mod:`.tools`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, PrivateAttr

from agent_memory.db.requests import Op
from agent_memory.errors import InvalidInputError
from agent_memory.identity import IDENTITY_FIELDS
from agent_memory.models import Identity, SearchResult
from agent_memory.principal import PrincipalOps
from agent_memory.validation import check_identity

from .backend import MemoryBackend
from .tools import MemoryTypeArg, ScopeArg, Toolkit, bound_k, toolset

__all__ = ["FixedRun", "MemoryRetriever", "bound_memory_tools"]

#: what ``MemoryRetriever.search_kwargs`` and a call's keywords may set: the keywords of the
#: search itself (``k``, ``memory_type``, ``filter``...), read from it so the two never drift
_SEARCH_KEYWORDS = tuple(name for name, p in inspect.signature(PrincipalOps.search).parameters.items()
                         if p.kind is inspect.Parameter.KEYWORD_ONLY)
#: keywords LangChain's ``invoke`` reads itself and still passes on: not search settings
_RUN_KEYWORDS = ("verbose",)


def _search_keywords(given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``given`` if every key is a search keyword; else :class:`InvalidInputError` naming them."""
    unknown = set(given) - set(_SEARCH_KEYWORDS)
    if unknown:
        raise InvalidInputError(where, f"has keys search does not take: {sorted(unknown)}; use "
                                       f"{', '.join(_SEARCH_KEYWORDS)} (the ids are fields of their own)")
    return dict(given)


@dataclass(frozen=True)
class FixedRun:
    """What the tool bodies read from a ``ToolRuntime``, for one fixed identity and no tool call."""

    identity: Identity
    context: Any = None
    tool_call_id: str | None = None
    config: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", {"configurable": self.identity.kwargs()})


def bound_memory_tools(
    memory: Any = None, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
    team_id: str | None = None, org_id: str | None = None, max_k: int = 20,
) -> list[BaseTool]:
    """``memory_save``/``memory_search``/``memory_delete``/``memory_stats`` acting for one user.

    For plain LangChain (``tool.invoke({...})``, chains, any agent framework): the identity is
    fixed here and cannot come from the model. ``memory_tools(memory, user_id=...)`` returns these.
    Raises :class:`~agent_memory.errors.InvalidInputError` for a malformed id.
    """
    run = FixedRun(check_identity(user_id, project_id, session_id, team_id, org_id))
    kit = Toolkit(MemoryBackend.of(memory), max_k=max_k)

    def memory_save(content: str, memory_type: MemoryTypeArg = "fact", scope: ScopeArg = "user",
                    tags: list[str] | str | None = None) -> Any:
        return kit.run("memory_save", kit.save(run, content, memory_type, scope, tags), run)

    async def amemory_save(content: str, memory_type: MemoryTypeArg = "fact", scope: ScopeArg = "user",
                           tags: list[str] | str | None = None) -> Any:
        return await kit.arun("memory_save", kit.save(run, content, memory_type, scope, tags), run)

    def memory_search(query: str, k: int = 5, memory_type: MemoryTypeArg | None = None,
                      scope: ScopeArg | None = None, include_history: bool = False,
                      tags: list[str] | str | None = None) -> Any:
        return kit.run("memory_search", kit.search(run, query, k, memory_type, scope, include_history, tags), run)

    async def amemory_search(query: str, k: int = 5, memory_type: MemoryTypeArg | None = None,
                             scope: ScopeArg | None = None, include_history: bool = False,
                             tags: list[str] | str | None = None) -> Any:
        return await kit.arun("memory_search", kit.search(run, query, k, memory_type, scope, include_history, tags),
                              run)

    bound_k(max_k, memory_search, amemory_search)

    def memory_delete(memory_id: str) -> Any:
        return kit.run("memory_delete", kit.delete(run, memory_id), run)

    async def amemory_delete(memory_id: str) -> Any:
        return await kit.arun("memory_delete", kit.delete(run, memory_id), run)

    def memory_stats() -> Any:
        return kit.run("memory_stats", kit.stats(run), run)

    async def amemory_stats() -> Any:
        return await kit.arun("memory_stats", kit.stats(run), run)

    return toolset((memory_save, amemory_save), (memory_search, amemory_search), (memory_delete, amemory_delete),
                   (memory_stats, amemory_stats), config=kit.backend.known_config)


def _document(result: SearchResult) -> Document:
    item = result.item
    return Document(
        page_content=item.content, id=str(item.id),
        metadata={"id": str(item.id), "memory_type": str(item.memory_type.value), "scope": str(item.scope.value),
                  "scope_id": item.scope_id, "confidence": item.confidence, "score": result.score,
                  "created_at": item.created_at.isoformat()},
    )


class MemoryRetriever(BaseRetriever):
    """A LangChain retriever over one principal's memories (what they may see), ranked as
    ``MemoryHandle.search`` ranks them: ``MemoryRetriever(memory=service, user_id="alice", k=5)``.

    Each :class:`~langchain_core.documents.Document` is a memory: its content, and its id, type,
    scope, confidence, score and creation time in ``metadata``. Any other ``search`` keyword
    (``memory_type``, ``scope``, ``status``, ``filter``...) goes in ``search_kwargs``, and any of
    them, ``k`` too, may also be given per call: ``retriever.invoke("coffee", k=2, memory_type=
    "preference")`` (LangChain's retriever convention; the ids cannot, so a call never changes whose
    memories it reads). A key search does not take raises
    :class:`~agent_memory.errors.InvalidInputError`, and so does a bad value, when called.

    Works with a ``MemoryService`` or an ``AsyncMemoryService``: ``ainvoke`` awaits it, and a
    blocking ``invoke`` runs on its event loop from any thread but that loop's own
    (:mod:`agent_memory.sync_bridge`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any = None
    user_id: str
    project_id: str | None = None
    session_id: str | None = None
    team_id: str | None = None
    org_id: str | None = None
    k: int = 5
    search_kwargs: dict[str, Any] = {}
    _backend: MemoryBackend = PrivateAttr()
    _identity: Identity = PrivateAttr()

    def __init__(self, **fields: Any) -> None:
        # checked before pydantic sees them, so a bad id is our InvalidInputError naming the field
        identity = check_identity(*(fields.get(name) for name in IDENTITY_FIELDS))
        _search_keywords(fields.get("search_kwargs") or {}, "search_kwargs")
        super().__init__(**fields)
        self._identity = identity
        self._backend = MemoryBackend.of(self.memory)

    def _search(self, query: str, given: Mapping[str, Any]) -> Op[list[SearchResult]]:
        """The search op: the retriever's ``k`` and ``search_kwargs``, then the call's keywords."""
        per_call = _search_keywords({n: v for n, v in given.items() if n not in _RUN_KEYWORDS}, "invoke keywords")
        return self._backend.ops(self._identity).search(query, **{"k": self.k, **self.search_kwargs, **per_call})

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any,
    ) -> list[Document]:
        return [_document(r) for r in self._backend.run(self._search(query, kwargs))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any,
    ) -> list[Document]:
        return [_document(r) for r in await self._backend.arun(self._search(query, kwargs))]
