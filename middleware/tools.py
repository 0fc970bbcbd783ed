"""The four tools an agent manages its long-term memory with.

``memory_save``, ``memory_search``, ``memory_delete`` and ``memory_stats``
act for the user the *run* names (``RunnableConfig``/context via
``ToolRuntime``); nothing in their arguments can choose another user,
project or session. Every failure the model can do something about (the
gate refused the text, no such memory, not allowed, bad argument, no user in
the run) comes back as a short tool message with ``status="error"`` instead
of an exception, so the graph keeps going and the model can correct itself.
The formatting of results is pure and lives in the ``describe_*`` functions;
memory text in a reply is escaped exactly as in the prompt's memory block
(:func:`agent_memory.formatting.escape_line`: one line, no raw tags), so a
stored memory can no more forge a turn or a tag here than there.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Annotated, Any, Literal, Protocol

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field, ValidationError

from agent_memory.errors import (
    AgentMemoryError,
    ConfigurationError,
    IdentityConflictError,
    InvalidInputError,
    MemoryNotFoundError,
    MissingIdentityError,
    PermissionDeniedError,
)
from agent_memory.config import MemoryConfig
from agent_memory.db.requests import Op
from agent_memory.formatting import escape_line
from agent_memory.memory_types import known_types
from agent_memory.models import (
    SHARED_SCOPES,
    MemoryItem,
    MemoryStats,
    Rejection,
    SearchResult,
    Status,
)
from agent_memory.principal import PrincipalOps
from agent_memory.validation import shown

from .backend import MemoryBackend
from .identity import identity_from

__all__ = [
    "DELETE_DESCRIPTION", "MAX_TAGS", "MAX_TAG_LENGTH", "SAVE_DESCRIPTION", "SEARCH_DESCRIPTION", "STATS_DESCRIPTION",
    "TOOL_NAMES", "RunInfo", "Toolkit", "bound_k", "check_tags", "describe_delete", "describe_error",
    "describe_invalid_arguments", "describe_item", "describe_save", "describe_search", "describe_stats",
    "memory_tools", "one_line",
]

logger = logging.getLogger(__name__)

TOOL_NAMES = ("memory_save", "memory_search", "memory_delete", "memory_stats")

#: how many tags a tool call may give, and how long each may be
MAX_TAGS = 10
MAX_TAG_LENGTH = 64

class RunInfo(Protocol):
    """What a tool body reads from its run: LangGraph's ``ToolRuntime``, or a fixed identity's
    stand-in for plain LangChain (:mod:`.plain`)."""

    @property
    def config(self) -> Any: ...

    @property
    def context(self) -> Any: ...

    @property
    def tool_call_id(self) -> str | None: ...


#: how many of the conversation's last turns a memory saved with ``memory_save`` keeps as its context
SAVE_CONTEXT_TURNS = 3


def recent_turns(runtime: Any, turns: int = SAVE_CONTEXT_TURNS) -> str | None:
    """The text of the last ``turns`` user and assistant messages of the run's state (LangGraph's
    ``ToolRuntime.state``), ``"role: text"`` one a line: what a memory saved during the turn keeps
    as its context (issue 29). None when the run has no messages (plain LangChain)."""
    state = getattr(runtime, "state", None)
    messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    lines: list[str] = []
    for message in reversed(list(messages or ())):
        role = getattr(message, "type", None)
        content = getattr(message, "content", None)
        text = content if isinstance(content, str) else " ".join(
            b.get("text", "") for b in content or () if isinstance(b, Mapping) and isinstance(b.get("text"), str))
        if role in ("human", "ai") and isinstance(text, str) and text.strip():
            lines.insert(0, f"{'user' if role == 'human' else 'assistant'}: {text.strip()}")
            if len(lines) == turns:
                break
    return "\n".join(lines) or None


#: a tool's body: yields the one operation it needs, receives its result, returns (reply, is_error)
Body = Generator[Op[Any], Any, tuple[str, bool]]

MemoryTypeArg = Literal["preference", "fact", "skill", "habit", "event", "context", "constraint", "decision"]
ScopeArg = Literal["user", "project", "session", "team", "org"]


def bound_types(config: MemoryConfig, *functions: Callable[..., Any]) -> None:
    """Give ``memory_type`` the types ``config`` knows (the built-in ones and its
    ``custom_memory_types``) in the functions a tool's schema is read from, as :func:`bound_k`
    does for ``k``: the model sees each custom type's name in the enum and its description. A
    function whose ``memory_type`` defaults to ``None`` (a filter) gets an optional one."""
    if not config.custom_memory_types:
        return  # the static annotation already lists the built-in types
    names = Literal[known_types(config)]  # type: ignore[valid-type]
    custom = "; ".join(f"{name}: {one_line(text, 300)}" for name, text in config.custom_memory_types.items())
    description = f"the kind of memory: one of the built-in types or this deployment's own ({custom})"
    for function in functions:
        optional = inspect.signature(function).parameters["memory_type"].default is None
        kind = names | None if optional else names
        function.__annotations__["memory_type"] = Annotated[kind, Field(description=description)]


def save_description(config: MemoryConfig) -> str:
    """``memory_save``'s description, naming ``config``'s custom types (if any) with what each holds."""
    if not config.custom_memory_types:
        return SAVE_DESCRIPTION
    custom = "; ".join(f"{name} ({one_line(text, 300)})" for name, text in config.custom_memory_types.items())
    return f"{SAVE_DESCRIPTION}\nThis deployment's own memory types, for memory_type as well: {custom}."


def bound_k(max_k: int, *searches: Callable[..., Any]) -> None:
    """Give ``memory_search``'s ``k`` its bounds (1 to ``max_k``) in the functions the tool's schema
    is read from, so the model sees them; a call outside them is answered by
    :func:`describe_invalid_arguments`. (Set on the functions themselves: ``max_k`` is known only
    when the tools are built, and the annotations in this module are strings.)"""
    if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1:
        raise ConfigurationError(f"max_k must be a whole number >= 1 (the most memories one memory_search "
                                 f"returns), got {shown(max_k)}")
    k = Annotated[int, Field(ge=1, le=max_k, description=f"how many memories to return, 1 to {max_k}")]
    for search in searches:
        search.__annotations__["k"] = k


SAVE_DESCRIPTION = """Save one lasting memory about the user or the project, so it is available in future conversations.
Use it when the user asks you to remember something ("remember that...", "note that..."), says who they are or \
what they do ("I am...", "I work on..."), or states a lasting preference, habit, skill, constraint or decision \
("I prefer...", "always/never...", "we decided to... because..."). Do not save one-off requests, things only \
true for this conversation, general knowledge, or secrets (passwords, keys, card numbers): those are refused.
Write `content` as one self-contained sentence in the third person ("Prefers concise answers with code"), \
in the user's language. memory_type: preference, fact, skill, habit, event, context, constraint or decision. \
scope: "user" (about the person, follows them everywhere; the default), "project" (shared with the project: its \
stack, conventions, decisions), "session" (only this conversation), "team" or "org" (a rule for the whole team or \
organization; only when the user asks for it, and only if their role allows). tags: optional short labels \
(["billing", "infra"]) to find it by later with memory_search. Saving something already known is \
harmless: the existing memory is kept and reported."""

