"""One step of a ``create_memory_agent`` session, run in its own Python process by test_memory_agent.py.

Usage: python memory_agent_script.py DSN THREAD USER ACTION
ACTION: ``start`` (ask the agent to email Bob; it stops for approval), ``approve`` or ``reject``
(resume that run), ``state`` (only read the thread). Prints one JSON line: the interrupts, the
messages of the thread, and the emails that were actually sent (from a file next to the DSN's outbox).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agent_memory import MemoryService
from agent_memory.middleware import create_memory_agent
from agent_memory.testing import ScriptedChatModel, tool_call

OUTBOX = Path(os.environ["AGENT_OUTBOX"])


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    with OUTBOX.open("a") as f:
        f.write(json.dumps({"to": to, "body": body}) + "\n")
    return f"email sent to {to}"


def script(messages):
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return f"done: {last.text}"
    return AIMessage("", tool_calls=[tool_call("send_email", "call-email-1", to="bob", body="Lunch at noon?")])


def main(dsn: str, thread: str, user: str, action: str) -> None:
    with MemoryService(dsn) as memory:
        agent = create_memory_agent(ScriptedChatModel(script=script), [send_email], memory=memory,
                                    interrupt_on={"send_email": True})
        config = {"configurable": {"thread_id": thread, "user_id": user}}
        if action == "start":
            result = agent.invoke({"messages": [("user", "email Bob about lunch")]}, config)
        elif action in ("approve", "reject"):
            decision = {"type": action} if action == "approve" else {"type": "reject", "message": "not now"}
            result = agent.invoke(Command(resume={"decisions": [decision]}), config)
        else:
            result = agent.get_state(config).values
        state = agent.get_state(config)
        print(json.dumps({
            "interrupts": [str(i.value) for i in result.get("__interrupt__", [])],
            "next": list(state.next),
            "messages": [[type(m).__name__, m.text] for m in state.values.get("messages", [])],
            "sent": OUTBOX.read_text().splitlines() if OUTBOX.exists() else [],
        }))


if __name__ == "__main__":
    main(*sys.argv[1:5])
