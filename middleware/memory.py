"""``MemoryMiddleware``: long-term memory for any ``create_agent`` agent.

Before each model call it decides whether the user's turn needs memory
(:mod:`agent_memory.relevance`), finds the memories relevant to it for the
run's user, project and session (those over the relevance floor), and appends
them, after the user's and the project's profile, to the system prompt of
that one request. The lookup runs in ``before_model`` so that its
key (who asked, which turn, which memory writes since) can be kept in
private graph state: the next model call of the same turn reuses the result
unless a memory tool wrote something in between. The rendered text itself
stays in this process (a small LRU by key), never in the checkpoint, so a
memory deleted later does not live on in old threads; a process that does
not have the text (a resumed run) simply looks again.
It also contributes the four memory tools.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.embeddings import Embeddings
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent_memory.config import MemoryConfig
from agent_memory.errors import AgentMemoryError, ConfigurationError, InvalidInputError
from agent_memory.models import Identity

from .backend import MemoryBackend, MemoryLike
from .context import ContextBuilder, MemoryContext
from .identity import identity_from
from .prompting import with_section
from .toolless import without_tools
from .tools import memory_tools

__all__ = ["MemoryMiddleware", "MemoryState"]

logger = logging.getLogger(__name__)

class MemoryState(AgentState[Any]):
    """The agent state MemoryMiddleware adds: the key and memory ids of the last lookup,
    private to the middleware (not part of the agent's input or output schema)."""

    memory_context: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class _Texts:
    """Rendered memory blocks by lookup key, the most recent ``size`` of them (thread-safe)."""

    def __init__(self, size: int = 4096) -> None:
        self._items: OrderedDict[str, str] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str | None) -> str | None:
        with self._lock:
            if key is None or key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: str, text: str) -> None:
        with self._lock:
            self._items[key] = text
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class MemoryMiddleware(AgentMiddleware[MemoryState, Any]):
    """Long-term memory for a LangChain agent: ``create_agent(model, tools, middleware=[MemoryMiddleware()])``.

    memory: a :class:`~agent_memory.MemoryService` (works with invoke and ainvoke), an
        :class:`~agent_memory.AsyncMemoryService` (ainvoke; invoke too, from any thread but its
        event loop's), a database URL, or ``None`` for ``DATABASE_URL``/the embedded PostgreSQL,
        opened on first use.
    k: how many memories to inject per model call, at most. budget_chars: size limit of the injected
        text (default ``config.prompt_budget_chars``). min_relevance: leave out weaker matches
        (default ``config.inject_min_relevance``).
    inject_when: when to look for memories: ``"rules"`` (only on turns that refer to the user, their
        people, past, decisions or projects; "Explain quantum entanglement simply." gets none),
        ``"model"`` (the service's chat model decides), ``"always"``; default ``config.inject_when``.
        Profiles are injected on every turn, within ``config.profile_budget_tokens`` each.
    enable_memory: ``False`` turns off injection and the tools (the agent runs as if without it).
    require_user: a run without a ``user_id`` raises :class:`~agent_memory.MissingIdentityError`
        (default); ``False`` runs it without memory instead.
    tools: add the four memory tools (default); ``False`` for injection only. A model that cannot
        call tools (``bind_tools`` raises ``NotImplementedError``, as ``GenericFakeChatModel``'s
        does) gets the memory without the tools, and one warning in the log.
    fail_open: if the database or embedder fails, log a warning and answer without memory
        instead of failing the run (default ``False``: failures surface).
    graph_tools: also add ``memory_explore`` and ``memory_traverse`` over the user's knowledge
        graph (default ``False``).
    profiles: inject the user profile and (with a ``project_id``) the project profile before the
        memories (default); ``False`` injects the memories only.
    """

    state_schema = MemoryState

    def __init__(
        self, memory: MemoryLike | MemoryBackend = None, *, config: MemoryConfig | None = None,
        embeddings: Embeddings | None = None, k: int = 6, budget_chars: int | None = None,
        min_relevance: float | None = None, enable_memory: bool = True, require_user: bool = True,
        tools: bool = True, fail_open: bool = False, profiles: bool = True, inject_when: str | None = None,
        graph_tools: bool = False,
    ) -> None:
        super().__init__()
        for name, flag in (("enable_memory", enable_memory), ("require_user", require_user),
                           ("tools", tools), ("fail_open", fail_open), ("profiles", profiles),
                           ("graph_tools", graph_tools)):
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{name} must be True or False, got {flag!r}")
        self.backend = MemoryBackend.of(memory, config=config, embeddings=embeddings)
        self.builder = ContextBuilder(self.backend, k=k, budget_chars=budget_chars, min_relevance=min_relevance,
                                      profiles=profiles, inject_when=inject_when)
        self.enable_memory = enable_memory
        self.require_user = require_user
        self.fail_open = fail_open
        self.tools = memory_tools(self.backend) if (enable_memory and tools) else []
        if enable_memory and tools and graph_tools:  # memory_explore and memory_traverse
            from .graph_tools import graph_tools as knowledge_graph_tools

            self.tools += knowledge_graph_tools(self.backend)
        self._texts = _Texts()

    # --- lookup (before_model) ----------------------------------------------------------------

    def _identity(self, runtime: Runtime[Any]) -> Identity | None:
        if not self.enable_memory:
            return None
        try:
            config = get_config()
        except RuntimeError:  # outside a runnable context (called directly in a test)
            config = {}
        return identity_from(config, runtime.context, required=self.require_user)

    def _known_key(self, state: Mapping[str, Any]) -> str | None:
        """The key of the last lookup, if its text is still at hand (else look again)."""
        cached = state.get("memory_context")
        key = cached.get("key") if cached else None
        return key if self._texts.get(key) is not None else None

    def _failed(self, exc: Exception) -> dict[str, Any]:
        if not self.fail_open or isinstance(exc, (ConfigurationError, InvalidInputError)):
            raise exc
        logger.warning("memory lookup failed, answering without memory: %s", exc)
        return {"memory_context": None}

    def _update(self, context: MemoryContext | None) -> dict[str, Any] | None:
        if context is None:
            return None
        self._texts.put(context.key, context.text)
        return {"memory_context": {"key": context.key, "memory_ids": list(context.memory_ids)}}

    def before_model(self, state: MemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        identity = self._identity(runtime)
        if identity is None:
            return {"memory_context": None} if state.get("memory_context") else None
        try:
            return self._update(self.builder.build(identity, state["messages"], known_key=self._known_key(state)))
        except AgentMemoryError as exc:
            return self._failed(exc)

    async def abefore_model(self, state: MemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        identity = self._identity(runtime)
        if identity is None:
            return {"memory_context": None} if state.get("memory_context") else None
        try:
            context = await self.builder.abuild(identity, state["messages"], known_key=self._known_key(state))
        except AgentMemoryError as exc:
            return self._failed(exc)
        return self._update(context)

    # --- injection (wrap_model_call) ----------------------------------------------------------

    def _text(self, request: ModelRequest[Any]) -> tuple[str | None, bool]:
        """The block to inject, and whether it has to be looked up again: the lookup's key is in
        the state but its text left this process's cache (evicted under heavy load)."""
        cached = request.state.get("memory_context")
        if not isinstance(cached, Mapping) or not cached:
            return None, False
        text = self._texts.get(cached.get("key"))
        return text, text is None

    def _relooked(self, context: MemoryContext | None) -> str | None:
        if context is None:
            return None
        self._texts.put(context.key, context.text)
        return context.text

    def _inject(self, request: ModelRequest[Any], text: str | None) -> ModelRequest[Any]:
        request = without_tools(request, self.tools)  # a model without tool calling: memory, no tools
        if not text:
            return request
        return request.override(system_message=with_section(request.system_message, text))

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        text, again = self._text(request)
        identity = self._identity(request.runtime) if again else None
        if identity is not None:
            try:
                text = self._relooked(self.builder.build(identity, request.state["messages"]))
            except AgentMemoryError as exc:
                self._failed(exc)
        return handler(self._inject(request, text))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        text, again = self._text(request)
        identity = self._identity(request.runtime) if again else None
        if identity is not None:
            try:
                text = self._relooked(await self.builder.abuild(identity, request.state["messages"]))
            except AgentMemoryError as exc:
                self._failed(exc)
        return await handler(self._inject(request, text))
