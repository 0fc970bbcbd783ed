"""The knowledge graph (issue 32) against the real database and the real local embedder:
what saving memories builds, resolution within one owner's graph, explore and traverse,
merge and split, the backfill, and that no other tenant sees any of it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agent_memory import MemoryService
from agent_memory.errors import InvalidInputError

#: three sessions of one user about a sister, a friend and a job offer
SESSIONS = (
    ("My sister Sarah is visiting next month.", "Sarah is worried about my job offer from Google.",
     "I work at Acme as a data engineer."),
    ("Had dinner with my friend Tom; Tom thinks I should take the Google offer.",
     "Sarah and I talked about moving to Lisbon."),
    ("Got a job offer from Google for a staff role, deadline Friday.",
     "Tom said the Google team seems kind."),
)


def _handle(memory: MemoryService, user: str, session: str | None = None):
    return memory.for_user(user, session_id=session)


def _user() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def _save_sessions(memory: MemoryService, user: str) -> None:
    for i, turns in enumerate(SESSIONS):
        h = _handle(memory, user, f"s{i}-{user}")
        for text in turns:
            h.add(text, dedupe=False)


def test_with_the_graph_off_a_save_writes_no_graph_and_build_graph_catches_up(dsn, memory, embeddings):
    """``knowledge_graph=False`` (the default; the suite turns it on in conftest): saves write no
    node, mention or relation; ``build_graph`` then builds what they say."""
    user = _user()
    off = memory.config.replace(knowledge_graph=False)
    with MemoryService(dsn, config=off, embeddings=embeddings) as service:
        h = service.for_user(user)
        h.add("My sister Sarah is visiting next month.")
        h.add_many(["Tom said the Google team seems kind."])
        h.put("plan", "Sarah and I talked about moving to Lisbon.")
        assert h.graph_nodes() == []
        with psycopg.connect(dsn) as conn:
            for table in ("graph_nodes", "graph_mentions", "graph_relations"):
                assert conn.execute(f"SELECT count(*) FROM {table} WHERE scope = 'user' AND scope_id = %s",
                                    (user,)).fetchone()[0] == 0, table
        h.build_graph()
        assert {"Sarah", "Tom", "Google", "Lisbon"} <= {n.name for n in h.graph_nodes()}


def test_saving_memories_builds_people_entities_and_the_owners_relations(memory):
    user = _user()
    _save_sessions(memory, user)
    h = _handle(memory, user)
    nodes = {n.name: n for n in h.graph_nodes()}
    assert nodes[user].is_owner and nodes[user].node_type == "person"
    assert nodes["Sarah"].node_type == "person" and nodes["Tom"].node_type == "person"
    assert nodes["Google"].node_type == "entity" and nodes["Google"].entity_type == "organisation"
    assert nodes["Acme"].entity_type == "organisation" and nodes["Lisbon"].entity_type == "location"
    assert nodes["Sarah"].source_count == 3  # mentioned by three memories
    assert any("Sarah is worried" in s for s in nodes["Sarah"].notes_snippets)
    sarah, relations = h.graph_node("Sarah")
    [sister] = [r for r in relations if r.rel_type == "sister"]
    assert (sister.from_name, sister.to_name, sister.kind) == (user, "Sarah", "has_relationship_with")
    assert (sister.attitude, sister.proximity) == (4, 5) and sister.valid_to is None
    _, own = h.graph_node(user)
    types = {(r.rel_type, r.to_name) for r in own}
    assert {("friend", "Tom"), ("works-at", "Acme"), ("job-offer-from", "Google"), ("lives-in", "Lisbon")} <= types


def test_explore_answers_people_relations_and_memories_for_the_job_offer(memory):
    user = _user()
    _save_sessions(memory, user)
    result = _handle(memory, user).explore(["the Google job offer"], text_matches=["Sarah"],
                                           return_explanations=True)
    people = [h.node.name for h in result.people]
    assert "Sarah" in people
    assert "Google" in [h.node.name for h in result.entities]
    assert any(r.rel_type == "sister" for r in result.relationships)
    contents = [m.memory.content for m in result.memories]
    assert any("job offer from Google" in c for c in contents)
    assert all(m.memory.user_id == user for m in result.memories)
    assert result.people[0].explanation is not None and "recency" in result.people[0].explanation
    shape = result.to_dict()
    assert set(shape) == {"meta", "semantic", "episodic"}
    assert set(shape["semantic"]) == {"people", "concepts", "entities", "relationships"}
    assert set(shape["episodic"]) == {"memories", "sources", "storylines", "macros"}
    assert shape["semantic"]["people"][0]["node_type"] == "Person"
    # recalled: the returned nodes are no longer candidates
    assert {n.state for n in _handle(memory, user).graph_nodes(name="Sarah")} == {"active"}


def test_concurrent_explores_never_fail_on_their_recall_bookkeeping(memory):
    """Explore records recalls (a write on a read path): 6 threads exploring the same nodes in
    different orders all answer; none fails with a deadlock or waits on another's locks."""
    from concurrent.futures import ThreadPoolExecutor

    user = _user()
    _save_sessions(memory, user)
    asks = [["the Google job offer"], ["Sarah and Tom"], ["Tom", "Google"], ["Lisbon", "Sarah"], ["Acme"], ["Tom"]]

    def explore(i: int) -> int:
        h = _handle(memory, user)
        return sum(len(h.explore(asks[(i + j) % len(asks)]).people) for j in range(8))

    with ThreadPoolExecutor(6) as pool:
        found = list(pool.map(explore, range(6)))
    assert len(found) == 6 and all(n > 0 for n in found)
    states = {n.name: n.state for n in _handle(memory, user).graph_nodes()}
    assert states["Sarah"] in ("active", "core") and states["Tom"] in ("active", "core")  # recalls counted


