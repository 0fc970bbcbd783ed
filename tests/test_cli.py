"""The quickstart's main job (the demo), the chat, and the command line, on the test database."""

from __future__ import annotations

import io
import json

import pytest
from langchain_core.messages import HumanMessage

from agent_memory.cli import main
from agent_memory.demo import build_agent
from agent_memory.demo_model import DEFAULT_CHAT_MODEL, choose_chat_model


def _section(text: str, start: str, end: str | None = None) -> str:
    after = text.split(start, 1)[1]
    return after.split(end, 1)[0] if end else after


@pytest.mark.slow
def test_a_real_model_only_when_asked_for():
    assert choose_chat_model({}).offline
    assert choose_chat_model({"OPENAI_API_KEY": "sk-test"}, offline=True).offline
    real = choose_chat_model({"OPENAI_API_KEY": "sk-test"})  # built, never called: no network in tests
    assert not real.offline and real.model.model_name == DEFAULT_CHAT_MODEL and DEFAULT_CHAT_MODEL in real.description
    local = choose_chat_model({"OPENAI_BASE_URL": "http://localhost:11434/v1", "AGENT_MEMORY_CHAT_MODEL": "llama3.2"})
    assert local.model.model_name == "llama3.2" and local.model.openai_api_base == "http://localhost:11434/v1"
    assert "localhost:11434" in local.description


def test_the_model_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AGENT_MEMORY_CHAT_MODEL", "gpt-test")
    assert choose_chat_model().model.model_name == "gpt-test"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert choose_chat_model().offline


@pytest.mark.slow
def test_chat_reads_turns_and_commands_from_stdin(dsn, memory, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    lines = ["I prefer answers in British English.", "/memories", "/new", "How should you answer me?",
             "/search british", "/forget not-an-id", "/nonsense", "/quit", "this line is never read"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    who = ["--user", tenant.user, "--project", tenant.project, "--thread", tenant.session]
    assert main(["chat", *who]) == 0
    text = capsys.readouterr().out
    assert "offline scripted model" in text and f"thread '{tenant.session}'" in text
    assert "memory_save(content='Prefers answers in British English.'" in text
    assert "[user/preference] Prefers answers in British English." in _section(text, "you> /memories", "you> /new")
    assert "new thread chat-" in text
    assert "- Prefers answers in British English. (preference, user memory)" in _section(text, "How should you")
    assert "error: memory_id: must be a memory id" in text and "unknown command '/nonsense'" in text
    assert "never read" not in text
    # --thread resumes the checkpointed thread (the second question went to the /new one)
    monkeypatch.setattr("sys.stdin", io.StringIO("What do you remember?\n"))  # ends at end of input
    assert main(["chat", *who]) == 0
    assert "Prefers answers in British English. (preference, user memory)" in capsys.readouterr().out
    agent = build_agent(choose_chat_model(offline=True).model, memory)
    state = agent.get_state({"configurable": {"user_id": tenant.user, "thread_id": tenant.session}})
    asked = [m.text for m in state.values["messages"] if isinstance(m, HumanMessage)]
    assert asked == ["I prefer answers in British English.", "What do you remember?"]


def test_command_line_round_trip(dsn, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    who = ["--user", tenant.user, "--project", tenant.project]
    assert main(["add", "I keep my notes in Obsidian", "--type", "habit", "--json", *who]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert saved["memory_type"] == "habit" and saved["scope"] == "user"
    assert main(["search", "where are my notes?", "-k", "1", "--json", *who]) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["id"] == saved["id"]
    assert main(["stats", "--json", *who]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 1
    assert main(["delete", saved["id"], *who]) == 0
    assert "archived" in capsys.readouterr().out
    assert main(["list", "--json", *who]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_command_line_errors_are_one_clear_line(dsn, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    assert main(["delete", "not-an-id", "--user", tenant.user]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-memory: error: memory_id: must be a memory id") and "Traceback" not in err
    assert main(["add", "my password is hunter2!", "--user", tenant.user]) == 1
    assert "rejected (sensitive)" in capsys.readouterr().err
    monkeypatch.setenv("MEMORY_MIN_CONFIDENCE", "2")
    assert main(["stats", "--user", tenant.user]) == 2
    assert "min_confidence must be a number between 0 and 1" in capsys.readouterr().err
