"""Data rights: export what a user sees (or owns) as JSON and import it into an empty database with
the same search results; forget a user; delete a project or team. Against the real database."""

from __future__ import annotations

import copy
import json
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest

from agent_memory import (
    InvalidInputError,
    MemoryConfig,
    MemoryService,
    PermissionDeniedError,
    rights,
)
from agent_memory.db.requests import run
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.episodic.forget import FORGET_TABLES
from agent_memory.models import Identity, MemoryItem
from agent_memory.queries import ITEM_COLUMNS, USER_DATA_TABLES
from identity_args import split_ids

sys.path.insert(0, str(Path(__file__).resolve().parent))
from episodic_agent import build_agent, run_config

SECTIONS = {"memories", "history", "resources", "passages", "profiles", "scopes", "members", "shares",
            "graph_nodes", "graph_relations", "graph_mentions"}
QUERIES = ("which editor does alice use", "acme API and deployment", "how does the team work",
           "security rules", "rockets", "what does the web app use")


@dataclass
class World:
    """Alice, Bob and Carol with memories at every level and visibility.

    acme: alice owner, bob editor; acme-corp: carol owner, shared with the team; acme/web: bob
    owner, alice editor; solo: bob alone; team: alice lead, bob member; org: carol admin, alice
    member. ``visible``/``hidden``: ids of the memories alice may / may not read.
    """

    alice: str
    bob: str
    carol: str
    acme: str
    corp: str
    web: str
    solo: str
    team: str
    org: str
    session: str
    bob_session: str
    visible: set[UUID] = field(default_factory=set)
    hidden: set[UUID] = field(default_factory=set)
    named: dict[str, UUID] = field(default_factory=dict)
    resources: dict[str, UUID] = field(default_factory=dict)


