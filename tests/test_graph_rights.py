"""The knowledge graph in export, import and erasure (issue 32): a user's graph leaves with their
export and comes back whole in a new database (corrections, closed relations, vectors that
explore uses), an import of it is checked like every section, and forgetting a user leaves no
node, relation or mention of theirs. Real databases, real local embedder."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from agent_memory import MemoryConfig, MemoryService
from agent_memory.errors import InvalidInputError, PermissionDeniedError
from agent_memory.rights import GRAPH_SECTIONS


def _user() -> str:
    return f"gr-{uuid.uuid4().hex[:10]}"


def _graph_of(h: Any) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    nodes = h.graph_nodes(limit=1000)
    relations: set[tuple[Any, ...]] = set()
    for n in nodes:
        relations |= {(r.from_name, r.kind, r.rel_type, r.to_name, r.attitude, r.proximity, r.valid_from, r.valid_to,
                       r.description) for r in h.graph_node(str(n.id))[1]}
    return ({(n.id, n.name, n.node_type, n.entity_type, n.aliases, n.source_count, n.state, n.is_owner,
              n.notes_snippets) for n in nodes}, relations)


@pytest.fixture(scope="module")
def new_db(fresh_dsn: Callable[[], str], config: MemoryConfig, embeddings) -> Iterator[tuple[MemoryService, str]]:
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        yield service, dsn


def _build(memory: MemoryService, user: str) -> None:
    h = memory.for_user(user)
    for text in ("My sister Sarah is visiting next month.", "Sarah is worried about my job offer from Google.",
                 "I work at Acme as a data engineer.", "I left Acme in May.",
                 "Had dinner with my friend Tom; Tom thinks I should take the Google offer.",
                 "Lunch with Thomas, who sent me the Google team blog."):
        h.add(text, dedupe=False)
    h.merge_nodes("Tom", "Thomas")  # a correction the rules would not make again


def test_a_users_graph_comes_back_whole_in_a_new_database(memory, new_db):
    new, dsn = new_db
    user = _user()
    _build(memory, user)
    before = _graph_of(memory.for_user(user))
    assert any(r[2] == "works-at" and r[7] is not None for r in before[1])  # a closed relation travels too
    data = json.loads(json.dumps(memory.export_data(user_id=user)))
    assert all(data[s] for s in GRAPH_SECTIONS)
    assert {n["scope_id"] for n in data["graph_nodes"]} == {user}
    report = new.import_data(data, user_id=user)
    assert {s: report.inserted[s] for s in GRAPH_SECTIONS} == {s: len(data[s]) for s in GRAPH_SECTIONS}
    h = new.for_user(user)
    assert _graph_of(h) == before
    [tom] = h.graph_nodes(name="Thomas")  # the merge held: one Tom, known by both names
    assert tom.name == "Tom"
    # vectors were made again: explore finds the people by meaning, and the memories that mention them
    people = []
    for query in ("who is worried about the job offer", "the user's family", "where does the user work"):
        found, was = h.explore(queries=[query]), memory.for_user(user).explore(queries=[query])
        assert [p.node.name for p in found.people] == [p.node.name for p in was.people]
        assert [m.memory.id for m in found.memories] == [m.memory.id for m in was.memories] != []
        people += [p.node.name for p in found.people]
    assert people
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM graph_nodes WHERE scope_id = %s AND NOT is_owner"
                            " AND embedding IS NULL", (user,)).fetchone()[0] == 0
    walked = h.traverse(seed_nodes=["Sarah"])
    assert "Google" in {n.node.name for n in walked.nodes}
    now = _graph_of(h)
    again = new.import_data(data, user_id=user)  # importing twice adds nothing, changes nothing
    assert all(again.inserted[s] == 0 and again.skipped[s] == len(data[s]) for s in GRAPH_SECTIONS)
    assert _graph_of(h) == now


def test_an_owned_export_holds_the_users_own_graph_only(memory, tenant):
    _build(memory, tenant.user)
    memory.for_user(tenant.other_user).add("My brother Luis lives in Porto.")
    data = memory.export_data(user_id=tenant.user, what="owned")
    assert {(r["scope"], r["scope_id"]) for s in GRAPH_SECTIONS for r in data[s]} == {("user", tenant.user)}
    assert "Luis" not in json.dumps(data)


def test_a_graph_import_is_checked_like_every_section(memory, new_db):
    new, dsn = new_db
    user = _user()
    _build(memory, user)
    data = json.loads(json.dumps(memory.export_data(user_id=user)))

    someone = copy.deepcopy(data)  # someone else's graph is an operator's to import
    for section in GRAPH_SECTIONS:
        for row in someone[section]:
            row["scope_id"] = "mallory"
    with pytest.raises(PermissionDeniedError, match=r"graph_nodes\[0\].scope_id names 'mallory'"):
        new.import_data(someone, user_id=user)

    dangling = copy.deepcopy(data)
    dangling["graph_relations"][0]["to_node"] = str(uuid.uuid4())
    with pytest.raises(InvalidInputError, match=r"graph_relations\[0\].to_node.*not a node of the same graph"):
        new.import_data(dangling, user_id=user)

    bad = copy.deepcopy(data)
    bad["graph_relations"][0]["attitude"] = 9
    with pytest.raises(InvalidInputError, match=r"graph_relations\[0\].attitude.*from 1 to 5"):
        new.import_data(bad, user_id=user)
    with psycopg.connect(dsn) as conn:  # nothing of a refused file was written
        assert conn.execute("SELECT count(*) FROM graph_nodes WHERE scope_id = %s", (user,)).fetchone()[0] == 0

    secret = copy.deepcopy(data)  # a node whose note holds a secret is refused, with what hangs on it
    [sarah] = [n for n in secret["graph_nodes"] if n["name"] == "Sarah"]
    sarah["notes"][0]["content"] = "Sarah's api key is sk-live-4eC39HqLyjWDarjtT1zdp7dc"
    report = new.import_data(secret, user_id=user)
    assert [i for i, _ in report.rejected["graph_nodes"]] == [secret["graph_nodes"].index(sarah)]
    assert report.rejected["graph_relations"] and report.rejected["graph_mentions"]
    assert all("its node" in r.message for _, r in report.rejected["graph_mentions"])
    names = {n.name for n in new.for_user(user).graph_nodes()}
    assert "Sarah" not in names and {"Tom", "Google"} <= names


def test_forgetting_a_user_removes_their_graph(memory, dsn):
    user = _user()
    _build(memory, user)
    memory.forget_user(user_id=user)
    with psycopg.connect(dsn) as conn:
        for table, column in (("graph_nodes", "created_by"), ("graph_relations", "recorded_by"),
                              ("graph_mentions", "added_by")):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE scope_id = %s OR {column} = %s",
                                (user, user)).fetchone()[0] == 0, table