SEARCH_DESCRIPTION = """Search the long-term memories of this user and project. The most relevant memories are already \
given to you in <long_term_memory> before each answer; use this tool when you need more, something specific \
("what did I say about...?"), the id of a memory to delete, or memories of one type, scope or tag (tags: \
only memories carrying any of these labels). Set \
include_history=true for what was true before ("what did I use before?"): memories that were replaced are then \
included, marked with when and by what. Returns up to k memories, best first, each with its id, type, level \
(session, user, project, team or org, with the team's or org's id) and relevance. When levels disagree, the most \
specific one applies: session, user and project over team, team over org."""

DELETE_DESCRIPTION = """Delete (archive) one long-term memory by its id, when the user asks you to forget something or a \
memory is wrong or outdated. Find the id with memory_search first. Users can only delete memories they created; \
an archived memory no longer appears anywhere but can be restored by the user."""

STATS_DESCRIPTION = """What long-term memory holds and what it is doing: counts of this user's memories by type, scope \
and status, when the last one was written, how often memories were recalled (the most and least recalled, and \
when one was last used), this session's automatic learning (runs used and left, messages waiting to be read, \
times it had to wait for the budget) and which memories were given to you in the last turns. Use it when the \
user asks what you remember about them in general, how much is stored, or why you did or did not remember \
something."""