def build_world(memory: MemoryService) -> World:
    tag = uuid.uuid4().hex[:8]
    acme = f"acme{tag}"
    w = World(alice=f"alice-{tag}", bob=f"bob-{tag}", carol=f"carol-{tag}", acme=acme, corp=f"{acme}-corp",
              web=f"{acme}/web", solo=f"solo{tag}", team=f"team{tag}", org=f"org{tag}",
              session=f"sess-{tag}", bob_session=f"bobsess-{tag}")
    a, b, c = w.alice, w.bob, w.carol
    memory.create_project(w.acme, user_id=a)
    memory.add_member("project", w.acme, b, "editor", user_id=a)
    memory.create_project(w.corp, user_id=c)
    memory.create_project(w.web, user_id=b)
    memory.add_member("project", w.web, a, "editor", user_id=b)
    memory.create_project(w.solo, user_id=b)
    memory.create_team(w.team, user_id=a)
    memory.add_member("team", w.team, b, "member", user_id=a)
    memory.create_org(w.org, user_id=c)
    memory.add_member("org", w.org, a, "member", user_id=c)
    memory.share_project(w.corp, user_id=c, with_team=w.team)
    memory.share_project(w.corp, user_id=c, with_user=b)
    memory.share_project(w.acme, user_id=a, with_user=c)

    def add(name: str, text: str, user: str, *, seen: bool, **kw: Any) -> UUID:
        ids, rest = split_ids(kw)
        item = memory.for_user(user, **ids).add(text, **rest)
        assert isinstance(item, MemoryItem) and not item.deduplicated, item
        w.named[name] = item.id
        (w.visible if seen else w.hidden).add(item.id)
        return item.id

    # alice: every level, an edit, an archived and a superseded memory
    add("dark", "Alice prefers dark mode in every editor.", a, seen=True, memory_type="preference")
    city = add("city", "Alice lives in Lisbon.", a, seen=True)
    assert isinstance(memory.for_user(a).edit(city, content="Alice lives in Porto.", reason="moved"),
                      MemoryItem)
    add("latte", "Alice drinks oat milk lattes every day.", a, seen=True, memory_type="habit")
    memory.for_user(a).delete(w.named["latte"])
    add("vim", "Uses Vim as their editor.", a, seen=True)
    report = memory.for_user(a, session_id=w.session).extract(["I switched from Vim to VS Code."], llm=None)
    [outcome] = report.superseded
    assert outcome.replaced.id == w.named["vim"]
    w.named["vscode"] = outcome.memory.id
    w.visible.add(outcome.memory.id)
    add("debug", "In this session Alice is debugging the login flow.", a, seen=True, scope="session",
        session_id=w.session)
    add("graphql", "The acme API uses GraphQL.", a, seen=True, scope="project", project_id=w.acme)
    assert isinstance(memory.for_user(a, project_id=w.acme).edit(w.named["graphql"], content="The acme API uses GraphQL and REST."), MemoryItem)
    decided = memory.for_user(a, session_id=w.session, project_id=w.acme).extract(["We decided to use Redis for caching."], llm=None)
    [redis] = decided.added
    assert redis.memory.scope.value == "project" and redis.memory.scope_id == w.acme
    w.named["redis"] = redis.memory.id
    w.visible.add(redis.memory.id)
    add("tls", "Alice's private acme reminder: renew the TLS certificate.", a, seen=True, scope="project",
        project_id=w.acme, visibility="owner_only")
    add("license", "Acme is open source under the Apache license.", a, seen=True, scope="project",
        project_id=w.acme, visibility="public")
    add("svelte", "The web app is built with Svelte.", a, seen=True, scope="project", project_id=w.web)
    add("trunk", "The team uses trunk-based development.", a, seen=True, scope="team", team_id=w.team)
    w.resources["reading"] = memory.for_user(a).add_resource("Alice's reading list: Designing Data-Intensive Applications.", title="reading list").id
    w.resources["architecture"] = memory.for_user(a, project_id=w.acme).add_resource("Acme architecture overview: one GraphQL gateway in front of three services.", scope="project", kind="project_resource", title="architecture").id
    memory.for_user(a).update_profile({"username": "Ali"})
    memory.for_user(a, project_id=w.acme).update_profile({"project_goal": "Ship the acme API."}, kind="project")

    # bob: private levels, owner_only notes, an edit of alice's memory, a resource alice cites
    add("tea", "Bob likes green tea in the afternoon.", b, seen=False)
    assert isinstance(memory.for_user(b).edit(w.named["tea"], content="Bob likes green tea in the evening."),
                      MemoryItem)
    add("review", "In this session Bob is reviewing pull requests.", b, seen=False, scope="session",
        session_id=w.bob_session)
    add("fridays", "Acme deploys happen on Fridays.", b, seen=True, scope="project", project_id=w.acme)
    add("salary", "Bob's private acme note about salary talks.", b, seen=False, scope="project",
        project_id=w.acme, visibility="owner_only")
    add("browsers", "The web project targets modern browsers.", b, seen=True, scope="project", project_id=w.web,
        visibility="public")
    assert isinstance(memory.for_user(b, project_id=w.web).edit(w.named["svelte"], content="The web app is built with SvelteKit."), MemoryItem)
    w.resources["style"] = memory.for_user(b, project_id=w.web).add_resource("Web style guide: two-space indentation, no semicolons.", scope="project", kind="project_resource").id
    add("indent", "The web style guide asks for two-space indentation.", a, seen=True, scope="project",
        project_id=w.web, source="project_resource", source_id=str(w.resources["style"]))
    add("standup", "Team standup is at half past nine.", b, seen=True, scope="team", team_id=w.team)
    add("leaving", "Bob's team note: thinking about changing teams.", b, seen=False, scope="team",
        team_id=w.team, visibility="owner_only")
    add("birds", "The solo project is a bird watching app.", b, seen=False, scope="project", project_id=w.solo)
    bob_run = memory.for_user(b, session_id=w.bob_session).extract(["I use Emacs for everything."], llm=None)
    assert bob_run.run_id is not None
    w.hidden.update(o.memory.id for o in bob_run.outcomes if o.memory is not None)
    memory.for_user(b).add_document("Bob's notes on tea.")  # a resource and its passage
    memory.for_user(b).update_profile({"username": "Bobby"})
    memory.for_user(b, project_id=w.web).update_profile({"current_phase": "Beta."}, kind="project")

    # carol: her own memory, the corp project (its public memory reaches alice through the team), the org
    add("marathon", "Carol runs marathons.", c, seen=False)
    add("rockets", "Acme corp sells rockets.", c, seen=True, scope="project", project_id=w.corp,
        visibility="public")
    add("moon", "Acme corp roadmap: a moon base.", c, seen=False, scope="project", project_id=w.corp)
    add("2fa", "The org mandates two-factor authentication.", c, seen=True, scope="org", org_id=w.org)
    return w


