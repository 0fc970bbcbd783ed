"""The issue's coding-assistant scenario, end to end (issue 31).

A LangChain v1 coding assistant (``create_memory_agent``), two users of one shared project,
three sessions, the offline defaults (no memory model: the rules extract; ``MEMORY_EXTRACT_EVERY``,
``MEMORY_MAX_EXTRACTIONS``, ``MEMORY_INJECT_WHEN`` as shipped), a scripted chat model. What a
new user noticed within a day must not happen: a fact saved by ``memory_save(scope="project")``
comes back as the user's "For the team: ..."; a project statement lands in the user's profile;
a generic question gets memories; a turn of a long session is never read.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agent_memory import MemoryService, Scope
from agent_memory.middleware import create_memory_agent
from agent_memory.testing import ScriptedChatModel, tool_call

RULE = "Remember for the team: all endpoints must return JSON errors with a code field."
SAVED = "All API endpoints must return errors as JSON with a code field"


def assistant(messages: list[Any]) -> AIMessage:
    """Saves the team's rule for the project with memory_save when told it; else answers."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("Noted for the project.")
    if "endpoints must return" in messages[-1].text:
        return AIMessage("", tool_calls=[tool_call("memory_save", content=SAVED, memory_type="constraint",
                                                   scope="project")])
    return AIMessage("Sure.")


def memories(prompt: str) -> str:
    """The memory block of a system prompt (the profiles are outside it)."""
    return prompt[prompt.index("<long_term_memory>"):] if "<long_term_memory>" in prompt else ""


def test_two_users_one_project_three_sessions_with_the_offline_defaults(memory: MemoryService) -> None:
    tag = uuid.uuid4().hex[:8]
    alice, bob, project = f"alice-{tag}", f"bob-{tag}", f"api-{tag}"
    memory.create_project(project, user_id=alice)
    memory.add_member("project", project, bob, "editor", user_id=alice)
    model = ScriptedChatModel(script=assistant)
    agent = create_memory_agent(model, memory=memory, system_prompt="You are a coding assistant.")

    def turn(user: str, thread: str, text: str) -> str:
        agent.invoke({"messages": [("user", text)]},
                     {"configurable": {"user_id": user, "project_id": project, "thread_id": thread}})
        return model.system_prompts[-1]

    # session 1, alice: a preference, the team's rule (saved by the model at the project level), more
    turn(alice, f"a1-{tag}", "I prefer Python for scripting tasks.")
    turn(alice, f"a1-{tag}", RULE)
    turn(alice, f"a1-{tag}", "In this repo we deploy on Fly.io.")
    turn(alice, f"a1-{tag}", "I use Neovim with a dark theme.")

    # session 2, bob, the same project: the project's memories reach him, alice's own do not
    turn(bob, f"b1-{tag}", "I am a frontend developer.")
    shown = memories(turn(bob, f"b1-{tag}", "How should our API format its error responses?"))
    assert "JSON" in shown and "Python" not in shown
    generic = turn(bob, f"b1-{tag}", "Explain quantum entanglement simply.")
    assert memories(generic) == "" and "Python" not in generic  # a generic turn gets no memory item

    # session 3, alice's next: what session 1 left waiting is read before her first answer
    prompt = turn(alice, f"a2-{tag}", "Which scripting language do I prefer?")
    assert "Prefers Python for scripting tasks." in memories(prompt)
    assert "frontend" not in prompt  # bob's own memory never reaches alice

    mine = memory.for_user(alice, project_id=project)
    by_level = sorted((m.scope, m.content) for m in mine.list(limit=100))
    # one fact, one memory, at its level: the tool's save is not extracted again, the repo's
    # deployment is the project's, and nothing said of the team or the repo became alice's own
    assert [c for s, c in by_level if s == Scope.PROJECT and "JSON" in c] == [SAVED]
    assert any(s == Scope.PROJECT and "Fly.io" in c for s, c in by_level)
    own = [c for s, c in by_level if s == Scope.USER]
    assert sorted(own) == sorted(c for c in own if "team" not in c.lower() and "Fly.io" not in c and "JSON" not in c)
    assert "Prefers Python for scripting tasks." in own and any("Neovim" in c for c in own)  # turn 4 read too
    assert [c for s, c in by_level if s == Scope.USER and c.startswith("For the team")] == []
    # profiles are built from memories of their own level only
    profiles = mine.profiles()
    assert "Python" in profiles.user.render()
    assert all(word not in profiles.user.render() for word in ("JSON", "Fly.io", "endpoints"))
    assert profiles.project is not None
    bobs = [m.content for m in memory.for_user(bob).list(scope="user")]
    assert any("frontend" in c.lower() for c in bobs) and not any("Python" in c for c in bobs)
