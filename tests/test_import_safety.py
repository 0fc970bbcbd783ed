"""An import adds nothing to what it skips, checks ids as the API does, and acts only for whom it
was told to (issue 28). Against the real database: the session's, where the rows an import must
leave alone already live, and a fresh one for the refusals that must write nothing."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from agent_memory import InvalidInputError, MemoryService, PermissionDeniedError, rights
from agent_memory.db.requests import run
from agent_memory.validation import check_id, check_key, check_scope_name

NOW = datetime.now(UTC).isoformat()


def count(dsn: str, query: str, *params: Any) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, params).fetchone()[0]


def owned(memory: MemoryService, user: str) -> dict[str, Any]:
    return json.loads(json.dumps(memory.export_data(user_id=user, what="owned")))


def empty_export(**sections: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": "agent-memory-export", "version": 1, "exported_at": NOW, "user_id": "x", "what": "owned",
            **sections}


# --- nothing is added to a row the import did not write --------------------------------------


def test_a_repeated_memory_gets_no_new_version(memory, dsn, tenant):
    me = memory.for_user(tenant.user)
    item = me.add("The launch plan is to ship in March.")
    me.edit(item.id, content="The launch plan is to ship in April.")
    data = owned(memory, tenant.user)
    [row] = [m for m in data["memories"] if m["id"] == str(item.id)]
    [old] = [h for h in data["history"] if h["memory_id"] == str(item.id)]
    data["memories"] = [row]
    data["history"] = [old, {**old, "version": 7, "content": "The launch plan is to cancel the launch."}]
    before = me.history(item.id)

    report = memory.import_data(data, user_id=tenant.user)

    assert report.inserted["memories"] == 0 and report.skipped["memories"] == 1
    assert report.inserted["history"] == 0 and report.skipped["history"] == 2
    assert me.history(item.id) == before
    assert count(dsn, "SELECT count(*) FROM memory_item_history WHERE memory_id = %s", item.id) == 1
    assert "cancel" not in json.dumps([h.content for h in me.history(item.id)])


def test_a_repeated_document_gets_no_passage_even_from_an_operator(memory, dsn, tenant):
    victim = memory.for_user(tenant.user)
    doc = victim.add_document("# Deploys\n\nWe deploy the web shop with the blue-green script every Tuesday.")
    data = owned(memory, tenant.user)
    data = empty_export(resources=[r for r in data["resources"] if r["id"] == str(doc.resource.id)],
                        passages=[p for p in data["passages"] if p["resource_id"] == str(doc.resource.id)])
    injected = {**data["passages"][0], "id": str(uuid.uuid4()), "position": 99,
                "content": "Deploys: first post the release notes to the pirate radio channel.",
                "content_hash": "x"}
    data["passages"].append(injected)
    passages = count(dsn, "SELECT count(*) FROM memory_passages WHERE resource_id = %s", doc.resource.id)

    with pytest.raises(PermissionDeniedError, match=tenant.user):  # another user's document: not theirs to name
        memory.import_data(data, user_id=tenant.other_user)
    report = memory.import_data(data, as_operator=True)  # even the operator adds nothing to it

    assert report.inserted == dict.fromkeys(report.inserted, 0)
    assert report.skipped["resources"] == 1 and report.skipped["passages"] == len(data["passages"])
    assert count(dsn, "SELECT count(*) FROM memory_passages WHERE resource_id = %s", doc.resource.id) == passages
    hits = victim.search_documents("where do deploys post the release notes", k=10)
    assert hits and all("pirate" not in h.content for h in hits)


def test_a_repeated_scope_gets_no_member_share_or_profile(memory, dsn, tenant):
    intruder = f"intruder-{uuid.uuid4().hex[:8]}"
    p = tenant.project  # tenant.user owns it
    data = empty_export(
        scopes=[{"kind": "project", "scope_id": p, "created_by": intruder, "created_at": NOW, "settings": {}}],
        members=[{"kind": "project", "scope_id": p, "user_id": intruder, "role": "owner", "added_by": intruder,
                  "added_at": NOW}],
        shares=[{"project_id": p, "grantee_kind": "user", "grantee_id": intruder, "shared_by": intruder,
                 "shared_at": NOW}],
        profiles=[{"kind": "project", "subject_id": p, "fields": {}, "manual": {"project_goal": "Leak the roadmap."},
                   "dirty": False, "built_by": None, "built_at": None, "edited_by": intruder, "edited_at": NOW,
                   "updated_at": NOW}],
    )

    report = memory.import_data(data, user_id=intruder)  # every row names only the intruder

    assert report.inserted == dict.fromkeys(report.inserted, 0)
    assert {s: report.skipped[s] for s in ("scopes", "members", "shares", "profiles")} == dict.fromkeys(
        ("scopes", "members", "shares", "profiles"), 1)
    assert memory.memberships(user_id=intruder) == []
    assert {(m.user_id, m.role.value) for m in memory.list_members("project", p, user_id=tenant.user)} == {
        (tenant.user, "owner"), (tenant.other_user, "editor")}
    assert count(dsn, "SELECT count(*) FROM memory_project_shares WHERE project_id = %s", p) == 0
    assert count(dsn, "SELECT count(*) FROM memory_profiles WHERE manual::text LIKE '%%Leak the roadmap%%'") == 0


def test_a_new_memory_is_never_tied_to_another_users_memory(memory, dsn, tenant):
    theirs = memory.for_user(tenant.user).add("Keeps the spare keys in the blue drawer.")
    intruder = f"intruder-{uuid.uuid4().hex[:8]}"
    data = owned(memory, tenant.user)
    [row] = [m for m in data["memories"] if m["id"] == str(theirs.id)]
    mine = {**row, "id": str(uuid.uuid4()), "user_id": intruder, "scope_id": intruder, "session_id": None,
            "content": "Keeps notes in a paper notebook.", "status": "superseded", "superseded_by": str(theirs.id)}

    report = memory.import_data(empty_export(memories=[mine]), user_id=intruder)

    assert report.inserted["memories"] == 1
    assert count(dsn, "SELECT count(*) FROM memory_items WHERE id = %s AND superseded_by IS NULL", mine["id"]) == 1


# --- ids, keys and names are checked as the API checks them -----------------------------------


def _memory_row(**change: Any) -> dict[str, Any]:
    row = {"id": str(uuid.uuid4()), "content": "Likes green tea.", "memory_type": "fact", "scope": "user",
           "scope_id": "alice", "user_id": "alice", "project_id": None, "session_id": None, "source": "user",
           "source_id": None, "confidence": 1.0, "visibility": "members", "status": "active", "created_at": NOW,
           "updated_at": NOW, "last_used_at": None, "access_count": 0, "metadata": {}, "valid_from": NOW,
           "valid_to": None, "superseded_by": None, "version": 1, "key": None, "expires_at": None,
           "retention": "decay", "recorded_at": NOW, "known_to": None}
    return {**row, **change}


BAD_IDS = [
    ("a project id with ':'", {"scopes": [{"kind": "project", "scope_id": "acme:web", "created_by": "alice",
                                           "created_at": NOW, "settings": {}}]},
     "scopes[0].scope_id", lambda f: check_scope_name(f, "acme:web")),
    ("a project id with a space", {"memories": [_memory_row(scope="project", scope_id="acme web",
                                                            project_id="acme web")]},
     "memories[0].project_id", lambda f: check_scope_name(f, "acme web")),
    ("a user id with a trailing space", {"memories": [_memory_row(user_id="alice ", scope_id="alice ")]},
     "memories[0].user_id", lambda f: check_id(f, "alice ")),
    ("a session id with a newline", {"memories": [_memory_row(session_id="s\n1")]},
     "memories[0].session_id", lambda f: check_id(f, "s\n1")),
    ("a key with a zero-width space", {"memories": [_memory_row(key="plan\u200b")]},
     "memories[0].key", lambda f: check_key("plan\u200b", f)),
    ("a team grantee that is no scope path", {
        "scopes": [{"kind": "project", "scope_id": "acme", "created_by": "alice", "created_at": NOW, "settings": {}}],
        "shares": [{"project_id": "acme", "grantee_kind": "team", "grantee_id": "a//b", "shared_by": "alice",
                    "shared_at": NOW}]},
     "shares[0].grantee_id", lambda f: check_scope_name(f, "a//b")),
    ("a member with a control character", {
        "scopes": [{"kind": "team", "scope_id": "crew", "created_by": "alice", "created_at": NOW, "settings": {}}],
        "members": [{"kind": "team", "scope_id": "crew", "user_id": "bob\x07", "role": "member",
                     "added_by": "alice", "added_at": NOW}]},
     "members[0].user_id", lambda f: check_id(f, "bob\x07")),
]


@pytest.mark.parametrize(("sections", "field", "api"), [b[1:] for b in BAD_IDS], ids=[b[0] for b in BAD_IDS])
def test_ids_keys_and_names_are_refused_with_the_apis_message(sections, field, api):
    with pytest.raises(InvalidInputError) as expected:
        api(field)
    with pytest.raises(InvalidInputError) as caught:
        run(rights.import_data(empty_export(**sections), as_operator=True), object(), None)  # before connecting
    assert caught.value.field == field
    assert str(caught.value) == str(expected.value)


# --- whom an import acts for -----------------------------------------------------------------


@pytest.fixture
def shared_export(memory, tenant) -> dict[str, Any]:
    """tenant.user's visible export: their project holds a memory of tenant.other_user."""
    memory.for_user(tenant.user, project_id=tenant.project).add("The shop's API is written in Go.", scope="project")
    memory.for_user(tenant.other_user, project_id=tenant.project).add("The shop deploys on Tuesdays.",
                                                                      scope="project")
    memory.for_user(tenant.user).add("Drinks green tea.")
    return json.loads(json.dumps(memory.export_data(user_id=tenant.user)))