def one_line(text: str, limit: int = 500) -> str:
    """``text`` escaped onto one line (:func:`escape_line`), at most ``limit`` characters."""
    line = escape_line(text)
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:  # never cut an entity in half: "&l" would read as text
        cut = cut[:amp]
    return cut + "…"


def _level(item: MemoryItem) -> str:
    return f"{item.scope.value}:{item.scope_id}" if item.scope in SHARED_SCOPES else item.scope.value


def check_tags(tags: Any) -> list[str]:
    """The tags a tool call gave (``memory_save``/``memory_search``): a list of at most
    :data:`MAX_TAGS` short words, each kept as written; anything else is an error the model can fix."""
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, (list, tuple)) or len(tags) > MAX_TAGS:
        raise InvalidInputError("tags", f"must be a list of at most {MAX_TAGS} short words, e.g. ['billing'], "
                                        f"got {shown(tags)}")
    cleaned = []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag.strip()) > MAX_TAG_LENGTH:
            raise InvalidInputError("tags", f"each tag is a word or two of at most {MAX_TAG_LENGTH} characters, "
                                            f"got {shown(tag)}")
        cleaned.append(tag.strip())
    return list(dict.fromkeys(cleaned))


def _tags(item: MemoryItem) -> str:
    tags = item.metadata.get("tags") if isinstance(item.metadata, dict) else None
    if not isinstance(tags, list) or not tags:
        return ""
    return " [tags: " + ", ".join(one_line(str(t), 40) for t in tags[:MAX_TAGS]) + "]"


def describe_item(item: MemoryItem) -> str:
    text = f"{item.id} ({item.memory_type.value}, {_level(item)}): {one_line(item.content)}{_tags(item)}"
    if item.status is Status.SUPERSEDED:
        until = f" on {item.valid_to:%Y-%m-%d}" if item.valid_to else ""
        text += f" [no longer true: replaced{until} by {item.superseded_by}]"
    return text


def describe_save(result: MemoryItem | Rejection) -> tuple[str, bool]:
    """The tool message for a save and whether it is an error."""
    if isinstance(result, Rejection):
        return f"Not saved: {one_line(result.message, 2000)}", True
    if result.deduplicated:
        return f"Already remembered, nothing new saved: {describe_item(result)}", False
    return f"Saved memory {describe_item(result)}", False


def describe_search(query: str, results: list[SearchResult]) -> str:
    if not results:
        return f"No memories match '{one_line(query, 100)}'."
    lines = [f"{len(results)} memor{'y' if len(results) == 1 else 'ies'}, best first:"]
    lines += [f"{i}. [relevance {r.similarity:.2f}] {describe_item(r.item)}" for i, r in enumerate(results, 1)]
    return "\n".join(lines)


def describe_delete(item: MemoryItem) -> str:
    return f"Deleted (archived) memory {describe_item(item)}"


