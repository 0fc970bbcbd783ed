"""The quickstart's main job (the demo), the chat, and the command line, on the test database:
every command run for real against it, its help, its docs page (docs/reference/cli.md), and its errors."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from agent_memory.cli import main
from agent_memory.cli.errors import is_provider_error
from agent_memory.cli.parser import COMMANDS, MEMORY_TYPES, SCOPES, STATUSES, VISIBILITIES, build_parser
from agent_memory.demo import build_agent
from agent_memory.demo_model import DEFAULT_CHAT_MODEL, choose_chat_model
from agent_memory.models import MemoryType, Scope, Status, Visibility


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
             "/search british", "/forget not-an-id", "/stats", "/nonsense", "/quit", "this line is never read"]
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
    stats = _section(text, "you> /stats", "you> /nonsense")
    assert "1 active memories" in stats and "Recalls (searches and injections" in stats
    assert "Automatic learning in this session:" in stats and "Memories given to you in the last" in stats
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


def test_command_line_narrowing(dsn, monkeypatch, capsys, tenant, memory):
    monkeypatch.setenv("DATABASE_URL", dsn)
    me = memory.for_user(tenant.user)
    billing = me.add("The ACME invoice is due in December.", metadata={"tags": ["billing"]})
    me.add("The office plants need water on Fridays.")
    who = ["--user", tenant.user]
    assert main(["search", "what is due?", "--json", "--filter", '{"tags": {"$contains": "billing"}}', *who]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == [str(billing.id)]
    assert main(["list", "--json", "--filter", '{"tags": {"$exists": false}}', *who]) == 0
    assert [m["content"] for m in json.loads(capsys.readouterr().out)] == ["The office plants need water on Fridays."]
    assert main(["search", "invoice", "--json", "--known-at", "2020-01-01", *who]) == 0
    assert json.loads(capsys.readouterr().out) == []  # the memory knew nothing then
    assert main(["list", "--filter", "{tags: billing}", *who]) == 2
    assert "--filter: is not JSON" in capsys.readouterr().err
    project = f"{tenant.project}-tree"
    memory.create_project(project, user_id=tenant.user)
    memory.create_project(f"{project}/web", user_id=tenant.user)
    memory.for_user(tenant.user, project_id=f"{project}/web").add("The web app deploys on Tuesdays.", scope="project")
    assert main(["list", "--json", "--project", project, "--subtree", *who]) == 0
    assert [m["scope_id"] for m in json.loads(capsys.readouterr().out) if m["scope"] == "project"] == [f"{project}/web"]


def test_command_line_documents(dsn, monkeypatch, capsys, tenant, tmp_path):
    monkeypatch.setenv("DATABASE_URL", dsn)
    who = ["--user", tenant.user]
    handbook = tmp_path / "handbook.md"
    handbook.write_text("# Handbook\n\n## Stack\n\nWe use PostgreSQL 16 for orders.\n\n## Releases\n\n"
                        "We deploy on Tuesdays after the review.\n", encoding="utf-8")
    assert main(["document", "add", str(handbook), *who]) == 0
    said = capsys.readouterr().out
    assert "document 'handbook.md': passages added" in said and "PostgreSQL 16" in said
    assert main(["document", "search", "when do we deploy?", "-k", "1", "--json", *who]) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert "Tuesdays" in hit["content"] and hit["title"] == "handbook.md" and hit["headings"][-1] == "Releases"
    handbook.write_text(handbook.read_text(encoding="utf-8").replace("16", "17"), encoding="utf-8")
    assert main(["document", "add", str(handbook), "--json", *who]) == 0  # the same file: an update
    report = json.loads(capsys.readouterr().out)
    assert report["passages_kept"] >= 1 and report["passages_removed"] == 1
    assert main(["document", "add", str(tmp_path / "missing.md"), *who]) == 2
    assert "cannot read" in capsys.readouterr().err


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


# --- the command line as a whole: help, docs, output, ids --------------------------------------

CLI_PAGE = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_help_imports_nothing_heavy_and_reads_as_plain_text():
    code = ("import sys, contextlib, io\nfrom agent_memory.cli import main\n"
            "for argv in (['--help'], ['reembed', '--help'], ['add', '--help']):\n"
            "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "        main(argv)\n"
            "heavy = [m for m in ('langchain_core', 'langgraph', 'psycopg', 'rich', 'numpy', 'agent_memory.service')"
            " if m in sys.modules]\nprint(heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
    for name, sub in _subparsers().items():
        text = sub.format_help()
        assert "``" not in text and ":class:" not in text and ":mod:" not in text, name
        assert "examples:" in text and "DATABASE_URL" in text and "AGENT_MEMORY_DEBUG" in text, name


@pytest.mark.parametrize("module", ["agent_memory.cli", "agent_memory"])
def test_python_dash_m_runs_the_command_line(module):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: agent-memory ") and "examples:" in done.stdout


def test_every_option_has_help_and_the_choices_match_the_models():
    for name, sub in _subparsers().items():
        for action in sub._actions:
            assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)
    assert set(MEMORY_TYPES) == set(MemoryType.values()) and set(SCOPES) == set(Scope.values())
    assert set(VISIBILITIES) == set(Visibility.values()) and set(STATUSES) == {s.value for s in Status}


def test_every_command_and_option_is_documented_in_the_docs():
    section = CLI_PAGE
    for name, sub in _subparsers().items():
        assert f"agent-memory {name}" in section and f"| `{name}` |" in section, name
        for action in sub._actions:
            longest = max(action.option_strings, key=len, default=None)
            if longest and longest != "--help":
                assert longest in section, (name, longest)
    assert {c.name for c in COMMANDS} == set(_subparsers())


def _json(capsys) -> object:
    return json.loads(capsys.readouterr().out)


def test_id_prefixes_are_resolved_among_the_callers_memories_only(dsn, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    me, other = ["--user", tenant.user], ["--user", tenant.other_user]
    assert main(["add", "I keep my notes in Obsidian", "--json", *me]) == 0
    mine = _json(capsys)["id"]
    assert main(["show", mine[:8], "--json", *me]) == 0
    assert _json(capsys)["content"] == "I keep my notes in Obsidian"
    assert main(["show", mine[:8], *other]) == 2  # another user's id is not found, not even by prefix
    assert "no memory visible to user" in capsys.readouterr().err
    # two memories whose ids share a prefix: ambiguous for their owner, and only for them
    assert main(["add", "My dog is called Rex", "--json", *me]) == 0
    second = _json(capsys)["id"]
    prefix = uuid.uuid4().hex[:8]
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i, old in enumerate((mine, second)):
            conn.execute("UPDATE memory_items SET id = %s WHERE id = %s", (f"{prefix}-000{i}-4000-8000-000000000000", old))
    assert main(["show", prefix, *me]) == 2
    err = capsys.readouterr().err
    assert "starts the ids of several memories" in err and "give more characters" in err
    assert main(["show", f"{prefix}-0001", "--json", *me]) == 0
    assert _json(capsys)["content"] == "My dog is called Rex"
    assert main(["add", "I prefer tea over coffee", "--json", *other]) == 0
    capsys.readouterr()
    assert main(["delete", prefix[:4] + "zz", *me]) == 2  # not a prefix at all: the service says what is wrong
    assert "memory_id: must be a memory id" in capsys.readouterr().err


def test_edit_history_delete_restore_and_tables(dsn, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    me = ["--user", tenant.user]
    assert main(["add", "I use Vim for everything", "--type", "habit", "--json", *me]) == 0
    short = _json(capsys)["id"][:8]
    assert main(["edit", short, "--content", "I use VS Code for everything", "--reason", "switched", *me]) == 0
    assert "edited" in capsys.readouterr().out
    assert main(["edit", short, *me]) == 2
    assert "nothing to change" in capsys.readouterr().err
    assert main(["history", short, "--json", *me]) == 0
    versions = _json(capsys)
    assert [v["content"] for v in versions] == ["I use Vim for everything", "I use VS Code for everything"]
    assert main(["history", short, *me]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["id", "version", "status", "from", "until", "change", "by", "why",
                                             "content"]
    # each wording with the change that made it: the first was added, the second is the edit
    first, second = (line for line in table.splitlines()[1:] if line.strip() and not set(line) <= {"-", " "})
    assert " add (user) " in first and "Vim" in first and "switched" not in first
    assert " edit (user) " in second and "VS Code" in second and "switched" in second
    assert tenant.user in first and tenant.user in second
    assert "\x1b[" not in table  # piped: plain text, no colour codes
    assert main(["delete", short, "--json", *me]) == 0
    assert _json(capsys)["archived"] is True
    assert main(["list", "--status", "archived", *me]) == 0
    listed = capsys.readouterr().out
    assert short in listed and "archived" in listed and "VS Code" in listed
    assert main(["restore", short, "--json", *me]) == 0
    assert _json(capsys)["status"] == "active"
    assert main(["stats", *me]) == 0
    text = capsys.readouterr().out
    assert "total" in text and "type: habit" in text
    with pytest.raises(json.JSONDecodeError):  # stats prints a table without --json
        json.loads(text)


def test_export_forget_and_import_round_trip(dsn, monkeypatch, capsys, tenant, tmp_path):
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    me = ["--user", tenant.user]
    for text in ("I keep my notes in Obsidian", "My dog is called Rex"):
        assert main(["add", text, *me]) == 0
    capsys.readouterr()
    file = tmp_path / "export.json"
    assert main(["export", *me, "-o", str(file)]) == 0
    assert "exported 2 memories" in capsys.readouterr().out
    assert main(["forget-user", tenant.user]) == 2  # not confirmed, and no terminal to ask on
    assert "pass --yes" in capsys.readouterr().err
    assert main(["forget-user", tenant.user, "--yes", "--json"]) == 0
    assert _json(capsys)["removed"]["memories"] == 2
    assert main(["list", "--json", *me]) == 0 and _json(capsys) == []
    assert main(["import", str(file)]) == 2  # whose rows: --user or --as-operator
    assert "as_operator=True" in capsys.readouterr().err
    assert main(["import", str(file), *me, "--json"]) == 0
    assert _json(capsys)["inserted"]["memories"] == 2
    assert main(["search", "what is my dog called", "-k", "1", "--json", *me]) == 0
    assert _json(capsys)[0]["content"] == "My dog is called Rex"
    assert main(["import", str(file), "--as-operator"]) == 0  # twice is harmless: everything is skipped
    assert re.search(r"memories\s+0\s+2", capsys.readouterr().out)


def test_import_a_list_of_memories_in_batches(dsn, monkeypatch, capsys, tenant, tmp_path):
    monkeypatch.setenv("DATABASE_URL", dsn)
    lines = ["I keep my notes in Obsidian", {"content": "We deploy on Fridays", "memory_type": "habit"},
             "my password is hunter2!", "I keep my notes in Obsidian", "My dog is called Rex"]
    file = tmp_path / "notes.jsonl"
    file.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert main(["import", str(file)]) == 2
    assert "--user: is required" in capsys.readouterr().err
    assert main(["import", str(file), "--user", tenant.user, "--dedupe", "--batch-size", "2", "--json"]) == 0
    report = _json(capsys)
    assert report["inserted"] == 3 and [r["index"] for r in report["rejected"]] == [2]
    assert [d["index"] for d in report["duplicates"]] == [3]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(["I prefer tea over coffee"])))
    assert main(["import", "-", "--user", tenant.user]) == 0
    assert "imported 1 of 1 memories" in capsys.readouterr().out
    assert main(["stats", "--json", "--user", tenant.user]) == 0
    assert _json(capsys)["total"] == 4
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\nnot json\n')
    assert main(["import", str(bad), "--user", tenant.user]) == 2
    assert "line 2 is not JSON" in capsys.readouterr().err


def test_profile_show_and_edit(dsn, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    me = ["--user", tenant.user]
    assert main(["add", "I prefer concise answers", "--type", "preference", *me]) == 0
    capsys.readouterr()
    assert main(["profile", "show", *me]) == 0
    assert f"user profile of {tenant.user}" in capsys.readouterr().out
    assert main(["profile", "edit", "--set", "username=Ada", "--set", 'frequently_used_tools=["Vim"]', "--json",
                 *me]) == 0
    prof = _json(capsys)
    assert prof["fields"]["username"] == "Ada" and prof["manual"]["frequently_used_tools"] == ["Vim"]
    assert main(["profile", "show", *me]) == 0
    assert re.search(r"username\s+Ada\s+by hand", capsys.readouterr().out)
    assert main(["profile", "edit", "--reset", "all", "--json", *me]) == 0
    assert _json(capsys)["manual"] == {}
    assert main(["profile", "edit", "--set", "oops", *me]) == 2
    assert "--set: expects FIELD=VALUE" in capsys.readouterr().err


def test_reembed_switches_a_database_to_the_configured_model(fresh_dsn, monkeypatch, capsys):
    from test_reembed import HashEmbeddings

    from agent_memory import MemoryService

    dsn = fresh_dsn()
    with MemoryService(dsn, embeddings=HashEmbeddings(8)) as old:
        old.for_user("u1").add("My dog is called Rex")
        old.for_user("u1").add("I keep my notes in Obsidian")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("MEMORY_EMBEDDINGS", raising=False)
    assert main(["search", "dog", "--user", "u1", "--database-url", dsn]) == 2  # the local model does not fit
    assert "agent-memory reembed" in capsys.readouterr().err
    assert main(["reembed", "--database-url", dsn, "--batch-size", "1", "--json"]) == 0
    report = _json(capsys)
    assert report["switched"] and report["dimensions"] == 384 and report["embedded"] == 2
    assert main(["--database-url", dsn, "search", "what is my dog called", "-k", "1", "--user", "u1", "--json"]) == 0
    assert _json(capsys)[0]["content"] == "My dog is called Rex"
    assert main(["reembed", "--database-url", dsn]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_errors_are_one_line_and_debug_shows_the_traceback(dsn, monkeypatch, capsys, tenant):
    monkeypatch.setenv("DATABASE_URL", dsn)
    assert main(["show", "not-an-id", "--user", tenant.user, "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["type"] == "InvalidInputError"
    with pytest.raises(Exception, match="memory_id"):
        main(["show", "not-an-id", "--user", tenant.user, "--debug"])
    monkeypatch.setenv("AGENT_MEMORY_DEBUG", "1")
    with pytest.raises(Exception, match="memory_id"):
        main(["show", "not-an-id", "--user", tenant.user])
    monkeypatch.delenv("AGENT_MEMORY_DEBUG")
    assert main(["list", "--user", tenant.user, "--database-url", "postgresql://nobody@127.0.0.1:1/none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not connect" in err and "Traceback" not in err


def test_provider_errors_are_recognised_by_where_they_came_from():
    import httpx

    try:
        httpx.Response(500, request=httpx.Request("POST", "http://x")).raise_for_status()
    except httpx.HTTPStatusError as exc:
        assert is_provider_error(exc)
    assert not is_provider_error(ValueError("plain"))


def test_tables_are_drawn_in_colour_on_a_terminal_and_plain_when_piped():
    from agent_memory.cli.output import Output

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    row = [["3f2a9c1e", "user", "fact", "active", "I keep my notes in Obsidian"]]
    drawn = Output(out=Terminal(), err=Terminal())
    drawn.table(("id", "level", "type", "status", "content"), row)
    with drawn.progress("embedding") as update:
        update(1, 2)
    assert "┏" in drawn.out.getvalue() and "\x1b[" in drawn.out.getvalue() and "embedding" in drawn.err.getvalue()
    piped = Output(out=io.StringIO(), err=io.StringIO())
    piped.table(("id", "level", "type", "status", "content"), row)
    with piped.progress("embedding") as update:
        update(1, 2)
    assert piped.out.getvalue().splitlines()[1].split()[:4] == ["3f2a9c1e", "user", "fact", "active"]
    assert "\x1b[" not in piped.out.getvalue() and piped.err.getvalue() == ""


@pytest.mark.parametrize("module", ["agent_memory.cli", "agent_memory"])
def test_python_dash_m_runs_the_command_line(module: str) -> None:
    """``python -m agent_memory.cli`` (and ``python -m agent_memory``) is ``agent-memory``, named so."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: agent-memory") and "python -m" not in done.stdout