def test_relationship_filters_remove_relations_before_scoring(memory):
    user = _user()
    _save_sessions(memory, user)
    h = _handle(memory, user)
    close = h.explore(text_matches=["Sarah", "Tom"], relationship_filters={"min_proximity": 5})
    assert {r.rel_type for r in close.relationships} == {"sister"}
    none_family = h.explore(text_matches=["Sarah", "Tom"],
                            relationship_filters={"exclude_relationship_types": ["sister"]})
    assert "sister" not in {r.rel_type for r in none_family.relationships}
    with pytest.raises(InvalidInputError, match="relationship_filters"):
        h.explore(text_matches=["Sarah"], relationship_filters={"min_attitude": 9})
    with pytest.raises(InvalidInputError, match="relationship_filters"):
        h.explore(text_matches=["Sarah"], relationship_filters={"cypher": "MATCH (n) RETURN n"})
    with pytest.raises(InvalidInputError, match="at least one"):
        h.explore()


def test_traverse_ppr_reaches_what_is_connected_and_pattern_mode_filters_relations(memory):
    user = _user()
    _save_sessions(memory, user)
    h = _handle(memory, user)
    [tom] = h.graph_nodes(name="Tom")
    walk = h.traverse(seed_nodes=[str(tom.id)], top_k=10)
    names = [n.node.name for n in walk.nodes]
    assert names[0] == "Tom" and "Google" in names  # Tom and Google share memories
    assert all(n.score > 0 for n in walk.nodes)
    by_name = h.traverse(seed_nodes=["tom"], top_k=10)
    assert [n.node.id for n in by_name.nodes] == [n.node.id for n in walk.nodes]
    family = h.traverse(mode="pattern", seed_nodes=[user], relationship_types=["sister"], direction="out")
    assert [n.node.name for n in family.nodes] == ["Sarah"]
    work = h.traverse(mode="pattern", relation_kinds=["associated_with"], min_proximity=4)
    assert work.relationships == ()  # work relations carry no proximity
    with pytest.raises(InvalidInputError, match="seed_nodes"):
        h.traverse(seed_nodes=["Nobody At All"])
    with pytest.raises(InvalidInputError, match="mode"):
        h.traverse(mode="cypher", seed_nodes=[str(tom.id)])