def describe_stats(stats: MemoryStats) -> str:
    """The tool's answer: one fact a line, memory contents escaped onto one line each."""
    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items()) if v) or "none"

    def when(at: Any) -> str:
        return at.isoformat(timespec="seconds") if at else "never"

    def recalled(r: Any) -> str:
        return f"{r.memory_id} ({r.recalls} recall{'' if r.recalls == 1 else 's'}, last {when(r.last_used)}): " \
               f"{one_line(r.content, 200)}"

    active = stats.by_status.get("active", 0)
    lines = [
        f"{active} active memories ({stats.total} in all).",
        f"By type: {counts(stats.by_type)}.",
        f"By scope: {counts(stats.by_scope)}.",
        f"By status: {counts(stats.by_status)}.",
        f"Last written: {when(stats.last_write)}.",
        f"Recalls (searches and injections that found a memory): {stats.recalls}; last used: {when(stats.last_used)}.",
    ]
    if stats.most_recalled:
        lines.append("Most recalled:")
        lines += [f"- {recalled(r)}" for r in stats.most_recalled]
    if stats.least_recalled:
        lines.append("Least recalled:")
        lines += [f"- {recalled(r)}" for r in stats.least_recalled]
    if stats.extractions_remaining is not None:
        lines.append(f"Automatic learning in this session: {stats.extraction_runs} run"
                     f"{'' if stats.extraction_runs == 1 else 's'} used, {stats.extractions_remaining} left in the "
                     f"window; {stats.turns_waiting} message{'' if stats.turns_waiting == 1 else 's'} waiting to be "
                     f"read; it had to wait for the budget {stats.extraction_waits} time"
                     f"{'' if stats.extraction_waits == 1 else 's'}.")
        if stats.recently_injected:
            lines.append(f"Memories given to you in the last {len(stats.recently_injected)} turns (oldest first):")
            for turn in stats.recently_injected:
                shown = "; ".join(f"{m.memory_id}: {one_line(m.content, 120)}" for m in turn.memories)
                lines.append(f"- {when(turn.at)}: {turn.count} memor{'y' if turn.count == 1 else 'ies'}"
                             + (f" ({shown})" if shown else ""))
    return "\n".join(lines)


def describe_error(exc: Exception) -> str:
    """What the model is told when a call fails, with what to do next."""
    if isinstance(exc, MissingIdentityError):
        return ("Memory is not available in this conversation: the application did not say who the user is. "
                "Answer without long-term memory.")
    if isinstance(exc, InvalidInputError):
        return f"Invalid argument {one_line(str(exc), 1000)}. Fix the argument and try again."
    if isinstance(exc, MemoryNotFoundError):
        return "No memory with that id is visible to you. Use memory_search to find the right id."
    if isinstance(exc, PermissionDeniedError):
        return (f"Not allowed: {one_line(str(exc), 1000)}. Do not retry the same call; tell the user which "
                "role it needs (a personal note can be saved with scope \"user\" instead).")
    return f"Memory is temporarily unavailable ({type(exc).__name__}). Continue without it."


def describe_invalid_arguments(error: ValidationError) -> str:
    """What the model is told when its arguments do not fit a tool's schema (``k`` out of its
    bounds, an unknown ``memory_type``, a missing ``content``): each argument and what it must be,
    worded as :func:`describe_error` words our own checks, instead of an exception."""
    problems = []
    for e in error.errors():
        if e["loc"][:1] == ("runtime",):
            continue  # injected by the agent, never the model's doing
        field = ".".join(str(part) for part in e["loc"]) or "arguments"
        got = "" if e["type"] == "missing" else f", got {shown(e.get('input'))}"
        problems.append(f"{field}: {e['msg'][:1].lower()}{e['msg'][1:]}{got}")
    return f"Invalid argument {one_line('; '.join(problems) or str(error), 1000)}. Fix the argument and try again."


