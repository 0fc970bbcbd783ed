"""The agent the episodic tests run, in the test process and in fresh processes.

As a script it plays one step of a session in a new process and prints one
line of JSON, the way a web server restarted between two requests would::

    python tests/episodic_agent.py DSN THREAD_ID USER_ID ACTION

ACTION is ``start`` (ask for an email, which waits for approval), ``approve``
or ``reject`` (answer the pending approval), or ``state`` (a page refresh:
read the thread's state and the user's session snapshot). ``send_email``
appends a line to the file named by ``EPISODIC_OUTBOX``, so a test can tell
which process really sent it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.types import Command

from agent_memory import MemoryConfig
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.middleware.episodic import SessionSnapshotMiddleware
from agent_memory.testing import ScriptedChatModel, tool_call

TODOS = [{"content": "write the quarterly report", "status": "pending"}]


def send_email(to: str) -> str:
    """Send an email to someone."""
    outbox = os.environ.get("EPISODIC_OUTBOX")
    if outbox:
        with open(outbox, "a") as f:
            f.write(json.dumps({"to": to, "pid": os.getpid()}) + "\n")
    return f"sent to {to}"


def reply(messages: list[BaseMessage]) -> AIMessage | str:
    """A function of the conversation, so a resumed process answers like the first would have."""
    last = messages[-1]
    if last.type == "human":
        if "email" in last.text:
            turn = sum(m.type == "human" for m in messages)
            return AIMessage("", tool_calls=[tool_call("send_email", f"call_{turn}", to="bob")])
        return f"echo: {last.text}"
    if last.type == "tool":
        return f"done: {last.text}"
    return "ok"


class TodoState(AgentState):
    todos: NotRequired[list[dict[str, Any]]]


class SeedTodos(AgentMiddleware):
    """Sets ``todos`` once, in the first run: a state value later checkpoints keep sharing."""

    state_schema = TodoState

    def before_agent(self, state: dict[str, Any], runtime: Any) -> dict[str, Any] | None:
        return None if state.get("todos") else {"todos": TODOS}

    async def abefore_agent(self, state: dict[str, Any], runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


def build_agent(checkpointer: PostgresCheckpointer, *, hitl: bool = False, fail_times: int = 0) -> Any:
    middleware: list[AgentMiddleware] = [SeedTodos(), SessionSnapshotMiddleware(checkpointer)]
    if hitl:
        middleware.append(HumanInTheLoopMiddleware(interrupt_on={"send_email": True}))
    model = ScriptedChatModel(script=reply, fail_times=fail_times)
    return create_agent(model, [send_email], middleware=middleware, checkpointer=checkpointer)


def run_config(thread_id: str, user_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "user_id": user_id}}


def dump_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [
        {"type": m.type, "text": m.text, "tool_calls": [c["name"] for c in getattr(m, "tool_calls", None) or []]}
        for m in messages
    ]


def main(dsn: str, thread_id: str, user_id: str, action: str) -> dict[str, Any]:
    with PostgresCheckpointer(dsn, config=MemoryConfig()) as checkpointer:
        agent = build_agent(checkpointer, hitl=True)
        config = run_config(thread_id, user_id)
        if action == "start":
            agent.invoke({"messages": [{"role": "user", "content": "please email bob"}]}, config)
        elif action == "approve":
            agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        elif action == "reject":
            agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}), config)
        elif action != "state":
            raise SystemExit(f"unknown action {action!r}")
        state = agent.get_state(config)
        started = time.perf_counter()
        snapshot = checkpointer.load_snapshot(thread_id, user_id=user_id)
        load_seconds = time.perf_counter() - started
        return {
            "pid": os.getpid(),
            "next": list(state.next),
            "interrupts": [i.value for i in state.interrupts],
            "messages": dump_messages(state.values.get("messages", [])),
            "snapshot": None if snapshot is None else {
                "title": snapshot.title, "message_count": snapshot.message_count,
                "recent_messages": [dict(m) for m in snapshot.recent_messages], "state": dict(snapshot.state),
            },
            "snapshot_load_seconds": load_seconds,
        }


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5]), default=str))
