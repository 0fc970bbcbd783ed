"""``agent-memory demo``: memory that grows by itself across sessions, profiles, and a second user
who sees nothing; and the offline demo model's rules (what it saves, and that its answers come only
from the injected block)."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agent_memory.demo import SESSIONS, injected_context, run_demo
from agent_memory.demo_model import (
    ChatModelChoice,
    Statement,
    choose_chat_model,
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
from agent_memory.testing import ScriptedChatModel

ALICE, _, BOB = SESSIONS


def _section(text: str, start: str, end: str | None = None) -> str:
    after = text.split(start, 1)[1]
    return after.split(end, 1)[0] if end else after


def _without_times(text: str) -> str:
    return re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", text)


# --- the demo -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_offline_demo_learns_by_itself_builds_profiles_and_reruns(memory):
    # left over from earlier runs: bob's note in the demo project, a hand-set field of alice's profile
    memory.for_user(BOB.user_id, project_id=ALICE.project_id).add("The webshop front end is built with Vue 3", scope="project", memory_type="context")
    memory.for_user(ALICE.user_id).update_profile({"username": "Old Alice"})
    run_demo(memory, first_run := io.StringIO(), choice=choose_chat_model(offline=True))
    run_demo(memory, out := io.StringIO(), choice=choose_chat_model(offline=True))
    text = out.getvalue()
    assert _without_times(text) == _without_times(first_run.getvalue())  # re-runnable: the same story again
    assert "offline scripted model" in text and "No OPENAI_API_KEY" in text and "by rules (no LLM)" in text

    first = _section(text, "Session 1:", "Profiles built from session 1")
    assert "memory_save(" not in first and "Got it, thanks." in first  # the model saves nothing itself
    assert ("extraction: ADD 'Prefers concise answers with Python code examples.' (similarity: nothing similar "
            "is stored)") in first
    assert "extraction: ADD 'Uses Vim.'" in first
    assert "extraction: ADD 'The team decided to use PostgreSQL 16 with pgvector for the webshop" in first
    assert "profiles rebuilt: user" in first and "profiles rebuilt: project" in first

    profiles = _section(text, "Profiles built from session 1", "Session 2:")
    user = _section(profiles, "user profile of demo-alice (built by rules):", "project profile")
    assert "communication_style: concise" in user and "programming_languages: Python" in user
    assert "frequently_used_tools: Vim" in user and "Old Alice" not in text
    project = _section(profiles, "project profile of demo-webshop (built by rules):")
    assert "tech_stack: PostgreSQL; pgvector" in project
    assert "(rationale: it keeps the embeddings next to the orders)" in project

    second = _section(text, "Session 2:", "Another user:")
    assert "held 0 messages before this turn" in second
    user_section = _section(second, "| <user_profile>", "| </user_profile>")
    assert "| Communication style: concise" in user_section and "| Frequently used tools: Vim" in user_section
    assert "| Tech stack: PostgreSQL; pgvector" in _section(second, "| <project_profile>", "| </project_profile>")
    block = _section(second, "| <long_term_memory>", "| </long_term_memory>")
    assert '<memory scope="user" type="preference">Prefers concise answers with Python code examples.</memory>' in block
    assert '<memory scope="project" type="decision">The team decided to use PostgreSQL 16' in block
    answer = _section(second, "agent : ", "alice > By the way")
    assert "Prefers concise answers with Python code examples. (preference, user memory)" in answer
    assert ("extraction: SUPERSEDE 'Switched from Vim to VS Code.' replaces 'Uses Vim.' (similarity: announces "
            "a change") in second

    other = _section(text, "Another user:", "What demo-alice has stored now")
    assert "nothing was injected" in other and "extraction:" not in other
    assert "I don't know anything about you yet" in other and "PostgreSQL" not in _section(other, "agent : ")
    assert "search for demo-bob: 0 memories" in other
    assert "Vue 3" not in text and "rate_limited" not in text

    stored = _section(text, "What demo-alice has stored now")
    assert "3 active memories, 1 superseded" in stored
    assert re.search(r"Uses Vim\. +superseded +from HH:MM:SS to HH:MM:SS", _without_times(stored))
    assert re.search(r"Switched from Vim to VS Code\. +active +from HH:MM:SS on", _without_times(stored))
    alice = {"user_id": ALICE.user_id, "project_id": ALICE.project_id}
    assert {m.content for m in memory.for_user(**alice).list()} == {
        "Prefers concise answers with Python code examples.", "Switched from Vim to VS Code.",
        ("The team decided to use PostgreSQL 16 with pgvector for the webshop because it keeps the embeddings "
         "next to the orders.")}
    profile = memory.for_user(**alice).profiles().user
    assert profile.fields["frequently_used_tools"] == ["VS Code"] and not profile.manual
    assert memory.for_user(BOB.user_id).list() == []
    assert memory.for_user(BOB.user_id).profiles().user_text == ""


def _user_lines(messages: list[BaseMessage]) -> list[str]:
    return [line.removeprefix("user: ") for line in messages[-1].text.splitlines() if line.startswith("user: ")]


def _extracted(messages: list[BaseMessage]) -> dict:
    """A real model's extraction, played by the rules on the transcript's user lines."""
    return {"memories": [{"content": s.content, "memory_type": s.memory_type, "scope": s.scope, "confidence": 0.95}
                         for line in _user_lines(messages) for s in statements_in(line)]}


def _known(messages: list[BaseMessage]) -> dict:
    """Each proposal is already stored: the model saved it with memory_save during the turn."""
    count = messages[-1].text.count("<proposal number=")
    return {"decisions": [{"proposal": n, "decision": "NONE", "target": "M1", "reason": "saved with memory_save"}
                          for n in range(1, count + 1)]}


@pytest.mark.slow
def test_with_a_real_model_the_model_saves_and_extracts(memory):
    model = ScriptedChatModel(script=offline_reply, structured={
        "ExtractedMemories": _extracted, "ConsolidationDecisions": _known,
        "UserProfileUpdate": [{"communication_style": "concise", "programming_languages": ["Python"]}],
        "ProjectProfileUpdate": [{"tech_stack": ["PostgreSQL", "pgvector"]}],
    })
    run_demo(memory, out := io.StringIO(), choice=ChatModelChoice(model, "a scripted stand-in", False))
    text = out.getvalue()
    assert "model:      a scripted stand-in" in text and "by the same model (structured output)" in text
    first = _section(text, "Session 1:", "Profiles built from session 1")
    assert "memory_save(content='Prefers concise answers with Python code examples.'" in first
    # what the model saved with memory_save in the turn is not proposed again (issue 31)
    assert ("extraction: NONE 'Prefers concise answers with Python code examples.' (similarity: saved with "
            "memory_save in the same turn (user scope: 'Prefers concise answers with Python code examples.', "
            "cosine 1.00))") in first
    assert "extraction: ADD" not in text
    assert "failed" not in text
    asked = {name for name, _ in model.structured_requests}
    assert "ExtractedMemories" in asked and "ConsolidationDecisions" not in asked  # nothing left to decide
    profiles = _section(text, "Profiles built from session 1", "Session 2:")
    assert "user profile of demo-alice (built by llm)" in profiles and "communication_style: concise" in profiles
    assert "project profile of demo-webshop (built by llm)" in profiles


class _Built(Exception):
    """Stops run_demo once its agent is built."""


def test_the_offline_demo_asks_for_offline_summaries_and_a_real_model_summarizes(memory, monkeypatch):
    """The rule-based model can't write a summary, so the offline demo chooses the extractive one
    explicitly (short_term_memory no longer guesses from the model's class)."""
    import agent_memory.middleware as middleware

    built: list[dict] = []

    def recording(model, tools, **options):
        built.append(options)
        raise _Built

    monkeypatch.setattr(middleware, "create_memory_agent", recording)
    stand_in = ChatModelChoice(ScriptedChatModel(script=["ok"]), "a scripted stand-in", False)
    for choice in (choose_chat_model(offline=True), stand_in):
        with pytest.raises(_Built):
            run_demo(memory, io.StringIO(), choice=choice)
    offline, real = (options["summarization"] for options in built)
    assert offline == {"offline_summary": True} and real == {"offline_summary": False}


def test_the_injected_sections_are_read_back_from_the_system_prompt():
    prompt = ("Use <long_term_memory> when it helps.\n\n<user_profile>\nName: Al\n</user_profile>\n\n"
              "<project_profile>\nTech stack: Go\n</project_profile>\n\n" + _block(("Uses Go", "decision", "project")))
    context = injected_context(prompt)
    assert context.startswith("<user_profile>") and context.endswith("</long_term_memory>")
    assert "Tech stack: Go" in context and "Use <long_term_memory> when" not in context
    assert injected_context("You are helpful.") is None
    assert injected_context("Be brief.\n\n" + _block(("Uses Go", "decision", "project"))).startswith(
        "<long_term_memory>")


# --- the offline model's rules ------------------------------------------------------------------


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


# --- a model endpoint that fails: one line, not a traceback ------------------------------------


@pytest.fixture
def failing_endpoint():
    """A local OpenAI-compatible endpoint that fails every chat request: ``mode`` is ``"500"``
    (an HTTP 500 with a JSON error) or ``"html"`` (HTTP 200 with a body that is not JSON)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = {"mode": "500", "requests": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length") or 0))
            state["requests"] += 1
            if state["mode"] == "500":
                body, status, kind = b'{"error": {"message": "boom", "type": "server_error"}}', 500, "application/json"
            else:
                body, status, kind = b"<html>not an API</html>", 200, "text/html"
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["500", "html"])
def test_the_demo_reports_a_failing_endpoint_in_one_line(dsn, memory, monkeypatch, capsys, failing_endpoint, mode):
    from agent_memory.cli import main

    url, state = failing_endpoint
    state["mode"] = mode
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("AGENT_MEMORY_DEBUG", raising=False)
    assert main(["demo"]) == 1
    captured = capsys.readouterr()
    assert state["requests"] >= 1 and "Session 1" in captured.out  # it got as far as the first model call
    assert "Traceback" not in captured.err and captured.err.count("\n") == 1
    assert captured.err.startswith("agent-memory: error: the model endpoint failed")
    assert "OPENAI_BASE_URL" in captured.err and "--offline" in captured.err
    with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises, --debug lets it through
        main(["demo", "--debug"])