def test_an_ended_relation_is_closed_not_deleted(memory):
    user = _user()
    h = _handle(memory, user)
    h.add("I work at Initech on the billing team.")
    h.add("Used to work at Initech, now at Globex.", dedupe=False)
    _, relations = h.graph_node("Initech")
    [works] = [r for r in relations if r.rel_type == "works-at"]
    assert works.valid_to is not None  # ended in the world, still known
    assert h.traverse(mode="pattern", seed_nodes=[user], relationship_types=["works-at"]).relationships == ()
    past = h.traverse(mode="pattern", seed_nodes=[user], relationship_types=["works-at"],
                      since=datetime.now(UTC) - timedelta(days=1))
    assert [r.to_name for r in past.relationships] == ["Initech"]


def test_spelling_variants_resolve_to_one_person_but_never_across_owners(memory):
    alice, bob = _user(), _user()
    a = _handle(memory, alice)
    a.add("My sister Sarah loves climbing.")
    a.add("Went climbing with Sara on Sunday.", dedupe=False)
    [sarah] = a.graph_nodes(node_type="person", name="Sarah")
    assert sarah.source_count == 2 and "sara" in sarah.aliases
    assert a.graph_nodes(name="sara")[0].id == sarah.id
    b = _handle(memory, bob)
    b.add("My colleague Sarah runs the design team.")
    [bobs] = b.graph_nodes(name="Sarah")
    assert bobs.id != sarah.id and bobs.source_count == 1
    assert len(a.graph_nodes(name="Sarah")[0].notes_snippets) == 2


def test_another_tenant_sees_nothing_of_a_graph(memory):
    owner, stranger = _user(), _user()
    _save_sessions(memory, owner)
    o, s = _handle(memory, owner), _handle(memory, stranger)
    [sarah] = o.graph_nodes(name="Sarah")
    assert s.graph_nodes() == []
    found = s.explore(["Sarah the sister and the Google offer"], text_matches=["Sarah", "Google"])
    assert (found.people, found.entities, found.relationships, found.memories) == ((), (), (), ())
    with pytest.raises(InvalidInputError):
        s.graph_node(str(sarah.id))
    with pytest.raises(InvalidInputError):
        s.traverse(seed_nodes=["Sarah"])
    assert s.traverse(seed_nodes=[str(sarah.id)]).nodes == ()  # an id of another graph reaches nothing
    assert s.traverse(mode="pattern", seed_nodes=[str(sarah.id)]).relationships == ()
    assert s.traverse(mode="pattern", relationship_types=["sister"]).relationships == ()
    with pytest.raises(InvalidInputError):
        s.merge_nodes(str(sarah.id), "Tom")


def test_explore_shows_only_memories_the_caller_may_read(memory, tenant):
    """A project memory that mentions a node of the writer's graph is shown to the writer; an
    owner_only one never to another member (whose own graph is separate anyway)."""
    h = memory.for_user(tenant.user, project_id=tenant.project)
    h.add("My friend Priya reviews the launch plan.", scope="project", visibility="owner_only")
    mine = h.explore(text_matches=["Priya"])
    assert [m.memory.content for m in mine.memories] == ["My friend Priya reviews the launch plan."]
    other = memory.for_user(tenant.other_user, project_id=tenant.project)
    seen = other.explore(["Priya reviews the launch plan"], text_matches=["Priya"])
    assert seen.people == () and seen.memories == ()


def test_merge_and_split_correct_the_graph(memory):
    user = _user()
    h = _handle(memory, user)
    a = h.add("My friend Bob lent me a tent.")
    b = h.add("Robert invited me to his party; Robert said it starts at eight.", dedupe=False)
    merged = h.merge_nodes("Bob", "Robert")
    assert merged.name == "Bob" and "robert" in merged.aliases and merged.source_count == 2
    assert h.graph_nodes(name="Robert")[0].id == merged.id
    with pytest.raises(InvalidInputError, match="same node"):
        h.merge_nodes("Bob", "robert")
    new = h.split_node("Bob", "Robert", [b.id])
    assert new.name == "Robert" and new.node_type == "person" and new.source_count == 1
    [bob] = h.graph_nodes(name="Bob")
    assert bob.source_count == 1 and "robert" not in bob.aliases and bob.id != new.id
    assert a.id  # the tent memory stays with Bob
    assert [n for n in bob.notes_snippets if "tent" in n]


