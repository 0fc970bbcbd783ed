"""The offline demo model's rules: what it saves, and that its answers come only from the injected block."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agent_memory.demo_model import (
    Statement,
    injected_memories,
    memory_block,
    offline_reply,
    statements_in,
)
from agent_memory.formatting import format_memories_for_prompt
from agent_memory.models import (
    MemoryItem,
    MemoryType,
    Scope,
    Source,
    Status,
    Visibility,
)


@pytest.mark.parametrize(("said", "saved"), [
    ("I prefer concise answers with Python examples.",
     Statement("Prefers concise answers with Python examples.", "preference", "user")),
    ("We decided to use PostgreSQL 16 because it has pgvector",
     Statement("The team decided to use PostgreSQL 16 because it has pgvector.", "decision", "project")),
    ("Remember that my dog is called Rex!", Statement("Their dog is called Rex.", "fact", "user")),
    ("I'm allergic to peanuts.", Statement("Is allergic to peanuts.", "constraint", "user")),
    ("Never use emojis in my code.", Statement("Wants the assistant to never use emojis in their code.", "preference",
                                               "user")),
    ("I usually study in the morning.", Statement("Usually studies in the morning.", "habit", "user")),
    ("I work at Acme as a data engineer", Statement("Works at Acme as a data engineer.", "fact", "user")),
])
def test_explicit_statements_become_memories(said, saved):
    assert statements_in(said) == [saved]


@pytest.mark.parametrize("said", ["Which database do we use?", "hello", "Tell me a joke.", ""])
def test_questions_and_small_talk_are_not_saved(said):
    assert statements_in(said) == []


def test_several_statements_in_one_turn():
    kinds = [s.memory_type for s in statements_in("Hi! I prefer tea. We agreed to ship on Fridays. What now?")]
    assert kinds == ["preference", "decision"]


def _block(*memories: tuple[str, str, str]) -> str:
    """The block the memory layer would inject for these (content, type, scope)."""
    now = datetime.now(UTC)
    items = [MemoryItem(id=uuid4(), content=c, memory_type=MemoryType(t), scope=Scope(s), scope_id="x", user_id="u",
                        project_id=None, session_id=None, source=Source.USER, source_id=None, confidence=1.0,
                        visibility=Visibility.MEMBERS, status=Status.ACTIVE, created_at=now, updated_at=now,
                        last_used_at=None, access_count=0, metadata={}) for c, t, s in memories]
    return format_memories_for_prompt(items)


def test_the_injected_block_is_read_back_unescaped():
    prompt = "Use what is in <long_term_memory> when it helps.\n\n" + _block(
        ("Prefers <b>bold</b> & short answers", "preference", "user"), ("Uses Go", "decision", "project"))
    assert memory_block(prompt).startswith("<long_term_memory>\nWhat you remember")
    assert injected_memories(prompt) == [Statement("Prefers <b>bold</b> & short answers", "preference", "user"),
                                         Statement("Uses Go", "decision", "project")]
    assert injected_memories("You are helpful.") == [] and memory_block("no block") is None


def test_a_statement_is_saved_then_confirmed():
    reply = offline_reply([HumanMessage("I prefer tea.")])
    [call] = reply.tool_calls
    assert call["name"] == "memory_save" and call["args"]["memory_type"] == "preference"
    result = ToolMessage("Saved memory 0b6a9d7e-1c2f-4a53-9e0f-2d9b1f0c3a4e (preference, user): Prefers tea.",
                         tool_call_id=call["id"], name="memory_save")
    confirm = offline_reply([HumanMessage("I prefer tea."), reply, result]).text
    assert "Saved memory (preference, user): Prefers tea." in confirm and "0b6a9d7e" not in confirm


def test_answers_only_from_what_was_injected():
    question = HumanMessage("How should you answer me?")
    with_block = offline_reply([SystemMessage("Be nice.\n\n" + _block(("Prefers green tea", "preference", "user"))),
                                question])
    assert "- Prefers green tea (preference, user memory)" in with_block.text
    without = offline_reply([SystemMessage("Be nice."), question])
    assert "I don't know anything about you yet" in without.text and "green tea" not in without.text
    assert offline_reply([question]).text == without.text
    assert isinstance(without, AIMessage) and not without.tool_calls
