"""``agent-memory demo``: a real agent remembering across sessions, and forgetting nobody's privacy.

An agent built with :func:`~agent_memory.middleware.create_memory_agent`
(LangChain's ``create_agent`` with the memory middleware stack and a
PostgreSQL checkpointer) talks to two users on the embedded database with
local embeddings. In session 1 alice states a preference and a project
decision and the agent saves them with ``memory_save``; session 2 is a new
thread, so its conversation starts empty, and the demo prints the memory
block the model received in its system prompt and the answer built on it;
then bob asks the same question and gets nothing of alice's. The model is a
real one when ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` is set, else the offline
rule-based model of :mod:`agent_memory.demo_model`, and the demo says which.

The transcript helpers here (:class:`PromptRecorder`, :func:`print_turn`)
are shared with ``agent-memory chat``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from uuid import UUID

import psycopg
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .db.connection import redact_dsn
from .demo_model import ChatModelChoice, choose_chat_model, memory_block
from .embeddings import embedding_model_name
from .service import DEFAULT_DATABASE, MemoryService

__all__ = [
    "SESSIONS",
    "SYSTEM_PROMPT",
    "PromptRecorder",
    "Session",
    "ask",
    "build_agent",
    "describe_database",
    "print_turn",
    "run_demo",
]

SYSTEM_PROMPT = (
    "You are a concise assistant for a software team. When the user tells you something lasting about "
    "themselves (a preference, a fact, a constraint) or a decision of their project, save it with memory_save. "
    "When memories are given to you in <long_term_memory>, use them and say which ones you used."
)

DEMO_PROJECT = "demo-webshop"


@dataclass(frozen=True)
class Session:
    """One conversation of the demo: who talks, in which thread, and what they say."""

    title: str
    user_id: str
    project_id: str | None
    thread_id: str
    turns: tuple[str, ...]

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"user_id": self.user_id, "project_id": self.project_id,
                                 "thread_id": self.thread_id}}


QUESTION = "Which database are we using for the webshop, and how do I like my answers?"

SESSIONS = (
    Session("Session 1: demo-alice tells the agent about herself and her project", "demo-alice", DEMO_PROJECT,
            "demo-alice-session-1", (
                "Hi! I prefer concise answers with Python code examples.",
                ("We decided to use PostgreSQL 16 with pgvector for the webshop because it keeps the embeddings "
                 "next to the orders."),
            )),
    Session("Session 2: demo-alice again, in a new thread (its conversation starts empty)", "demo-alice",
            DEMO_PROJECT, "demo-alice-session-2", (QUESTION,)),
    Session("Another user: demo-bob asks the same agent the same question (no project)", "demo-bob", None,
            "demo-bob-session-1", (QUESTION,)),
)


# --- what the model saw -------------------------------------------------------------------------


class PromptRecorder(BaseCallbackHandler):
    """Records the system prompt of every chat model call it is passed to (``config={"callbacks": [...]}``),
    so the demo can show what the memory layer injected, whatever the model."""

    def __init__(self) -> None:
        self.system_prompts: list[str] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *,
                            run_id: UUID, **kwargs: Any) -> None:
        for request in messages:
            self.system_prompts.append(next((m.text for m in request if isinstance(m, SystemMessage)), ""))


# --- printing -----------------------------------------------------------------------------------


def _indented(text: str, first: str, rest: str) -> str:
    lines = text.strip("\n").splitlines() or [""]
    return "\n".join([first + lines[0], *(rest + line for line in lines[1:])])


def _call(name: str, args: Mapping[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def print_turn(messages: Sequence[BaseMessage], user: str, say: Any) -> None:
    """One turn of a transcript: what the user said, each tool call and result, and the answer."""
    width = max(len(user), 5)
    pad = " " * (width + 5)
    for message in messages:
        if isinstance(message, HumanMessage):
            say(_indented(message.text, f"  {user:>{width}} > ", pad))
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:
                say(_indented(_call(call["name"], call["args"]), f"  {'agent':>{width}} -> ", pad))
            if message.text.strip():
                say(_indented(message.text, f"  {'agent':>{width}} : ", pad))
        elif isinstance(message, ToolMessage):
            say(_indented(message.text, f"  {'tool':>{width}} <- ", pad))


def ask(agent: Any, text: str, config: dict[str, Any]) -> list[BaseMessage]:
    """Run one user turn and return the messages it added, from the user's own message on.
    The turn is found by its id, since summarization may rewrite what came before it."""
    turn = HumanMessage(text, id=f"turn-{uuid.uuid4().hex}")
    result = agent.invoke({"messages": [turn]}, config)
    messages = result["messages"]
    start = next((i for i, m in enumerate(messages) if m.id == turn.id), 0)
    return messages[start:]


def describe_database(memory: MemoryService) -> str:
    """Where the memories live, with any password hidden."""
    conn = memory.conn
    dsn = conn.conninfo if hasattr(conn, "conninfo") else conn.info.dsn
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    if memory.config.database_url is None and str(info.get("host", "")).startswith("/") \
            and info.get("dbname") == DEFAULT_DATABASE:
        return f"embedded PostgreSQL (data directory {memory.config.resolved_data_dir()})"
    return f"PostgreSQL at {redact_dsn(dsn)}"


def _describe_embeddings(memory: MemoryService) -> str:
    name = embedding_model_name(memory.embeddings)
    return f"{name} (local, offline)" if name.startswith("local:") else name


def _tool_names(agent: Any) -> list[str]:
    node = getattr(agent, "nodes", {}).get("tools")
    return sorted(getattr(getattr(node, "bound", None), "tools_by_name", {}) or [])


# --- the demo -----------------------------------------------------------------------------------


def build_agent(model: BaseChatModel, memory: MemoryService) -> Any:
    """The demo's agent: ``create_agent`` with the whole memory stack, checkpointed in ``memory``'s database."""
    from .middleware import create_memory_agent

    return create_memory_agent(model, [], system_prompt=SYSTEM_PROMPT, memory=memory)


def _reset(agent: Any, memory: MemoryService, sessions: Sequence[Session]) -> None:
    """The demo is re-runnable: forget the threads its users had and every memory they saved
    (in their demo threads, and in the demo project, where earlier versions of the demo saved too)."""
    identities = {(s.user_id, s.project_id, s.thread_id) for s in sessions}
    identities |= {(s.user_id, DEMO_PROJECT, None) for s in sessions}
    for s in sessions:
        if agent.checkpointer is not None:
            agent.checkpointer.delete_thread(s.thread_id)
    for user, project, session in sorted(identities, key=str):
        who = {"user_id": user, "project_id": project, "session_id": session}
        for item in memory.list_memories(**who, status=None, limit=1000):
            if item.user_id == user:
                memory.delete_memory(item.id, **who, hard=True)


def _run_session(agent: Any, session: Session, recorder: PromptRecorder, say: Any, *, show_block: bool) -> None:
    user = session.user_id.removeprefix("demo-")
    say(f"\n{session.title}")
    say(f"  user_id={session.user_id!r} project_id={session.project_id!r} thread_id={session.thread_id!r}")
    for text in session.turns:
        seen = len(recorder.system_prompts)
        before = len(agent.get_state(session.config).values.get("messages", []))
        turn = ask(agent, text, {**session.config, "callbacks": [recorder]})
        if show_block:
            say(f"  the thread held {before} messages before this turn: what the agent knows of the user comes "
                "from long-term memory")
            first = recorder.system_prompts[seen] if len(recorder.system_prompts) > seen else ""
            block = memory_block(first)
            if block is None:
                say("  the model's system prompt had no <long_term_memory> block: nothing was injected")
            else:
                say("  memory block the model received, appended to its system prompt:")
                say(_indented(block, "    | ", "    | "))
        print_turn(turn, user, say)


def run_demo(memory: MemoryService, out: TextIO | None = None, *, choice: ChatModelChoice | None = None) -> None:
    """Run the two sessions and the second user's check on ``memory``'s database, printing a transcript."""
    out = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    choice = choice or choose_chat_model()
    agent = build_agent(choice.model, memory)
    _reset(agent, memory, SESSIONS)
    say("agent-memory demo: one agent, two sessions of one user, and a second user")
    if choice.offline:
        say(f"  model:      {choice.description}.")
        say("              No OPENAI_API_KEY or OPENAI_BASE_URL is set, so the answers come from a few rules:")
        say("              it saves what the user states explicitly and quotes the memories it finds in its")
        say("              system prompt. Set OPENAI_API_KEY to run the same demo with a real chat model.")
    else:
        say(f"  model:      {choice.description}")
    say(f"  database:   {describe_database(memory)}")
    say(f"  embeddings: {_describe_embeddings(memory)}")
    say("  agent:      create_memory_agent(model, system_prompt=...): create_agent with working, short-term,")
    say("              long-term (MemoryMiddleware) and episodic (PostgreSQL checkpointer) memory")
    tools = _tool_names(agent)
    if tools:
        say(f"  tools:      {', '.join(tools)}")

    recorder = PromptRecorder()
    first, second, other = SESSIONS
    _run_session(agent, first, recorder, say, show_block=False)
    _run_session(agent, second, recorder, say, show_block=True)
    _run_session(agent, other, recorder, say, show_block=True)

    hits = memory.search_memories(QUESTION, user_id=other.user_id, project_id=other.project_id, k=10)
    leaked = [h for h in hits if h.item.user_id != other.user_id]
    say(f"  search_memories for {other.user_id}: {len(hits)} memories, {len(leaked)} of them another user's")

    say(f"\nWhat {first.user_id} has stored now (memory.list_memories):")
    for item in memory.list_memories(user_id=first.user_id, project_id=first.project_id):
        say(f"  [{item.scope}/{item.memory_type}] {item.content}")
    say(f"\nDone. Chat with the same memory: agent-memory chat --user {first.user_id} --project {first.project_id}")
