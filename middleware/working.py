"""Working memory: a per-invocation scratchpad (todos, notes, tool calls) the agent can see.

An agent working through a multi-step request needs to remember what it
planned, what it concluded along the way and which tools it already called,
without re-reading the whole transcript and without that scratchpad leaking
into the next request. :class:`WorkingMemoryMiddleware` keeps it in one state
field, ``working_memory``, that

- is reset by ``before_agent`` when a new invocation starts. A run resumed
  after an interrupt (``Command(resume=...)``) continues from the interrupted
  node and does not pass through ``before_agent`` again, so its scratchpad
  survives the pause;
- merges concurrent writes through a reducer, so parallel tool calls in one
  AI message can all update it;
- is left out of the agent's input schema (callers can't inject it) but is
  part of the output, so callers can inspect what the agent planned;
- is shown to the model as a bounded ``<working_memory>`` section appended to
  the system message of each model call (never written into the message
  history), with ``<``, ``>`` and ``&`` escaped so nothing in it can close the
  block.

The model writes to it with two tools, ``update_todos`` and ``add_note``
(named apart from LangChain's ``write_todos`` so both middlewares can be used
together). ``after_model`` records the other tool calls as the model made
them; each call's outcome (ok or error) is read from its tool result when the
section is rendered. A call a human rejected therefore shows as an error, and
one a human edited shows the model's arguments, as the message history does
(``HumanInTheLoopMiddleware`` applies edits when the tool runs).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, cast, get_args

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, Field, WithJsonSchema
from typing_extensions import TypedDict

from agent_memory.errors import ConfigurationError, InvalidInputError
from agent_memory.formatting import escape
from agent_memory.prompts import render

from .prompting import with_section
from .toolless import without_tools

__all__ = [
    "ADD_NOTE",
    "UPDATE_TODOS",
    "WORKING_MEMORY_KEY",
    "Todo",
    "ToolCallRecord",
    "WorkingMemory",
    "WorkingMemoryMiddleware",
    "WorkingMemoryState",
    "check_note",
    "check_todos",
    "format_working_memory",
    "merge_working_memory",
]

WORKING_MEMORY_KEY = "working_memory"
UPDATE_TODOS = "update_todos"
ADD_NOTE = "add_note"

TodoStatus = Literal["pending", "in_progress", "completed"]
_STATUSES: tuple[str, ...] = get_args(TodoStatus)

# Storage bounds. They live here rather than on the middleware because the
# reducer, a module-level function named in the state annotation, enforces them.
MAX_TODOS = 50
MAX_TODO_CHARS = 500
MAX_NOTES = 50
MAX_NOTE_CHARS = 1000
MAX_TOOL_CALLS = 100
_ARGS_CHARS = 160  # a tool call's arguments are kept as a JSON summary this long
_LINE_CHARS = 400  # no single line of the injected section is longer than this
_ELLIPSIS = "…"


class Todo(TypedDict):
    content: str
    status: TodoStatus


class ToolCallRecord(TypedDict):
    id: str
    name: str
    args: str
    """The call's arguments as JSON, shortened to a summary."""


class WorkingMemory(TypedDict, total=False):
    invocation: str
    """Id of the invocation this scratchpad belongs to; an update with a new id starts afresh."""
    todos: list[Todo]
    notes: list[str]
    tool_calls: list[ToolCallRecord]


def merge_working_memory(current: WorkingMemory | None, update: WorkingMemory | None) -> WorkingMemory:
    """The reducer of the ``working_memory`` channel.

    An update that carries a new ``invocation`` id replaces everything (the
    reset). Otherwise ``todos`` replaces the list (the model always sends the
    whole list), ``notes`` are appended and ``tool_calls`` are upserted by id,
    so updates from parallel tool calls in one step all land. Lists are capped
    at their ``MAX_*`` bound, keeping the newest entries.
    """
    current = current or {}
    if not update:
        return current
    if "invocation" in update and update["invocation"] != current.get("invocation"):
        merged: WorkingMemory = {"invocation": update["invocation"], "todos": [], "notes": [], "tool_calls": []}
    else:
        merged = cast(WorkingMemory, dict(current))
    if "todos" in update:
        merged["todos"] = list(update["todos"])[:MAX_TODOS]
    if update.get("notes"):
        merged["notes"] = [*merged.get("notes", []), *update["notes"]][-MAX_NOTES:]
    if update.get("tool_calls"):
        records = list(merged.get("tool_calls", []))
        where = {record["id"]: i for i, record in enumerate(records)}
        for record in update["tool_calls"]:
            if record["id"] in where:
                records[where[record["id"]]] = record
            else:
                where[record["id"]] = len(records)
                records.append(record)
        merged["tool_calls"] = records[-MAX_TOOL_CALLS:]
    return merged


