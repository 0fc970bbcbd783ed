"""``agent-memory demo``: a real agent whose memory grows by itself, and forgets nobody's privacy.

An agent built with :func:`~agent_memory.middleware.create_memory_agent`
(LangChain's ``create_agent`` with the memory middleware stack, automatic
extraction and a PostgreSQL checkpointer) talks to two users on the embedded
database with local embeddings. In session 1 alice states a preference, the
editor she uses and a project decision; after each turn automatic extraction
(:class:`~agent_memory.middleware.ExtractionMiddleware`) learns them, and the
demo prints each consolidation decision and then the user and project
profiles built from them. Session 2 is a new thread, so its conversation
starts empty: the demo prints the profile sections and the memory block the
model received in its system prompt and the answer built on them, and a
change of editor replaces the old memory (SUPERSEDE, with its history). Then
bob asks the same question and gets nothing of alice's. The model is a real
one when ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` is set (it also extracts),
else the offline rule-based model of :mod:`agent_memory.demo_model`, which
only acknowledges statements so that the extraction rules are what learns.

The transcript helpers here (:class:`PromptRecorder`, :func:`print_turn`)
are shared with ``agent-memory chat``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO
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

from .db.connection import get_connection, redact_dsn
from .demo_model import ChatModelChoice, choose_chat_model, offline_chat_model
from .embeddings import embedding_model_name
from .extraction.pipeline import ExtractionReport, Outcome
from .models import Decision
from .profiles.fields import fields_of
from .profiles.store import Profile
from .queries.erase import forget_demo_learning
from .service import DEFAULT_DATABASE, MemoryService

if TYPE_CHECKING:
    from .middleware import ExtractionMiddleware

__all__ = [
    "SESSIONS",
    "SYSTEM_PROMPT",
    "PromptRecorder",
    "Session",
    "ask",
    "build_agent",
    "describe_database",
    "injected_context",
    "print_profile",
    "print_report",
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
                "Hi! I prefer concise answers with Python code examples. I use Vim.",
                ("We decided to use PostgreSQL 16 with pgvector for the webshop because it keeps the embeddings "
                 "next to the orders."),
            )),
    Session("Session 2: demo-alice again, in a new thread (its conversation starts empty)", "demo-alice",
            DEMO_PROJECT, "demo-alice-session-2", (QUESTION, "By the way, I switched from Vim to VS Code.")),
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


_INJECTED_TAGS = ("user_profile", "project_profile", "long_term_memory")


def injected_context(system_prompt: str) -> str | None:
    """What the memory layer appended to a system prompt: the ``<user_profile>`` and
    ``<project_profile>`` sections and the ``<long_term_memory>`` block, or ``None``.

    The last of each tag counts: the agent's own instructions may mention them, and profile
    and memory contents are escaped, so they cannot contain them."""
    spans = []
    for tag in _INJECTED_TAGS:
        end = system_prompt.rfind(f"</{tag}>")
        start = system_prompt.rfind(f"<{tag}>", 0, end)
        if end >= 0 and start >= 0:
            spans.append((start, end + len(tag) + 3))
    if not spans:
        return None
    return system_prompt[min(s for s, _ in spans):max(e for _, e in spans)]


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


def _outcome_line(outcome: Outcome) -> str:
    """One consolidation decision, for people: what happened to which memory, who decided and why."""
    if outcome.rejection is not None:
        return f"REJECTED {outcome.proposal.content!r} ({outcome.rejection.message})"
    decision = outcome.decision
    if decision is Decision.SUPERSEDE and outcome.replaced is not None:
        what = f"{outcome.proposal.content!r} replaces {outcome.replaced.content!r}"
    elif decision is Decision.UPDATE and outcome.memory is not None:
        what = f"{outcome.memory.content!r}"
    else:
        what = f"{outcome.proposal.content!r}"
    return f"{decision.value.upper() if decision else '?'} {what} ({outcome.decided_by}: {outcome.reason})"


def print_report(report: ExtractionReport, say: Callable[[str], None], *, indent: str) -> None:
    """What one automatic extraction run did, one line per decision (nothing when it found nothing)."""
    if report.status != "done":
        say(f"{indent}extraction: {report.status}" + (f" ({report.error})" if report.error else ""))
        return
    for outcome in report.outcomes:
        say(f"{indent}extraction: {_outcome_line(outcome)}")
    if report.profiles_rebuilt:
        say(f"{indent}profiles rebuilt: {', '.join(report.profiles_rebuilt)}")


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(_value(v) for v in value)
    if isinstance(value, Mapping):  # a key decision
        rationale = f" (rationale: {value['rationale']})" if value.get("rationale") else ""
        return f"{value['decision']}{rationale}"
    return str(value)


def print_profile(profile: Profile, say: Callable[[str], None]) -> None:
    """A profile's non-empty fields, one per line."""
    built = f"built by {profile.built_by}" if profile.built_by else "never built"
    manual = f", set by hand: {', '.join(sorted(profile.manual))}" if profile.manual else ""
    say(f"  {profile.kind} profile of {profile.subject_id} ({built}{manual}):")
    filled = [(name, profile.fields.get(name)) for name in fields_of(profile.kind) if profile.fields.get(name)]
    for name, value in filled:
        say(f"    {name}: {_value(value)}")
    if not filled:
        say("    (empty)")


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