class Toolkit:
    """The tools' bodies, written once: each is a generator that yields one memory operation
    (built on the caller's :class:`~agent_memory.principal.PrincipalOps`) and turns its result
    into the reply; :meth:`run` runs it blocking, :meth:`arun` on asyncio."""

    def __init__(self, backend: MemoryBackend, *, max_k: int) -> None:
        self.backend = backend
        self.max_k = max_k

    def _ops(self, runtime: RunInfo) -> PrincipalOps:
        identity = identity_from(runtime.config, runtime.context, required=False)
        if identity is None:
            raise MissingIdentityError("no user_id in the run")
        return self.backend.ops(identity)

    def save(self, runtime: RunInfo, content: str, memory_type: str, scope: str,
             tags: Sequence[str] | None = None) -> Body:
        metadata = {"tags": check_tags(tags)} if tags else None
        result = yield self._ops(runtime).add(content, memory_type=memory_type, scope=scope, source="ai",
                                              metadata=metadata, context=recent_turns(runtime))
        return describe_save(result)

    def search(self, runtime: RunInfo, query: str, k: int, memory_type: str | None, scope: str | None,
               include_history: bool = False, tags: Sequence[str] | None = None) -> Body:
        if isinstance(k, int) and not isinstance(k, bool) and k > self.max_k:
            k = self.max_k  # only the default (5) can get here, with a max_k below it: the schema bounds k
        status = ["active", "superseded"] if include_history is True else "active"
        # memories carrying any of the tags: a metadata filter, so the top k is exact among them
        narrow = {"$or": [{"tags": {"$contains": tag}} for tag in check_tags(tags)]} if tags else None
        results = yield self._ops(runtime).search(query, k=k, memory_type=memory_type, scope=scope, status=status,
                                                  filter=narrow)
        return describe_search(query, results), False

    def delete(self, runtime: RunInfo, memory_id: str) -> Body:
        item = yield self._ops(runtime).delete(memory_id)
        return describe_delete(item), False

    def stats(self, runtime: RunInfo) -> Body:
        result = yield self._ops(runtime).stats()
        return describe_stats(result), False

    @staticmethod
    def _message(runtime: RunInfo, name: str, text: str, error: bool) -> ToolMessage | str:
        if runtime.tool_call_id is None:
            return text
        return ToolMessage(content=text, tool_call_id=runtime.tool_call_id, name=name,
                           status="error" if error else "success")

    def _failed(self, runtime: RunInfo, name: str, exc: Exception) -> ToolMessage | str:
        if isinstance(exc, IdentityConflictError):
            raise exc  # the run contradicts itself about who it is: no answer to the model fixes that
        if not isinstance(exc, AgentMemoryError):
            logger.exception("%s failed unexpectedly", name)
        return self._message(runtime, name, describe_error(exc), True)

    def run(self, name: str, body: Body, runtime: RunInfo) -> ToolMessage | str:
        try:
            body.send(self.backend.run(next(body)))
        except StopIteration as done:
            return self._message(runtime, name, *done.value)
        except Exception as exc:  # noqa: BLE001 - a tool must answer the model, not break the graph
            return self._failed(runtime, name, exc)
        raise AssertionError("a tool body makes exactly one call")  # pragma: no cover

    async def arun(self, name: str, body: Body, runtime: RunInfo) -> ToolMessage | str:
        try:
            body.send(await self.backend.arun(next(body)))
        except StopIteration as done:
            return self._message(runtime, name, *done.value)
        except Exception as exc:  # noqa: BLE001 - a tool must answer the model, not break the graph
            return self._failed(runtime, name, exc)
        raise AssertionError("a tool body makes exactly one call")  # pragma: no cover


def toolset(*bodies: tuple[Callable[..., Any], Callable[..., Awaitable[Any]]],
            config: MemoryConfig | None = None) -> list[BaseTool]:
    """The four tools from their (sync, async) functions, in the order of ``TOOL_NAMES``; with
    ``config``, ``memory_save`` and ``memory_search`` also offer its custom memory types."""
    if config is not None:
        bound_types(config, *bodies[0], *bodies[1])
    save = SAVE_DESCRIPTION if config is None else save_description(config)
    descriptions = (save, SEARCH_DESCRIPTION, DELETE_DESCRIPTION, STATS_DESCRIPTION)
    return [
        StructuredTool.from_function(func=sync, coroutine=coro, name=name, description=description,
                                     handle_validation_error=describe_invalid_arguments)
        for name, description, (sync, coro) in zip(TOOL_NAMES, descriptions, bodies, strict=True)
    ]