def test_build_graph_backfills_memories_written_before_it_resumably(memory, dsn):
    user = _user()
    h = _handle(memory, user)
    for text in ("My brother Luis lives in Porto.", "Luis sent photos of the river.", "Prefers tea."):
        h.add(text, dedupe=False)
    with psycopg.connect(dsn, autocommit=True) as conn:  # as if written before the graph existed
        conn.execute("DELETE FROM graph_nodes WHERE scope = 'user' AND scope_id = %s", (user,))
    assert h.graph_nodes() == []
    assert h.build_graph(batch=1, limit=1) == 1  # stopped early
    assert h.build_graph(batch=2) == 2  # the rest; the first is not read again
    [luis] = h.graph_nodes(name="Luis")
    assert luis.source_count == 2
    assert h.build_graph() == 1  # only the memory that names nothing is read again; nothing doubles
    assert h.graph_nodes(name="Luis")[0].source_count == 2


async def test_the_async_handle_explores_the_same_graph(amemory):
    user = _user()
    h = amemory.for_user(user)
    await h.add("My sister Sarah is visiting next month.")
    result = await h.explore(text_matches=["Sarah"])
    assert [p.node.name for p in result.people] == ["Sarah"]
    assert [r.rel_type for r in result.relationships] == ["sister"]


def test_the_graph_commands(dsn, monkeypatch, capsys, memory):
    import json as _json

    from agent_memory.cli import main

    monkeypatch.setenv("DATABASE_URL", dsn)
    user = _user()
    h = _handle(memory, user)
    h.add("My friend Bob lent me a tent.")
    robert = h.add("Robert invited me to his party; Robert said it starts at eight.", dedupe=False)
    me = ["--user", user]
    assert main(["graph", "list", "--json", *me]) == 0
    listed = {n["name"]: n for n in _json.loads(capsys.readouterr().out)}
    assert {"Bob", "Robert", user} <= set(listed)
    assert main(["graph", "show", "Bob", "--json", *me]) == 0
    shown = _json.loads(capsys.readouterr().out)
    assert [r["type"] for r in shown["relations"]] == ["friend"]
    assert main(["graph", "merge", "Bob", "Robert", *me]) == 0
    assert "merged 'Robert' into Bob" in capsys.readouterr().out
    assert main(["graph", "split", "Bob", "--name", "Robert", "--memory", str(robert.id), "--json", *me]) == 0
    assert _json.loads(capsys.readouterr().out)["name"] == "Robert"
    assert main(["graph", "export", *me]) == 0
    exported = _json.loads(capsys.readouterr().out)
    assert {n["name"] for n in exported["nodes"]} >= {"Bob", "Robert"} and exported["relations"]
    assert main(["graph", "build", "--json", *me]) == 0
    assert _json.loads(capsys.readouterr().out) == {"memories_read": 0}
    assert main(["graph", "merge", "Bob", *me]) == 2  # a mistake says what to give
    assert "takes 2 node name(s)" in capsys.readouterr().err
    assert main(["graph", "list", "--user", _user()]) == 0
    assert "is empty" in capsys.readouterr().out  # another user's graph is not theirs


def test_resolution_rules_are_pure_and_strict():
    from agent_memory.graph.extract import Found
    from agent_memory.graph.resolve import resolve, variant_of

    assert variant_of("sara", "sarah") and variant_of("sara lee", "sarah lee")
    assert not variant_of("alma abbott", "ana abbott") and not variant_of("jon", "john")
    assert not variant_of("sarah lee", "sarah kim") and not variant_of("mark", "mary")
    rows = [{"id": 1, "node_type": "person", "entity_type": "", "canonical_name": "sarah", "aliases": []},
            {"id": 2, "node_type": "person", "entity_type": "", "canonical_name": "sarai", "aliases": []}]
    # two candidates: no guess, a new node
    assert resolve([Found("Sara", "person")], rows) == {"sara": None}
    assert resolve([Found("Sarah", "person")], rows)["sarah"]["id"] == 1