def build_agent(model: BaseChatModel, memory: MemoryService, *,
                extraction: ExtractionMiddleware | None = None, offline_summary: bool = False) -> Any:
    """The demo's agent: ``create_agent`` with the whole memory stack, checkpointed in ``memory``'s database.

    ``extraction``: an :class:`~agent_memory.middleware.ExtractionMiddleware` to learn with instead of
    the default one (the demo passes its own to print each run's report). ``offline_summary=True``:
    long threads are summarized without the model (the offline rule-based model can't write a summary;
    see :func:`~agent_memory.middleware.short_term_memory`)."""
    from .middleware import create_memory_agent

    summarization = {"offline_summary": offline_summary}
    if extraction is None:
        return create_memory_agent(model, [], system_prompt=SYSTEM_PROMPT, memory=memory,
                                   summarization=summarization)
    return create_memory_agent(model, [], system_prompt=SYSTEM_PROMPT, memory=memory, extraction=False,
                               summarization=summarization, middleware=[extraction])


def _reset(agent: Any, memory: MemoryService, sessions: Sequence[Session]) -> None:
    """The demo is re-runnable: forget the threads its users had, every memory they saved (in their
    demo threads, and in the demo project, where earlier versions of the demo saved too), what
    extraction read and counted in the demo threads, and the demo users' and project's profiles."""
    identities = {(s.user_id, s.project_id, s.thread_id) for s in sessions}
    identities |= {(s.user_id, DEMO_PROJECT, None) for s in sessions}
    for s in sessions:
        if agent.checkpointer is not None:
            agent.checkpointer.delete_thread(s.thread_id, user_id=s.user_id)
    for user, project, session in sorted(identities, key=str):
        mine = memory.for_user(user, project_id=project, session_id=session)
        for item in mine.list(status=None, limit=1000):
            if item.user_id == user:
                mine.delete(item.id, hard=True)
    statements = forget_demo_learning(
        users=sorted({s.user_id for s in sessions}), threads=sorted({s.thread_id for s in sessions}),
        projects=sorted({DEMO_PROJECT} | {s.project_id for s in sessions if s.project_id}))
    with get_connection(memory.conn) as conn, conn.transaction():
        for statement in statements:
            conn.execute(*statement)


def _run_session(agent: Any, session: Session, recorder: PromptRecorder, say: Any, *, show_block: bool,
                 extraction: ExtractionMiddleware) -> None:
    user = session.user_id.removeprefix("demo-")
    indent = " " * (max(len(user), 5) + 5)
    say(f"\n{session.title}")
    say(f"  user_id={session.user_id!r} project_id={session.project_id!r} thread_id={session.thread_id!r}")
    for i, text in enumerate(session.turns):
        seen = len(recorder.system_prompts)
        before = len(agent.get_state(session.config).values.get("messages", []))
        reports = len(extraction.reports)
        turn = ask(agent, text, {**session.config, "callbacks": [recorder]})
        if show_block and i == 0:
            say(f"  the thread held {before} messages before this turn: what the agent knows of the user comes "
                "from long-term memory")
            first = recorder.system_prompts[seen] if len(recorder.system_prompts) > seen else ""
            block = injected_context(first)
            if block is None:
                say("  the model's system prompt had no profile and no <long_term_memory> block: nothing was injected")
            else:
                say("  profiles and memories the model received, appended to its system prompt (blank lines left out):")
                say(_indented("\n".join(line for line in block.splitlines() if line.strip()), "    | ", "    | "))
        print_turn(turn, user, say)
        for report in list(extraction.reports)[reports:]:
            print_report(report, say, indent=indent)


