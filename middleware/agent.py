"""``create_memory_agent``: an agent with all four memory layers, in one call.

It is ``langchain.agents.create_agent`` with a middleware stack:
working memory (per invocation), short-term memory (summarization of long
threads), long-term memory (:class:`MemoryMiddleware` and its tools), and
episodic memory (a PostgreSQL checkpointer on the same database, so a
thread survives a refresh, an interrupt or an error). Every piece is also
importable on its own for people who wire their own agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from psycopg_pool import AsyncConnectionPool

from agent_memory.errors import ConfigurationError
from agent_memory.service import SERVICE_LLM, AsyncMemoryService

from .backend import MemoryBackend, MemoryLike
from .memory import MemoryMiddleware

__all__ = ["create_memory_agent", "memory_middleware_stack"]


def _database_of(backend: MemoryBackend) -> Any:
    """Where the long-term memory lives, in a form the checkpointer accepts, so both share one database."""
    service = backend.service
    if isinstance(service, AsyncMemoryService):
        given = service._given
        if given is None or isinstance(given, str):
            return given
        if isinstance(given, AsyncConnectionPool):
            return given.conninfo
        raise ConfigurationError(
            "with an AsyncMemoryService on a single AsyncConnection, pass checkpointer= explicitly "
            "(e.g. agent_memory.episodic.open_checkpointer(DSN)) or checkpointer=False"
        )
    return service.conn


def _is_ours(checkpointer: Any) -> bool:
    from agent_memory.episodic import PostgresCheckpointer

    return isinstance(checkpointer, PostgresCheckpointer)


def _check_enable(enable_memory: Any) -> None:
    if not isinstance(enable_memory, bool):
        raise ConfigurationError(f"enable_memory must be True or False, got {enable_memory!r}")


#: ``extraction_llm``'s default: the memory service's model when one is configured, else the agent's own
AGENT_MODEL: Any = object()


def extraction_model(model: BaseChatModel | None, backend: MemoryBackend, extraction_llm: Any = AGENT_MODEL) -> Any:
    """The model automatic extraction uses, ``None`` meaning the offline rules.

    Given explicitly, ``extraction_llm`` is used as it is. By default: the model configured for the
    memory service (``MemoryService(llm=...)`` or ``MEMORY_LLM``) if there is one, else the agent's
    own ``model``, because a user who wraps a capable model expects it to learn ("Rex, my dog,
    barked all night" is beyond the rules). The rules remain for a model that can't give
    structured output (``with_structured_output`` raises ``NotImplementedError``, as LangChain's
    models without tool calling do). Each :class:`ExtractionReport` names the one used.
    """
    if extraction_llm is not AGENT_MODEL:
        return extraction_llm
    if backend.service.llm is not None:
        return SERVICE_LLM
    if model is None:
        return None
    from agent_memory.extraction.schemas import ExtractedMemories

    try:
        model.with_structured_output(ExtractedMemories)
    except NotImplementedError:
        return None
    return model


def memory_middleware_stack(
    model: BaseChatModel | None = None, memory: MemoryLike | MemoryBackend = None, *,
    working_memory: bool = True, summarization: bool | dict[str, Any] = True, extraction: bool | str = True,
    extraction_llm: Any = AGENT_MODEL, extract_every: int | None = None, enable_memory: bool = True,
    **memory_options: Any,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The middleware of :func:`create_memory_agent`, for ``create_agent(..., middleware=[...])``.

    ``summarization`` is ``True`` (the memory-friendly defaults), ``False``, or a dict of options for
    :func:`~agent_memory.middleware.short_term.short_term_memory`; it summarizes with ``model``.
    ``extraction``: ``True`` (``MEMORY_EXTRACTION``, inline by default), ``"inline"``, ``"background"``
    or ``False``; it uses ``extraction_llm`` (by default the service's model if one is configured, else
    ``model``; ``None`` for the rules: see :func:`extraction_model`).
    ``memory_options`` go to :class:`MemoryMiddleware` (``k``, ``budget_chars``, ``require_user``...).
    ``enable_memory=False`` leaves long-term memory out (no injection, no tools, no extraction, and
    ``memory`` is never opened); working memory and summarization stay, as they touch no database.
    """
    _check_enable(enable_memory)
    stack: list[AgentMiddleware[Any, Any, Any]] = []
    if working_memory:
        from .working import WorkingMemoryMiddleware

        stack.append(WorkingMemoryMiddleware())
    if summarization:
        from .short_term import short_term_memory

        options = summarization if isinstance(summarization, dict) else {}
        stack.extend(short_term_memory(model, **options))
    if not enable_memory:
        return stack
    backend = MemoryBackend.of(memory)
    stack.append(MemoryMiddleware(backend, **memory_options))
    if extraction:
        from .extraction import ExtractionMiddleware

        mode = None if extraction is True else extraction  # False never gets here
        llm = extraction_model(model, backend, extraction_llm)
        stack.append(ExtractionMiddleware(backend, llm=llm, mode=mode, every=extract_every))
    return stack


def create_memory_agent(
    model: BaseChatModel, tools: Sequence[BaseTool | Any] = (), *, system_prompt: str | None = None,
    memory: MemoryLike | MemoryBackend = None, checkpointer: Any = None, interrupt_on: dict[str, Any] | None = None,
    working_memory: bool = True, summarization: bool | dict[str, Any] = True, extraction: bool | str = True,
    extraction_llm: Any = AGENT_MODEL, extract_every: int | None = None,
    middleware: Sequence[AgentMiddleware] = (), k: int = 6, require_user: bool = True, enable_memory: bool = True,
    inject_when: str | None = None, min_relevance: float | None = None, budget_chars: int | None = None,
    profiles: bool = True, fail_open: bool = False, graph_tools: bool = False,
    **agent_options: Any,
) -> Any:
    """A ready agent with working, short-term, long-term and episodic memory.

    model: any LangChain chat model. tools: your tools (the memory tools are added).
    memory: where long-term memory lives (see :class:`MemoryMiddleware`); ``None`` is
        ``DATABASE_URL`` or the embedded PostgreSQL.
    checkpointer: ``None`` for a PostgreSQL checkpointer on the memory database, ``False`` for
        none (no resume), or any LangGraph checkpointer.
    interrupt_on: tools that need a human's approval, as for LangChain's
        ``HumanInTheLoopMiddleware`` (e.g. ``{"send_email": True}``); needs a checkpointer.
    extraction: learn from each run automatically (see :class:`ExtractionMiddleware`): ``True`` (the
        configured mode, ``MEMORY_EXTRACTION``: inline by default), ``"inline"``, ``"background"`` or
        ``False``. extraction_llm: the model that extracts and decides: by default the memory
        service's (``MemoryService(llm=...)``/``MEMORY_LLM``) if one is configured, else the agent's
        own ``model`` (the rules if it can't give structured output); ``None`` for the offline rules. extract_every: extract once this many user turns are new.
    middleware: your own middleware, run outside (before) the memory stack.
    enable_memory: ``False`` builds the agent without long-term memory, as the specification's
        switch does: no injection, no memory tools, no extraction, and nothing touches the
        database (``memory`` is never opened, and no checkpointer is made unless you pass one).
    k, inject_when, min_relevance, budget_chars, profiles, fail_open, graph_tools, require_user: what
        :class:`MemoryMiddleware` takes, with its defaults (``inject_when`` and ``min_relevance``
        default to ``MEMORY_INJECT_WHEN`` and ``MEMORY_INJECT_MIN_RELEVANCE``), so an agent built in
        one call is tuned as one wired by hand.
    Run it with ``config={"configurable": {"user_id": ..., "project_id": ..., "thread_id": ...}}``.
    """
    if not isinstance(model, BaseChatModel):
        raise ConfigurationError(f"model must be a LangChain chat model, got {type(model).__name__}")
    _check_enable(enable_memory)
    backend = MemoryBackend.of(memory)
    if checkpointer is None and not enable_memory:
        checkpointer = False  # the default checkpointer lives in the memory database
    if checkpointer is None:
        from agent_memory.episodic import open_checkpointer

        # require_user=False is one switch for the whole agent: memory and checkpoints alike
        checkpointer = open_checkpointer(_database_of(backend), config=backend.config, require_user=require_user)
    elif checkpointer is False:
        checkpointer = None
    stack = [*middleware]
    if _is_ours(checkpointer):
        from .episodic import SessionSnapshotMiddleware

        stack.append(SessionSnapshotMiddleware(checkpointer))
    if interrupt_on:
        if checkpointer is None:
            raise ConfigurationError("interrupt_on needs a checkpointer to resume from; leave checkpointer=None")
        stack.append(HumanInTheLoopMiddleware(interrupt_on=interrupt_on))
    stack += memory_middleware_stack(
        model, backend, working_memory=working_memory, summarization=summarization, extraction=extraction,
        extraction_llm=extraction_llm, extract_every=extract_every, k=k, require_user=require_user,
        enable_memory=enable_memory, inject_when=inject_when, min_relevance=min_relevance, budget_chars=budget_chars,
        profiles=profiles, fail_open=fail_open, graph_tools=graph_tools,
    )
    return create_agent(
        model, list(tools), system_prompt=system_prompt, middleware=stack, checkpointer=checkpointer, **agent_options,
    )