def test_extraction_rules_find_people_places_work_and_tools():
    from agent_memory.graph.extract import OWNER, extract

    got = extract("My sister Sarah moved to Lisbon. I work at Acme and use Python daily.")
    assert {(f.name, f.node_type, f.entity_type) for f in got.found} == {
        ("Sarah", "person", ""), ("Lisbon", "entity", "location"), ("Acme", "entity", "organisation"),
        ("Python", "entity", "tool")}
    assert {(link.source, link.target, link.rel_type) for link in got.links} == {
        (OWNER, "Sarah", "sister"), (OWNER, "Lisbon", "lives-in"), (OWNER, "Acme", "works-at"),
        (OWNER, "Python", "uses")}
    assert all(f.known_only for f in extract("Deploys go out on Tuesdays.").found)  # no new node
    assert [f.name for f in extract("Met Cleo Baker and Wes Diaz for lunch.").found] == ["Cleo Baker", "Wes Diaz"]
    [opening] = extract("Caroline went home.").found
    assert opening.known_only  # a capitalised word opening a sentence: only a name already known


def test_personalized_pagerank_is_a_distribution_that_favours_what_is_near_the_seeds():
    from agent_memory.graph.rank import co_mention_edges, notes_snippets, personalized_pagerank

    ranks = personalized_pagerank([("a", "b", 1.0), ("b", "c", 1.0), ("x", "y", 1.0)], ["a"])
    assert abs(sum(ranks.values()) - 1) < 1e-9
    assert ranks["b"] > ranks["c"] > 0 and ranks["x"] == ranks["y"] == 0  # unreachable: nothing
    heavier = personalized_pagerank([("a", "b", 5.0), ("a", "c", 1.0)], ["a"])
    assert heavier["b"] > heavier["c"]
    assert personalized_pagerank([], []) == {}
    assert co_mention_edges([{"node_id": "a", "source_id": 1}, {"node_id": "a", "source_id": 2}],
                            [{"node_id": "a", "source_id": 1}, {"node_id": "b", "source_id": 1},
                             {"node_id": "b", "source_id": 2}, {"node_id": "c", "source_id": 2}]) == [
        ("a", "b", 2.0), ("a", "c", 1.0)]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    notes = [{"content": "x" * 900, "added_at": f"2025-12-{d:02d}"} for d in range(1, 21)]
    notes.append({"content": "gone", "added_at": "2025-12-31", "expires_at": "2025-12-30T00:00:00+00:00"})
    cut = notes_snippets(notes, now)
    assert len(cut) == 10 and all(len(c) == 500 for c in cut) and "gone" not in cut
    assert sum(len(c) for c in notes_snippets(notes, now, per_note=800)) == 5000  # 5,000 in all


def test_add_many_and_put_build_the_graph_too(memory):
    user = _user()
    h = _handle(memory, user)
    h.add_many(["My brother Luis lives in Porto.", "Prefers tea.", {"content": "Had coffee with Nadia Reyes."}])
    h.put("boss", "My manager Irene runs the data team.")
    names = {n.name for n in h.graph_nodes()}
    assert {"Luis", "Porto", "Nadia Reyes", "Irene", user} <= names
    h.put("boss", "My manager Irene moved to Berlin.")  # a new wording: what it says joins the graph
    assert h.graph_nodes(name="Berlin")[0].entity_type == "location"


def test_a_memory_that_names_nothing_costs_no_statement():
    """Driven with no database: ingest asks for nothing when the rules find nothing, and for three
    statements (resolve; nodes and mentions in one; relations) when a memory names a relative."""
    import uuid as _uuid

    from agent_memory.db.requests import Sql
    from agent_memory.graph.ops import ingest
    from agent_memory.validation import check_identity

    me = check_identity("alice")
    quiet = ingest(me, _uuid.uuid4(), "Prefers dark roast coffee.", [0.1, 0.2])
    with pytest.raises(StopIteration) as done:
        next(quiet)
    assert done.value.value == 0
    asked: list[Sql] = []
    op = ingest(me, _uuid.uuid4(), "My sister Sarah called.", [0.1, 0.2])
    answer = None
    try:
        while True:
            request = op.send(answer)
            asked.append(request)
            answer = ([{"id": _uuid.uuid4(), "node_type": "person", "entity_type": "", "canonical_name": k}
                       for k in ("sarah", "@me")] if "RETURNING" in str(request.query) else [])
    except StopIteration as end:
        assert end.value == 1
    assert len(asked) == 3 and all(isinstance(r, Sql) for r in asked)
    assert all(r.params["g"] == "alice" for r in asked)  # every statement names the caller's graph