def memory_tools(
    memory: Any = None, *, max_k: int = 20, user_id: str | None = None, project_id: str | None = None,
    session_id: str | None = None, team_id: str | None = None, org_id: str | None = None,
) -> list[BaseTool]:
    """The four memory tools bound to ``memory`` (a MemoryService, AsyncMemoryService, database URL,
    :class:`MemoryBackend` or ``None`` for the default database). Use them in ``create_agent`` (the
    :class:`MemoryMiddleware` adds them for you) or in a LangGraph ``ToolNode``; either way the user,
    project and session come from the run's config or context.

    Outside a LangGraph run (plain LangChain, ``tool.invoke({...})``) there is no run to read
    them from: pass ``user_id=`` (and the other ids) here, and the tools act for that identity
    (:func:`~agent_memory.middleware.plain.bound_memory_tools`)."""
    if any(v is not None for v in (user_id, project_id, session_id, team_id, org_id)):
        from .plain import bound_memory_tools

        if user_id is None:
            raise MissingIdentityError("memory_tools(..., project_id=...) also needs user_id=: whose memory is it?")
        return bound_memory_tools(memory, user_id=user_id, project_id=project_id, session_id=session_id,
                                  team_id=team_id, org_id=org_id, max_k=max_k)
    kit = Toolkit(MemoryBackend.of(memory), max_k=max_k)

    def memory_save(content: str, runtime: ToolRuntime, memory_type: MemoryTypeArg = "fact",
                    scope: ScopeArg = "user", tags: list[str] | str | None = None) -> ToolMessage | str:
        return kit.run("memory_save", kit.save(runtime, content, memory_type, scope, tags), runtime)

    async def amemory_save(content: str, runtime: ToolRuntime, memory_type: MemoryTypeArg = "fact",
                           scope: ScopeArg = "user", tags: list[str] | str | None = None) -> ToolMessage | str:
        return await kit.arun("memory_save", kit.save(runtime, content, memory_type, scope, tags), runtime)

    def memory_search(query: str, runtime: ToolRuntime, k: int = 5, memory_type: MemoryTypeArg | None = None,
                      scope: ScopeArg | None = None, include_history: bool = False,
                      tags: list[str] | str | None = None) -> ToolMessage | str:
        return kit.run("memory_search", kit.search(runtime, query, k, memory_type, scope, include_history, tags),
                       runtime)

    async def amemory_search(query: str, runtime: ToolRuntime, k: int = 5, memory_type: MemoryTypeArg | None = None,
                             scope: ScopeArg | None = None, include_history: bool = False,
                             tags: list[str] | str | None = None) -> ToolMessage | str:
        return await kit.arun("memory_search", kit.search(runtime, query, k, memory_type, scope, include_history,
                                                          tags), runtime)

    bound_k(max_k, memory_search, amemory_search)

    def memory_delete(memory_id: str, runtime: ToolRuntime) -> ToolMessage | str:
        return kit.run("memory_delete", kit.delete(runtime, memory_id), runtime)

    async def amemory_delete(memory_id: str, runtime: ToolRuntime) -> ToolMessage | str:
        return await kit.arun("memory_delete", kit.delete(runtime, memory_id), runtime)

    def memory_stats(runtime: ToolRuntime) -> ToolMessage | str:
        return kit.run("memory_stats", kit.stats(runtime), runtime)

    async def amemory_stats(runtime: ToolRuntime) -> ToolMessage | str:
        return await kit.arun("memory_stats", kit.stats(runtime), runtime)

    return toolset((memory_save, amemory_save), (memory_search, amemory_search), (memory_delete, amemory_delete),
                   (memory_stats, amemory_stats), config=kit.backend.known_config)