class WorkingMemoryState(AgentState[Any]):
    # The reducer must be the last annotation: LangGraph only looks there.
    working_memory: Annotated[NotRequired[WorkingMemory], OmitFromInput, merge_working_memory]


# --- argument checks (pure) -------------------------------------------------


def check_todos(value: Any) -> list[Todo]:
    """The todo list the model sent, validated; raises :class:`InvalidInputError` saying what to fix."""
    if not isinstance(value, list):
        raise InvalidInputError(
            "todos", f"must be a list of {{content, status}} objects, got {type(value).__name__}; "
            "send the whole list, e.g. [{\"content\": \"read the spec\", \"status\": \"in_progress\"}]"
        )
    if len(value) > MAX_TODOS:
        raise InvalidInputError("todos", f"has {len(value)} items, the limit is {MAX_TODOS}; merge or drop some")
    todos: list[Todo] = []
    for i, item in enumerate(value):
        field = f"todos[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidInputError(field, f"must be an object with content and status, got {type(item).__name__}")
        content, status = item.get("content"), item.get("status")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInputError(f"{field}.content", "must be a non-empty string describing the step")
        if len(content) > MAX_TODO_CHARS:
            raise InvalidInputError(
                f"{field}.content", f"is {len(content)} characters, the limit is {MAX_TODO_CHARS}; shorten it"
            )
        if status not in _STATUSES:
            raise InvalidInputError(f"{field}.status", f"must be one of {', '.join(_STATUSES)}, got {status!r}")
        todos.append(Todo(content=content.strip(), status=status))
    return todos