def run_demo(memory: MemoryService, out: TextIO | None = None, *, choice: ChatModelChoice | None = None) -> None:
    """Run the two sessions and the second user's check on ``memory``'s database, printing a transcript:
    what extraction learned after each turn, the profiles it built, and what the model received."""
    from .middleware import ExtractionMiddleware

    out = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    choice = choice or choose_chat_model()
    if choice.offline:
        # the offline model only acknowledges statements: the extraction rules are what learns them
        model, extraction_llm = offline_chat_model(save_with_tool=False), None
    else:
        model, extraction_llm = choice.model, choice.model
    # inline and after every turn, whatever MEMORY_EXTRACTION says: the demo prints each run
    extraction = ExtractionMiddleware(memory, llm=extraction_llm, mode="inline", every=1)
    agent = build_agent(model, memory, extraction=extraction, offline_summary=choice.offline)
    _reset(agent, memory, SESSIONS)
    say("agent-memory demo: memory that grows by itself, over two sessions of one user, and a second user")
    if choice.offline:
        say(f"  model:      {choice.description}.")
        say("              No OPENAI_API_KEY or OPENAI_BASE_URL is set, so the answers come from a few rules: it")
        say("              acknowledges what the user states and quotes the memories in its system prompt.")
        say("  extraction: after every turn, by rules (no LLM). Set OPENAI_API_KEY for a real model to do both.")
    else:
        say(f"  model:      {choice.description}")
        say("  extraction: after every turn, by the same model (structured output)")
    say(f"  database:   {describe_database(memory)}")
    say(f"  embeddings: {_describe_embeddings(memory)}")
    say("  agent:      create_memory_agent(model, ...): working, short-term, long-term (MemoryMiddleware,")
    say("              ExtractionMiddleware) and episodic (PostgreSQL checkpointer) memory")
    tools = _tool_names(agent)
    if tools:
        say(f"  tools:      {', '.join(tools)}")

    recorder = PromptRecorder()
    first, second, other = SESSIONS
    _run_session(agent, first, recorder, say, show_block=False, extraction=extraction)

    alice = memory.for_user(first.user_id, project_id=first.project_id)
    if extraction_llm is not None:
        # the middleware rebuilt them by rules when the model's memory_save calls changed them mid-run
        alice.refresh_profiles(force=True, llm=extraction_llm)
    say("\nProfiles built from session 1 (memory.for_user(...).profiles(), rebuilt only when their memories change):")
    profiles = alice.profiles()
    for profile in (profiles.user, profiles.project):
        if profile is not None:
            print_profile(profile, say)

    _run_session(agent, second, recorder, say, show_block=True, extraction=extraction)
    _run_session(agent, other, recorder, say, show_block=True, extraction=extraction)

    hits = memory.for_user(other.user_id, project_id=other.project_id).search(QUESTION, k=10)
    leaked = [h for h in hits if h.item.user_id != other.user_id]
    say(f"  search for {other.user_id}: {len(hits)} memories, {len(leaked)} of them another user's")

    items = alice.list(status=["active", "superseded"])
    active = sum(item.status == "active" for item in items)
    say(f"\nWhat {first.user_id} has stored now (memory.for_user(...).list()): {active} active memories, "
        f"{len(items) - active} superseded")
    replacing = next((i for i in items if i.status == "active" and i.superseded_by is None
                      and any(r.superseded_by == i.id for r in items)), None)
    if replacing is not None:
        say(f"  history of {replacing.content!r}: the old one is kept, with when each held")
        for version in alice.history(replacing.id):
            held = f"to {version.valid_to:%H:%M:%S}" if version.valid_to else "on"
            say(f"    {version.content:<32} {version.status:<10} from {version.valid_from:%H:%M:%S} {held}")
    say(f"\nDone. Chat with the same memory: agent-memory chat --user {first.user_id} --project {first.project_id}")
