"""``agent-memory chat``: talk to the full memory agent, as one user, in one thread.

It is the demo's agent (:func:`agent_memory.demo.build_agent`) in a loop,
for trying the memory with a real chat model: what you state is saved, a
new thread (``/new``, or another ``--thread``) starts an empty conversation
that still gets your memories, and ``--thread`` resumes an earlier one from
the PostgreSQL checkpointer. Without ``OPENAI_API_KEY``/``OPENAI_BASE_URL``
(or with ``--offline``) it runs the offline rule-based model and says so.
Reads lines from any stdin, so it can be scripted (``echo ... | agent-memory chat``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TextIO

from .demo import ask, build_agent, describe_database, print_turn
from .demo_model import ChatModelChoice
from .errors import AgentMemoryError
from .service import MemoryService

__all__ = ["COMMANDS", "Who", "run_chat"]

COMMANDS = {
    "/memories": "list what is stored for you (and the project)",
    "/search TEXT": "search your memories",
    "/forget ID": "delete (archive) one memory",
    "/stats": "counts of your memories",
    "/new": "start a new thread: an empty conversation that still gets your memories",
    "/help": "this list",
    "/quit": "leave (so does end of input)",
}


@dataclass(frozen=True)
class Who:
    """Whose memory the chat uses, and in which thread."""

    user_id: str
    project_id: str | None
    thread_id: str

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"user_id": self.user_id, "project_id": self.project_id,
                                 "thread_id": self.thread_id}}

    @property
    def ids(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "project_id": self.project_id, "session_id": self.thread_id}


def new_thread_id() -> str:
    return f"chat-{uuid.uuid4().hex[:8]}"


def _command(line: str, who: Who, memory: MemoryService, say: Callable[[str], None]) -> Who | None:
    """Run one ``/command``; the (possibly new) identity, or ``None`` to leave."""
    name, _, arg = line.partition(" ")
    arg = arg.strip()
    if name in ("/quit", "/exit"):
        return None
    if name == "/help":
        for usage, what in COMMANDS.items():
            say(f"  {usage:<14} {what}")
    elif name == "/memories":
        items = memory.for_user(**who.ids).list()
        for item in items:
            say(f"  {item.id}  [{item.scope}/{item.memory_type}] {item.content}")
        say("" if items else "  no memories yet")
    elif name == "/search" and arg:
        hits = memory.for_user(**who.ids).search(arg, k=5)
        for hit in hits:
            say(f"  {hit.score:.3f}  {hit.id}  [{hit.item.scope}/{hit.item.memory_type}] {hit.content}")
        say("" if hits else "  no memories found")
    elif name == "/forget" and arg:
        item = memory.for_user(**who.ids).delete(arg)
        say(f"  archived: {item.content}")
    elif name == "/stats":
        from .middleware.tools import describe_stats  # what the agent's memory_stats tool says

        for text in describe_stats(memory.for_user(**who.ids).stats()).splitlines():
            say(f"  {text}")
    elif name == "/new":
        who = replace(who, thread_id=new_thread_id())
        say(f"  new thread {who.thread_id}: the conversation starts empty, your memories stay")
    else:
        say(f"  unknown command {line!r}; /help lists the commands")
    return who


def run_chat(memory: MemoryService, who: Who, choice: ChatModelChoice, *, inp: TextIO, out: TextIO) -> int:
    """The read-eval-print loop. Returns the exit status."""
    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    agent = build_agent(choice.model, memory, offline_summary=choice.offline)
    if choice.offline:
        say(f"model: {choice.description}. It only saves what you state explicitly (\"I prefer...\", "
            "\"we decided...\") and quotes the memories it is given; set OPENAI_API_KEY (or OPENAI_BASE_URL) "
            "to chat with a real model.")
    else:
        say(f"model: {choice.description}")
    say(f"database: {describe_database(memory)}")
    say(f"user {who.user_id!r}, project {who.project_id!r}, thread {who.thread_id!r} "
        f"(resume it with --thread {who.thread_id}). /help lists the commands, /quit leaves.")
    interactive = inp.isatty()
    while True:
        if interactive:
            out.write("you> ")
            out.flush()
        try:
            line = inp.readline()
        except KeyboardInterrupt:
            line = ""
        if not line:
            say()
            return 0
        line = line.strip()
        if not line:
            continue
        if not interactive:
            say(f"you> {line}")
        if line.startswith("/"):
            try:
                next_who = _command(line, who, memory, say)
            except AgentMemoryError as exc:
                say(f"  error: {exc}")
                continue
            if next_who is None:
                return 0
            who = next_who
            continue
        try:
            turn = ask(agent, line, who.config)
        except KeyboardInterrupt:
            say("  (interrupted)")
            continue
        except Exception as exc:  # noqa: BLE001 - a failed turn (network, model) should not end the chat
            say(f"  the turn failed ({type(exc).__name__}: {exc}); try again, or /quit")
            continue
        print_turn(turn[1:], "you", say)