def identities(w: World) -> list[dict[str, Any]]:
    """Every way alice can call: each project (hers, and the one shared with her team), with and
    without her session, team and org."""
    out = []
    for project in (None, w.acme, w.web, w.corp):
        for session in (None, w.session):
            for narrow in ({}, {"team_id": w.team}, {"team_id": w.team, "org_id": w.org}):
                out.append({"user_id": w.alice, "project_id": project, "session_id": session, **narrow})
    return out


def all_readable(memory: MemoryService, w: World) -> set[UUID]:
    return {i.id for ids in identities(w) for i in memory.for_user(**ids).list(status=None, limit=10_000)}


@pytest.fixture(scope="module")
def world(memory: MemoryService) -> World:
    """Built once for the tests that only read it."""
    return build_world(memory)


@pytest.fixture(scope="module")
def empty(fresh_dsn: Callable[[], str], config: MemoryConfig, embeddings) -> Iterator[tuple[MemoryService, str]]:
    """A service on a new, empty database (migrated), and its DSN."""
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        yield service, dsn


def count(dsn: str, query: str, *params: Any) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(query, params).fetchone()[0]


def rows(dsn: str, query: str, *params: Any) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return sorted(map(tuple, conn.execute(query, params).fetchall()), key=repr)


def columns(dsn: str, table: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [d.name for d in conn.execute(f"SELECT * FROM {table} LIMIT 0").description]


#: the tables an import writes: those of the export's sections
TABLES = tuple(t.name for t in USER_DATA_TABLES if t.exported)


def table_counts(dsn: str) -> dict[str, int]:
    return {t: count(dsn, f"SELECT count(*) FROM {t}") for t in TABLES}


# --- export and import ------------------------------------------------------------------------


def test_a_visible_export_holds_exactly_what_the_user_may_read(memory, world):
    w = world
    data = memory.export_data(user_id=w.alice)
    assert json.loads(json.dumps(data)) == data  # plain JSON values only
    assert (data["format"], data["version"], data["user_id"], data["what"]) == (
        "agent-memory-export", 1, w.alice, "visible")
    assert set(data) == {"format", "version", "exported_at", "user_id", "what"} | SECTIONS
    exported = {UUID(m["id"]) for m in data["memories"]}
    assert exported == w.visible
    assert exported == all_readable(memory, w)  # the same rule as every read, over all her scopes
    assert not exported & w.hidden
    text = json.dumps(data)
    for private in ("green tea", "reviewing pull requests", "salary talks", "changing teams", "moon base",
                    "marathons", "bird watching", "Emacs", "Bobby", "Bob's notes on tea"):
        assert private not in text
    assert set(data["memories"][0]) == set(ITEM_COLUMNS)
    statuses = {m["id"]: m["status"] for m in data["memories"]}
    assert statuses[str(w.named["latte"])] == "archived" and statuses[str(w.named["vim"])] == "superseded"
    history = {(h["memory_id"], h["version"], h["content"], h["changed_by"]) for h in data["history"]}
    assert history == {(str(w.named["city"]), 1, "Alice lives in Lisbon.", w.alice),
                       (str(w.named["graphql"]), 1, "The acme API uses GraphQL.", w.alice),
                       (str(w.named["svelte"]), 1, "The web app is built with Svelte.", w.bob)}
    assert {(p["kind"], p["subject_id"]) for p in data["profiles"]} == {
        ("user", w.alice), ("project", w.acme), ("project", w.web)}
    assert {r["id"] for r in data["resources"]} >= {str(v) for v in w.resources.values()}
    assert {r["user_id"] for r in data["resources"]} == {w.alice, w.bob}  # bob's only through the web project
    assert {(m["kind"], m["scope_id"], m["role"]) for m in data["members"]} == {
        ("project", w.acme, "owner"), ("project", w.web, "editor"), ("team", w.team, "lead"),
        ("org", w.org, "member")}
    assert {(s["kind"], s["scope_id"]) for s in data["scopes"]} == {
        ("project", w.acme), ("project", w.web), ("project", w.corp), ("team", w.team), ("org", w.org)}
    assert {(s["project_id"], s["grantee_kind"], s["grantee_id"]) for s in data["shares"]} == {
        (w.corp, "team", w.team)}  # what lets her read corp's public memories; not corp's share with bob


def test_an_import_into_an_empty_database_answers_the_same(memory, world, fresh_dsn, config, embeddings):
    w = world
    data = json.loads(json.dumps(memory.export_data(user_id=w.alice)))
    with MemoryService(fresh_dsn(), config=config, embeddings=embeddings) as new:
        report = new.import_data(data, as_operator=True)  # it names bob and carol too
        assert report.inserted == {s: len(data[s]) for s in SECTIONS}
        assert report.skipped == dict.fromkeys(SECTIONS, 0)
        for ids in identities(w):
            assert new.for_user(**ids).list(status=None, limit=1000) == memory.for_user(**ids).list(status=None, limit=1000), ids
        searched = 0
        for ids in identities(w):
            for query in QUERIES:
                before = [(r.id, r.content, round(r.score, 6)) for r in memory.for_user(**ids).search(query, k=8)]
                after = [(r.id, r.content, round(r.score, 6)) for r in new.for_user(**ids).search(query, k=8)]
                assert after == before, (query, ids)
                searched += bool(before)
        assert searched > 100
        for name in ("city", "svelte", "vscode"):
            assert new.for_user(w.alice, project_id=w.web).history(w.named[name]) == memory.for_user(w.alice, project_id=w.web).history(w.named[name])
        assert new.for_user(w.alice, project_id=w.acme).list_resources() == memory.for_user(w.alice, project_id=w.acme).list_resources()
        assert new.for_user(w.alice).profile().manual == {"username": "Ali"}
        assert new.for_user(w.alice, project_id=w.acme).profile("project").manual == {
            "project_goal": "Ship the acme API."}
        assert new.memberships(user_id=w.alice) == memory.memberships(user_id=w.alice)

        again = new.import_data(data, as_operator=True)
        assert again.inserted == dict.fromkeys(SECTIONS, 0)
        assert again.skipped == report.inserted


def test_an_owned_export_holds_exactly_the_users_rows(memory, dsn, world):
    w = world
    data = memory.export_data(user_id=w.alice, what="owned")
    assert json.loads(json.dumps(data)) == data and data["what"] == "owned"
    mine = {r[0] for r in rows(dsn, "SELECT id FROM memory_items WHERE user_id = %s", w.alice)}
    assert len(mine) == 13
    assert {UUID(m["id"]) for m in data["memories"]} == mine
    assert {m["user_id"] for m in data["memories"]} == {w.alice}
    assert {UUID(r["id"]) for r in data["resources"]} == {
        r[0] for r in rows(dsn, "SELECT id FROM memory_resources WHERE user_id = %s", w.alice)}
    assert {r["user_id"] for r in data["resources"]} == {w.alice}
    assert [(p["kind"], p["subject_id"], p["manual"]) for p in data["profiles"]] == [
        ("user", w.alice, {"username": "Ali"})]
    assert {m["user_id"] for m in data["members"]} == {w.alice} and len(data["members"]) == 4
    assert {(s["kind"], s["scope_id"]) for s in data["scopes"]} == {
        (m["kind"], m["scope_id"]) for m in data["members"]}
    assert data["shares"] == []
    # bob's edit of her memory is in its history; bob's memories are not
    assert {h["memory_id"] for h in data["history"]} == {str(w.named[n]) for n in ("city", "graphql", "svelte")}
    assert str(w.named["fridays"]) not in json.dumps(data)


def test_export_what_is_checked_before_any_query():
    with pytest.raises(InvalidInputError) as caught:
        run(rights.export_data(Identity("alice"), "everything"), object(), None)  # never connects
    assert caught.value.field == "what" and "'visible'" in str(caught.value)


def _set(path: tuple, value: Any) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        *parents, last = path
        target = data
        for p in parents:
            target = target[p]
        target[last] = value
    return change


def _first(section: str, key: str, value: Any) -> Callable[[dict], Any]:
    """Break ``key`` of the first row of ``section`` whose ``key`` equals ``value``; answers its index."""
    def find(data: dict) -> int:
        return next(i for i, row in enumerate(data[section]) if row[key] == value)
    return find


MALFORMED: list[tuple[str, Callable[[dict], None], str, str]] = [
    ("not an export", lambda d: d.update(format="something-else"), "format", "not an agent-memory export"),
    ("newer version", lambda d: d.update(version=2), "version", "reads export version 1"),
    ("unknown section", lambda d: d.update(embeddings=[]), "data", "unknown keys ['embeddings']"),
    ("section not a list", lambda d: d.update(memories="x"), "memories", "must be a list"),
    ("bad scope", _set(("memories", 3, "scope"), "galaxy"), "memories[3].scope", "must be one of"),
    ("confidence", _set(("memories", 0, "confidence"), 1.5), "memories[0].confidence", "between 0 and 1"),
    ("time", _set(("memories", 2, "created_at"), "yesterday"), "memories[2].created_at", "ISO-8601"),
    ("uuid", _set(("memories", 1, "id"), "abc"), "memories[1].id", "UUID"),
    ("null content", _set(("memories", 4, "content"), None), "memories[4].content", "missing or null"),
    ("a vector", _set(("memories", 0, "embedding"), [0.1]), "memories[0]", "unknown keys ['embedding']"),
    ("user scope id", _set(("memories", 0, "scope_id"), "mallory"), "memories[0].scope_id", "must equal its user_id"),
    ("row not an object", _set(("resources", 0), ["x"]), "resources[0]", "must be an object"),
    ("orphan history", _set(("history", 0, "memory_id"), str(uuid.uuid4())), "history[0].memory_id",
     "is not in memories"),
    ("dirty", _set(("profiles", 0, "dirty"), "yes"), "profiles[0].dirty", "true or false"),
]


@pytest.fixture(scope="module")
def alice_export(memory, world) -> dict:
    return memory.export_data(user_id=world.alice)


@pytest.mark.parametrize(("change", "path", "message"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_export_is_refused_naming_the_field_and_nothing_is_written(empty, alice_export, change, path,
                                                                               message):
    service, dsn = empty
    data = copy.deepcopy(alice_export)
    assert data["memories"][0]["scope"] == "user"  # what the changes above rely on
    change(data)
    with pytest.raises(InvalidInputError, match=re.escape(message)) as caught:
        service.import_data(data)
    assert caught.value.field == path
    assert table_counts(dsn) == dict.fromkeys(TABLES, 0)


def test_cross_section_rules_are_checked_naming_the_row(empty, alice_export):
    service, dsn = empty
    team = next(i for i, m in enumerate(alice_export["members"]) if m["kind"] == "team")
    cases = [
        (_set(("members", team, "role"), "owner"), f"members[{team}].role", "a team role is one of lead, member"),
        (_set(("members", 0, "scope_id"), "nowhere"), "members[0].scope_id", "is not in scopes"),
        (_set(("shares", 0, "project_id"), "nowhere"), "shares[0].project_id", "is not in scopes"),
        (lambda d: d["memories"].append(dict(d["memories"][0])), f"memories[{len(alice_export['memories'])}]",
         "repeats memories[0]"),
        (lambda d: d["scopes"].append(dict(d["scopes"][1])), f"scopes[{len(alice_export['scopes'])}]",
         "repeats scopes[1]"),
    ]
    for change, path, message in cases:
        data = copy.deepcopy(alice_export)
        change(data)
        with pytest.raises(InvalidInputError, match=re.escape(message)) as caught:
            run(rights.import_data(data), object(), None)  # refused before connecting
        assert caught.value.field == path
    assert table_counts(dsn) == dict.fromkeys(TABLES, 0)
    with pytest.raises(InvalidInputError) as caught:
        service.import_data([alice_export])
    assert caught.value.field == "data"


# --- forgetting a user ------------------------------------------------------------------------


def bobs_rows(dsn: str, w: World) -> dict[str, int]:
    """What forgetting bob should remove, counted straight from the tables."""
    b = w.bob
    return {
        "history": count(dsn, "SELECT count(*) FROM memory_item_history h JOIN memory_items m ON m.scope_id = h.scope_id AND m.id = h.memory_id"
                              " WHERE m.user_id = %s", b),
        "memories": count(dsn, "SELECT count(*) FROM memory_items WHERE user_id = %s", b),
        "decisions": count(dsn, "SELECT count(*) FROM memory_decisions WHERE user_id = %s", b),
        "extraction_runs": count(dsn, "SELECT count(*) FROM memory_extraction_runs WHERE user_id = %s", b),
        "resources": count(dsn, "SELECT count(*) FROM memory_resources WHERE user_id = %s", b),
        "passages": count(dsn, "SELECT count(*) FROM memory_passages WHERE user_id = %s", b),
        "profiles": count(dsn, "SELECT count(*) FROM memory_profiles WHERE (kind = 'user' AND subject_id = %s)"
                               " OR (kind = 'project' AND subject_id = %s)", b, w.solo),
        "shares": count(dsn, "SELECT count(*) FROM memory_project_shares WHERE grantee_kind = 'user'"
                             " AND grantee_id = %s", b),
        "members": count(dsn, "SELECT count(*) FROM memory_members WHERE user_id = %s", b),
        "scopes": count(dsn, "SELECT count(*) FROM memory_scopes WHERE kind = 'project' AND scope_id = %s", w.solo),
    }


def others_rows(dsn: str, w: World) -> dict[str, list[tuple]]:
    """Every row of alice's and carol's, and of the scopes bob leaves behind."""
    users = [w.alice, w.carol]
    scopes = [w.acme, w.corp, w.web, w.team, w.org]
    return {
        "memories": rows(dsn, "SELECT * FROM memory_items WHERE user_id = ANY(%s)", users),
        "history": rows(dsn, "SELECT h.* FROM memory_item_history h JOIN memory_items m ON m.scope_id = h.scope_id AND m.id = h.memory_id"
                             " WHERE m.user_id = ANY(%s)", users),
        "resources": rows(dsn, "SELECT * FROM memory_resources WHERE user_id = ANY(%s)", users),
        "profiles": rows(dsn, "SELECT kind, subject_id, manual, edited_by FROM memory_profiles"
                              " WHERE subject_id = ANY(%s)", users + scopes),
        "scopes": rows(dsn, "SELECT * FROM memory_scopes WHERE scope_id = ANY(%s)", scopes),
        "members": rows(dsn, "SELECT * FROM memory_members WHERE user_id = ANY(%s)", users),
        "shares": rows(dsn, "SELECT * FROM memory_project_shares WHERE grantee_id <> %s", w.bob),
    }


def test_forgetting_a_user_removes_all_they_own_and_nothing_of_others(memory, dsn, config):
    w = build_world(memory)
    thread = f"{w.bob_session}-thread"
    with PostgresCheckpointer(dsn, config=config) as checkpointer:
        build_agent(checkpointer).invoke({"messages": [{"role": "user", "content": "hello"}]},
                                         run_config(thread, w.bob))
    checkpoints = count(dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", thread)
    assert checkpoints > 0
    before = bobs_rows(dsn, w)
    assert all(before.values()), before  # there is something of every kind to forget
    assert before["profiles"] == 1 and before["scopes"] == 1 and before["shares"] == 1
    others = others_rows(dsn, w)
    assert len(others["memories"]) == 17
    graph = {key: count(dsn, f"SELECT count(*) FROM {key} WHERE scope = 'user' AND scope_id = %s", w.bob)
             for key in ("graph_storyline_members", "graph_storylines", "graph_mentions", "graph_relations",
                        "graph_nodes", "store_vectors")}  # bob's knowledge graph, store vectors

    report = memory.forget_user(user_id=w.bob)

    assert report.user_id == w.bob
    assert {k: report.removed[k] for k in before} == before
    assert report.removed["threads"] == 1 and report.removed["checkpoints"] == checkpoints
    assert {k: report.removed[k] for k in graph} == graph
    assert set(report.removed) == set(before) | {"threads", *FORGET_TABLES} | set(graph)
    assert report.ownerless == [("project", w.web)]  # bob was its only owner; alice's memories stay in it
    assert report.changed == {"history.changed_by": 1, "memories.superseded_by": 0, "memories.source_id": 1,
                              "scopes.created_by": 1, "members.added_by": 1, "shares.shared_by": 0,
                              "profiles.edited_by": 1}
    assert bobs_rows(dsn, w) == dict.fromkeys(before, 0)
    assert count(dsn, "SELECT count(*) FROM checkpoints WHERE thread_id = %s", thread) == 0
    assert memory.for_user(w.bob).list(status=None) == []

    # others' rows are untouched, but for the places that named bob
    after = others_rows(dsn, w)
    cols = columns(dsn, "memory_items")
    indent = next(r for r in others["memories"] if r[0] == w.named["indent"])
    assert indent[cols.index("source_id")] == str(w.resources["style"])
    fixed = list(indent)
    fixed[cols.index("source_id")] = None
    assert after["memories"] == sorted([r for r in others["memories"] if r is not indent] + [tuple(fixed)],
                                       key=repr)
    by = columns(dsn, "memory_item_history").index("changed_by")
    assert sorted(r[by] for r in after["history"]) == sorted(
        rights.FORGOTTEN_USER if r[by] == w.bob else r[by] for r in others["history"])
    assert [r for r in after["history"] if r[by] != rights.FORGOTTEN_USER] == [
        r for r in others["history"] if r[by] != w.bob]
    for table in ("resources", "members"):
        assert after[table] == [tuple(rights.FORGOTTEN_USER if v == w.bob else v for v in r)
                                for r in others[table]], table
    assert after["shares"] == others["shares"]
    assert after["profiles"] == sorted((tuple(rights.FORGOTTEN_USER if v == w.bob else v for v in r)
                                        for r in others["profiles"]), key=repr)
    assert after["scopes"] == sorted((tuple(rights.FORGOTTEN_USER if v == w.bob else v for v in r)
                                      for r in others["scopes"]), key=repr)
    assert {i.id for i in memory.for_user(w.alice, project_id=w.web).list(scope="project")} == {
        w.named["svelte"], w.named["indent"]}

    again = memory.forget_user(user_id=w.bob)
    assert set(again.removed.values()) == {0} and set(again.changed.values()) == {0}
    assert again.ownerless == [] and set(again.removed) == set(report.removed)


def test_forget_user_checks_the_id_before_any_query():
    with pytest.raises(InvalidInputError) as caught:
        run(rights.forget_user("  "), object(), None)
    assert caught.value.field == "user_id"


# --- deleting a scope -------------------------------------------------------------------------


def scope_rows(dsn: str, kind: str, scope_id: str) -> dict[str, int]:
    return {
        "history": count(dsn, "SELECT count(*) FROM memory_item_history h JOIN memory_items m ON m.scope_id = h.scope_id AND m.id = h.memory_id"
                              " WHERE m.scope = %s AND m.scope_id = %s", kind, scope_id),
        "memories": count(dsn, "SELECT count(*) FROM memory_items WHERE scope = %s AND scope_id = %s", kind, scope_id),
        "resources": count(dsn, "SELECT count(*) FROM memory_resources WHERE scope = %s AND scope_id = %s",
                           kind, scope_id),
        "passages": count(dsn, "SELECT count(*) FROM memory_passages WHERE scope = %s AND scope_id = %s",
                          kind, scope_id),
        "profiles": count(dsn, "SELECT count(*) FROM memory_profiles WHERE kind = %s AND subject_id = %s",
                          kind, scope_id),
        "decisions": count(dsn, "SELECT count(*) FROM memory_decisions WHERE scope = %s AND scope_id = %s",
                           kind, scope_id),
        "shares": count(dsn, "SELECT count(*) FROM memory_project_shares WHERE (%s = 'project' AND project_id = %s)"
                             " OR (grantee_kind = %s AND grantee_id = %s)", kind, scope_id, kind, scope_id),
        "members": count(dsn, "SELECT count(*) FROM memory_members WHERE kind = %s AND scope_id = %s",
                         kind, scope_id),
        "scopes": count(dsn, "SELECT count(*) FROM memory_scopes WHERE kind = %s AND scope_id = %s", kind, scope_id),
        **{key: count(dsn, f"SELECT count(*) FROM {key} WHERE scope = %s AND scope_id = %s", kind, scope_id)
           for key in ("graph_storyline_members", "graph_storylines", "graph_mentions", "graph_relations",
                        "graph_nodes", "store_vectors")},  # a shared graph (none is built yet)
    }


def neighbours(dsn: str, w: World) -> list[tuple]:
    """Everything of the projects whose ids look like acme's."""
    ids = [w.corp, w.web]
    return (rows(dsn, "SELECT * FROM memory_items WHERE scope_id = ANY(%s)", ids)
            + rows(dsn, "SELECT * FROM memory_resources WHERE scope_id = ANY(%s)", ids)
            + rows(dsn, "SELECT * FROM memory_members WHERE scope_id = ANY(%s)", ids)
            + rows(dsn, "SELECT kind, subject_id, manual FROM memory_profiles WHERE subject_id = ANY(%s)", ids))


def test_only_the_owner_deletes_a_project_and_only_that_project_goes(memory, dsn):
    w = build_world(memory)
    with pytest.raises(PermissionDeniedError, match=r"needs the role owner; you are an editor"):
        memory.delete_scope("project", w.acme, user_id=w.bob)
    with pytest.raises(PermissionDeniedError, match=r"needs the role owner; you are not a member"):
        memory.delete_scope("project", w.acme, user_id=w.carol)
    before = scope_rows(dsn, "project", w.acme)
    assert before == {"history": 1, "memories": 6, "resources": 1, "passages": 0, "profiles": 1, "decisions": 1,
                      "shares": 1,
                      "members": 2, "scopes": 1, "graph_mentions": 0, "graph_relations": 0, "graph_nodes": 0,
                      "graph_storyline_members": 0, "graph_storylines": 0, "store_vectors": 0}
    near = neighbours(dsn, w)
    assert len(near) == 10  # 5 memories, 1 resource, 3 members, 1 profile

    report = memory.delete_scope("project", w.acme, user_id=w.alice)

    assert (report.scope, report.scope_id, report.removed) == ("project", w.acme, before)
    assert scope_rows(dsn, "project", w.acme) == dict.fromkeys(before, 0)
    assert neighbours(dsn, w) == near  # acme-corp and acme/web are other projects
    assert [m.scope_id for m in memory.memberships(user_id=w.alice, scope="project")] == [w.web]
    assert memory.for_user(w.alice, project_id=w.acme).list(scope="project", status=None) == []
    assert memory.for_user(w.alice).list(status=None, scope="user", limit=100) != []  # hers elsewhere stay

    again = memory.delete_scope("project", w.acme, user_id=w.alice)
    assert again.removed == dict.fromkeys(before, 0)
    assert memory.delete_scope("project", f"{w.acme}-never", user_id=w.bob).removed == dict.fromkeys(before, 0)


def test_a_team_lead_deletes_the_team_and_the_shares_naming_it(memory, dsn):
    w = build_world(memory)
    assert [i.id for i in memory.for_user(w.alice, project_id=w.corp).list(scope="project")] == [
        w.named["rockets"]]
    with pytest.raises(PermissionDeniedError, match=r"needs the role lead; you are a member"):
        memory.delete_scope("team", w.team, user_id=w.bob)
    before = scope_rows(dsn, "team", w.team)
    assert before == {"history": 0, "memories": 3, "resources": 0, "passages": 0, "profiles": 0, "decisions": 0,
                      "shares": 1,
                      "members": 2, "scopes": 1, "graph_mentions": 0, "graph_relations": 0, "graph_nodes": 0,
                      "graph_storyline_members": 0, "graph_storylines": 0, "store_vectors": 0}
    report = memory.delete_scope("team", w.team, user_id=w.alice)
    assert report.removed == before
    assert scope_rows(dsn, "team", w.team) == dict.fromkeys(before, 0)
    # corp was shared with the team: its public memory is no longer alice's to read; corp itself stays
    assert memory.for_user(w.alice, project_id=w.corp).list(scope="project") == []
    assert [i.id for i in memory.for_user(w.carol, project_id=w.corp).list(scope="project", limit=10)] == [w.named["moon"], w.named["rockets"]]
    assert memory.delete_scope("team", w.team, user_id=w.alice).removed == dict.fromkeys(before, 0)


@pytest.mark.parametrize(("scope", "scope_id", "path"), [
    ("user", "alice", "scope"), ("session", "s1", "scope"), ("project", "acme corp", "project_id"),
    ("team", "", "team_id"), ("org", None, "org_id"),
])
def test_delete_scope_checks_its_arguments_before_any_query(scope, scope_id, path):
    with pytest.raises(InvalidInputError) as caught:
        run(rights.delete_scope(Identity("alice"), scope, scope_id), object(), None)
    assert caught.value.field == path


# --- async ------------------------------------------------------------------------------------


async def test_async_export_and_delete_answer_as_the_sync_service(memory, amemory, dsn):
    w = build_world(memory)
    for what in ("visible", "owned"):
        data = await amemory.export_data(user_id=w.alice, what=what)
        expected = memory.export_data(user_id=w.alice, what=what)
        assert {k: v for k, v in data.items() if k != "exported_at"} == {
            k: v for k, v in expected.items() if k != "exported_at"}
    assert {UUID(m["id"]) for m in (await amemory.export_data(user_id=w.alice))["memories"]} == w.visible
    with pytest.raises(PermissionDeniedError, match="needs the role owner; you are an editor"):
        await amemory.delete_scope("project", w.acme, user_id=w.bob)
    before = scope_rows(dsn, "project", w.acme)
    report = await amemory.delete_scope("project", w.acme, user_id=w.alice)
    assert report.removed == before and before["memories"] == 6
    assert (await amemory.delete_scope("project", w.acme, user_id=w.alice)).removed == dict.fromkeys(before, 0)
    with pytest.raises(InvalidInputError) as caught:
        await amemory.export_data(user_id=w.alice, what="all")
    assert caught.value.field == "what"