def check_note(value: Any) -> str:
    """The note the model sent, validated; raises :class:`InvalidInputError` saying what to fix."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("note", "must be a non-empty string")
    if len(value) > MAX_NOTE_CHARS:
        raise InvalidInputError("note", f"is {len(value)} characters, the limit is {MAX_NOTE_CHARS}; shorten it")
    return value.strip()


# --- the injected section (pure) ---------------------------------------------


def _one_line(text: str, limit: int = _LINE_CHARS) -> str:
    """``text`` escaped, on one line (so it cannot pose as a line of its own), at most ``limit`` long.

    Shortening happens before escaping, so no entity is ever cut in half.
    """
    flat = " ".join(text.split())
    line, keep = escape(flat), len(flat)
    while len(line) > limit and keep > 0:
        keep = max(0, keep - max(1, len(line) - limit))
        line = escape(flat[:keep].rstrip() + _ELLIPSIS)
    return line


def _args_summary(args: Any) -> str:
    text = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= _ARGS_CHARS else text[: _ARGS_CHARS - 1] + _ELLIPSIS


def _tool_outcomes(messages: Iterable[AnyMessage]) -> dict[str, str]:
    return {
        m.tool_call_id: "error" if m.status == "error" else "ok" for m in messages if isinstance(m, ToolMessage)
    }


def _fit(header: str, lines: Sequence[str], room: int, *, keep: Literal["first", "last"]) -> list[str]:
    """``header`` and as many of ``lines`` as fit in ``room`` characters (joined by newlines).

    ``keep`` says which end matters: the plan reads top-down, notes and tool
    calls matter most when recent. Dropped lines are counted in a marker line.
    """
    def cost(chunk: Sequence[str]) -> int:
        return sum(len(line) + 1 for line in chunk)

    if not lines or cost([header]) > room:
        return []
    if cost([header, *lines]) <= room:
        return [header, *lines]
    ordered = list(lines) if keep == "first" else list(reversed(lines))
    marker = f"- ({len(lines)} more not shown)"
    budget = room - cost([header, marker])
    chosen: list[str] = []
    for line in ordered:
        if cost([line]) > budget:
            break
        chosen.append(line)
        budget -= cost([line])
    if budget < 0:
        return []
    marker = f"- ({len(lines) - len(chosen)} more not shown)"
    body = chosen if keep == "first" else list(reversed(chosen))
    return [header, *body, marker] if keep == "first" else [header, marker, *body]


def format_working_memory(
    memory: WorkingMemory | None, *, messages: Iterable[AnyMessage] = (), budget_chars: int = 2000
) -> str:
    """The ``<working_memory>`` section for ``memory``, at most ``budget_chars`` long.

    ``messages`` (the history the model is about to see) gives each recorded
    tool call its outcome. Returns ``""`` when there is nothing to show or not
    even the frame fits, so callers can skip the section.
    """
    memory = memory or {}
    todos, notes, calls = memory.get("todos") or [], memory.get("notes") or [], memory.get("tool_calls") or []
    if not (todos or notes or calls):
        return ""
    frame = len(render("working_memory", sections=""))
    room = budget_chars - frame + 1  # the join below adds no newline after the last line
    outcomes = _tool_outcomes(messages)
    sections = (
        ("Todo list:", [f"- [{t['status']}] {_one_line(t['content'])}" for t in todos], "first"),
        ("Notes:", [f"- {_one_line(n)}" for n in notes], "last"),
        (
            "Tool calls so far (oldest first):",
            [
                f"- {_one_line(c['name'], 80)} {_one_line(c['args'])}"
                + (f" -> {outcomes[c['id']]}" if c["id"] in outcomes else "")
                for c in calls
            ],
            "last",
        ),
    )
    out: list[str] = []
    for header, lines, keep in sections:
        chunk = _fit(header, lines, room, keep=cast(Literal["first", "last"], keep))
        room -= sum(len(line) + 1 for line in chunk)
        out.extend(chunk)
    if not out:
        return ""
    return render("working_memory", sections="\n".join(out))


# --- the tools ----------------------------------------------------------------

_TODOS_SCHEMA = {
    "type": "array",
    "description": "The whole todo list, in order. It replaces the previous list.",
    "items": {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "One concrete step."},
            "status": {"type": "string", "enum": list(_STATUSES)},
        },
        "required": ["content", "status"],
    },
}

UPDATE_TODOS_DESCRIPTION = (
    "Write your plan for the current request as a todo list. Send the whole list each time; it replaces "
    "the previous one. Mark a step in_progress when you start it and completed as soon as it is done. "
    "Use it for requests that take several steps; the list is shown to you on every turn and cleared "
    "when the next request starts. Call it at most once per turn."
)
ADD_NOTE_DESCRIPTION = (
    "Keep a short note for yourself while working on the current request: an intermediate result, a "
    "decision and its reason, something to check later. Notes are shown to you on every turn and are "
    "cleared when the next request starts (they are not remembered across conversations)."
)


# Arguments are typed ``Any`` so that a malformed call reaches check_todos and
# check_note, whose messages say what to fix; the JSON schema the model sees
# is still the precise one.
class _UpdateTodosArgs(BaseModel):
    todos: Annotated[Any, WithJsonSchema(_TODOS_SCHEMA)] = Field(description=_TODOS_SCHEMA["description"])


class _AddNoteArgs(BaseModel):
    note: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(
        description=f"The note, at most {MAX_NOTE_CHARS} characters."
    )


def _refusal(tool_call_id: str, name: str, exc: InvalidInputError) -> ToolMessage:
    return ToolMessage(
        content=f"error: {exc}. Nothing was changed; call {name} again with corrected arguments.",
        tool_call_id=tool_call_id, name=name, status="error",
    )


def _update_todos(runtime: ToolRuntime, todos: Any) -> Command[Any] | ToolMessage:
    try:
        checked = check_todos(todos)
    except InvalidInputError as exc:
        return _refusal(runtime.tool_call_id, UPDATE_TODOS, exc)
    counts = {s: sum(t["status"] == s for t in checked) for s in _STATUSES}
    summary = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n) or "empty"
    return Command(update={
        WORKING_MEMORY_KEY: {"todos": checked},
        "messages": [ToolMessage(f"todo list updated: {summary}", tool_call_id=runtime.tool_call_id,
                                 name=UPDATE_TODOS)],
    })


def _add_note(runtime: ToolRuntime, note: Any) -> Command[Any] | ToolMessage:
    try:
        checked = check_note(note)
        held = len(((runtime.state or {}).get(WORKING_MEMORY_KEY) or {}).get("notes") or [])
        if held >= MAX_NOTES:
            raise InvalidInputError("note", f"working memory already holds {MAX_NOTES} notes; rely on those")
    except InvalidInputError as exc:
        return _refusal(runtime.tool_call_id, ADD_NOTE, exc)
    return Command(update={
        WORKING_MEMORY_KEY: {"notes": [checked]},
        "messages": [ToolMessage("noted", tool_call_id=runtime.tool_call_id, name=ADD_NOTE)],
    })


async def _aupdate_todos(runtime: ToolRuntime, todos: Any) -> Command[Any] | ToolMessage:
    return _update_todos(runtime, todos)


async def _aadd_note(runtime: ToolRuntime, note: Any) -> Command[Any] | ToolMessage:
    return _add_note(runtime, note)


# --- the middleware -------------------------------------------------------------


class WorkingMemoryMiddleware(AgentMiddleware[WorkingMemoryState, Any, Any]):
    """Per-invocation working memory: ``update_todos`` and ``add_note`` tools, a tool-call log,
    and a bounded ``<working_memory>`` section in the system message.

    ``budget_chars`` caps the injected section (default 2000 characters,
    about 500 tokens: room for a dozen todos, a few notes and the last few
    tool calls, small next to any context window). When it overflows, the
    oldest notes and tool calls are left out first.
    """

    state_schema = WorkingMemoryState

    def __init__(self, *, budget_chars: int = 2000) -> None:
        super().__init__()
        minimum = len(render("working_memory", sections="")) + 40
        if not isinstance(budget_chars, int) or isinstance(budget_chars, bool) or budget_chars < minimum:
            raise ConfigurationError(
                f"budget_chars must be an integer of at least {minimum} (the section's frame plus a line), "
                f"got {budget_chars!r}"
            )
        self.budget_chars = budget_chars
        self.tools = [
            StructuredTool.from_function(
                name=UPDATE_TODOS, description=UPDATE_TODOS_DESCRIPTION, func=_update_todos,
                coroutine=_aupdate_todos, args_schema=_UpdateTodosArgs, infer_schema=False,
            ),
            StructuredTool.from_function(
                name=ADD_NOTE, description=ADD_NOTE_DESCRIPTION, func=_add_note,
                coroutine=_aadd_note, args_schema=_AddNoteArgs, infer_schema=False,
            ),
        ]

    # A new invocation starts with an empty scratchpad.
    def before_agent(self, state: WorkingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {WORKING_MEMORY_KEY: {"invocation": uuid.uuid4().hex, "todos": [], "notes": [], "tool_calls": []}}

    async def abefore_agent(self, state: WorkingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_model(self, state: WorkingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Log the model's tool calls; refuse parallel ``update_todos`` calls (which list would win?)."""
        last = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        update: dict[str, Any] = {}
        records = [
            ToolCallRecord(id=str(call["id"]), name=call["name"], args=_args_summary(call["args"]))
            for call in last.tool_calls
            if call["name"] not in (UPDATE_TODOS, ADD_NOTE) and call.get("id")
        ]
        if records:
            update[WORKING_MEMORY_KEY] = {"tool_calls": records}
        todo_calls = [call for call in last.tool_calls if call["name"] == UPDATE_TODOS]
        if len(todo_calls) > 1:
            answered = {m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)}
            update["messages"] = [
                ToolMessage(
                    f"error: {UPDATE_TODOS} was called {len(todo_calls)} times in one turn, so none was applied; "
                    "call it once with the whole list.",
                    tool_call_id=call["id"], name=UPDATE_TODOS, status="error",
                )
                for call in todo_calls
                if call["id"] not in answered
            ]
        return update or None

    async def aafter_model(self, state: WorkingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    def _with_section(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        request = without_tools(request, self.tools)  # a model without tool calling gets the section only
        section = format_working_memory(
            request.state.get(WORKING_MEMORY_KEY), messages=request.messages, budget_chars=self.budget_chars
        )
        if not section:
            return request
        return request.override(system_message=with_section(request.system_message, section.rstrip("\n")))

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._with_section(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        return await handler(self._with_section(request))
