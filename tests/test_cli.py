"""The quickstart's main job (the demo) and the command line, on the test database."""

from __future__ import annotations

import io
import json

from agent_memory.cli import demo, main


def test_demo_saves_searches_and_keeps_users_apart(memory):
    out = io.StringIO()
    demo(memory, out=out)
    demo(memory, out=io.StringIO())  # re-runnable: it clears its own previous run
    text = out.getvalue()
    assert "duplicate -> returns the existing memory" in text and "deduplicated=True" in text
    assert "secret    -> rejected (sensitive)" in text and "ghp_" not in text
    assert "0 of them alice's private memories" in text
    after_eating = text.split("what should I avoid eating?'", 1)[1].splitlines()[1]
    assert "allergic to peanuts" in after_eating
    injected = text.split("<long_term_memory>", 1)[1].split("</long_term_memory>", 1)[0]
    assert '<memory scope="user" type="constraint">I am allergic to peanuts</memory>' in injected
    assert "German" not in injected and "marathon" not in injected  # bob's memories never reach alice
    assert memory.stats(user_id="demo-alice", project_id="demo-webshop").total == 5


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