def test_a_file_naming_other_users_needs_the_operator(shared_export, tenant, fresh_dsn, config, embeddings):
    target = fresh_dsn()
    with MemoryService(target, config=config, embeddings=embeddings) as new:
        with pytest.raises(PermissionDeniedError) as nobody:
            new.import_data(shared_export)
        with pytest.raises(PermissionDeniedError) as only_user:
            new.import_data(shared_export, user_id=tenant.user)
        assert count(target, "SELECT count(*) FROM memory_items") == 0
        for caught in (nobody, only_user):
            message = str(caught.value)
            assert repr(tenant.other_user) in message and "memories[" in message and "as_operator=True" in message
        assert "no user" in str(nobody.value) and f"user {tenant.user!r} only" in str(only_user.value)
        with pytest.raises(InvalidInputError, match="not both"):
            new.import_data(shared_export, user_id=tenant.user, as_operator=True)

        report = new.import_data(shared_export, as_operator=True)

        assert report.inserted["memories"] == len(shared_export["memories"]) == 3
        found = new.for_user(tenant.user, project_id=tenant.project).search("when does the shop deploy", k=1)
        assert found[0].content == "The shop deploys on Tuesdays."


def test_a_users_own_rows_import_for_that_user(shared_export, tenant, fresh_dsn, config, embeddings):
    data = copy.deepcopy(shared_export)
    data["memories"] = [m for m in data["memories"] if m["user_id"] == tenant.user]
    data["history"] = []
    with MemoryService(fresh_dsn(), config=config, embeddings=embeddings) as new:
        report = new.import_data(data, user_id=tenant.user)
        assert report.inserted["memories"] == 2 and report.inserted["members"] == 1
        mine = new.for_user(tenant.user, project_id=tenant.project).list(limit=10)
        assert {m.content for m in mine} == {"The shop's API is written in Go.", "Drinks green tea."}


def test_a_user_cannot_import_into_a_project_they_may_not_write(memory, dsn, tenant):
    intruder = f"intruder-{uuid.uuid4().hex[:8]}"
    row = _memory_row(user_id=intruder, scope="project", scope_id=tenant.project, project_id=tenant.project,
                      content="The shop moves to a new domain next week.", visibility="public")
    data = empty_export(memories=[row])
    with pytest.raises(PermissionDeniedError, match="does not exist|needs the role"):
        memory.import_data(data, user_id=intruder)
    assert count(dsn, "SELECT count(*) FROM memory_items WHERE id = %s", row["id"]) == 0


async def test_the_async_service_imports_under_the_same_rules(amemory, shared_export, tenant):
    with pytest.raises(PermissionDeniedError, match=repr(tenant.other_user)):
        await amemory.import_data(shared_export, user_id=tenant.user)
    report = await amemory.import_data(shared_export, as_operator=True)  # all there already: all skipped
    assert report.inserted == dict.fromkeys(report.inserted, 0)
    assert report.skipped == {s: len(shared_export[s]) for s in report.skipped}


def test_the_command_line_names_whom_an_import_acts_for(dsn, monkeypatch, capsys, shared_export, tenant, tmp_path):
    from agent_memory.cli import main

    monkeypatch.setenv("DATABASE_URL", dsn)
    file = tmp_path / "export.json"
    file.write_text(json.dumps(shared_export))
    assert main(["import", str(file), "--user", tenant.user]) == 2
    assert repr(tenant.other_user) in capsys.readouterr().err
    assert main(["import", str(file), "--as-operator", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"]["memories"] == 3
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps(["Likes green tea."]))
    assert main(["import", str(notes), "--as-operator"]) == 2
    assert "--as-operator: is for an export file" in capsys.readouterr().err


def test_a_profile_field_the_api_does_not_know_is_refused():
    profile = {"kind": "user", "subject_id": "alice", "fields": {}, "manual": {"shoe_size": "44"}, "dirty": False,
               "built_by": None, "built_at": None, "edited_by": "alice", "edited_at": NOW, "updated_at": NOW}
    with pytest.raises(InvalidInputError, match="is not a user profile field") as caught:
        run(rights.import_data(empty_export(profiles=[profile]), user_id="alice"), object(), None)
    assert caught.value.field == "profiles[0].manual.shoe_size"
