"""The search indexes of migration 0010 (``memory_items_search_idx``, ``memory_items_count_idx``,
``memory_terms``): every read through them equals the exhaustive answer under every access rule,
never crosses a tenant, and the side table stays true through every write path."""

from __future__ import annotations

import random
import uuid

import psycopg
import pytest
from psycopg import sql

from agent_memory import MemoryService, queries
from agent_memory.db.migrations import SEARCH_INDEX_MAX_DIMENSIONS
from agent_memory.identity import Identity
from agent_memory.models import Scope
from agent_memory.ops import NewMemory
from agent_memory.reembed import reembed
from hash_embeddings import HashEmbeddings
from search_reference import exhaustive, terms_diff, texts

QUERIES = ["what do we do on weekends?", "kubernetes deadline", "coffee", "money and taxes", "release budget",
           "deploy on Friday"]


def _answer(results) -> list[tuple[str, float]]:
    return [(str(r.item.id), round(r.score, 9)) for r in results]


@pytest.fixture(scope="module")
def world(memory: MemoryService):
    """alice owns project P (bob is an editor), belongs to teams T1 (bob leads) and T2 (carol
    leads) and to carol's org O; carol's project P2 is shared with team T1. dave's team T3 and
    project P3 hold the same sentences and must never show."""
    tag = uuid.uuid4().hex[:8]
    u = {name: f"{name}-{tag}" for name in ("alice", "bob", "carol", "dave")}
    s = {name: f"{name}-{tag}" for name in ("P", "P2", "P3", "T1", "T2", "T3", "O")}
    memory.create_project(s["P"], user_id=u["alice"])
    memory.add_member("project", s["P"], u["bob"], "editor", user_id=u["alice"])
    memory.create_project(s["P2"], user_id=u["carol"])
    memory.create_project(s["P3"], user_id=u["dave"])
    memory.create_team(s["T1"], user_id=u["bob"])
    memory.add_member("team", s["T1"], u["alice"], "member", user_id=u["bob"])
    memory.create_team(s["T2"], user_id=u["carol"])
    memory.add_member("team", s["T2"], u["alice"], "member", user_id=u["carol"])
    memory.create_team(s["T3"], user_id=u["dave"])
    memory.create_org(s["O"], user_id=u["carol"])
    memory.add_member("org", s["O"], u["alice"], "member", user_id=u["carol"])
    memory.share_project(s["P2"], user_id=u["carol"], with_team=s["T1"])

    rng = random.Random(13)

    def put(who: str, scope: str, n: int, *, visibility: str = "members", memory_type: str | None = None, **ids):
        items = [NewMemory(content=t, scope=scope, visibility=visibility,
                           memory_type=memory_type or rng.choice(["fact", "preference", "decision", "event"]),
                           confidence=round(rng.uniform(0.6, 1.0), 3))
                 for t in texts(rng, f"{who} {scope} {visibility}", n)]
        memory.for_user(u[who], **ids).add_many(items)

    put("alice", "user", 40)
    put("alice", "session", 15, project_id=s["P"], session_id=f"sess-{tag}")
    put("alice", "project", 40, project_id=s["P"])
    put("alice", "project", 10, visibility="owner_only", project_id=s["P"])
    put("bob", "project", 20, visibility="owner_only", project_id=s["P"])
    put("bob", "project", 15, visibility="public", project_id=s["P"])
    put("bob", "team", 35, team_id=s["T1"])
    put("bob", "team", 10, visibility="owner_only", team_id=s["T1"])
    put("carol", "team", 20, team_id=s["T2"])
    put("carol", "org", 30, org_id=s["O"])
    put("carol", "project", 20, visibility="public", project_id=s["P2"])
    put("carol", "project", 20, project_id=s["P2"])
    put("dave", "team", 30, team_id=s["T3"])
    put("dave", "project", 30, project_id=s["P3"])
    put("dave", "user", 30)
    return u, s, tag


def _callers(u, s, tag):
    return {
        "alice-all-levels": dict(user_id=u["alice"], project_id=s["P"], session_id=f"sess-{tag}"),
        "alice-one-team": dict(user_id=u["alice"], project_id=s["P"], team_id=s["T1"], org_id=s["O"]),
        "alice-shared-project": dict(user_id=u["alice"], project_id=s["P2"]),
        "bob-owner-only": dict(user_id=u["bob"], project_id=s["P"], team_id=s["T1"]),
        "carol": dict(user_id=u["carol"], project_id=s["P2"], org_id=s["O"]),
        "alice-not-a-member": dict(user_id=u["alice"], project_id=s["P3"], team_id=s["T3"]),
    }


FILTERS = [dict(), dict(scope="team"), dict(scope="org"), dict(scope=["project", "team"]), dict(scope="session"),
           dict(memory_type="decision"), dict(memory_type=["fact", "event"], scope=["user", "org", "project"]),
           dict(min_relevance=0.35), dict(k=50)]


@pytest.mark.parametrize("caller", ["alice-all-levels", "alice-one-team", "alice-shared-project", "bob-owner-only",
                                    "carol", "alice-not-a-member"])
def test_indexed_search_equals_the_exhaustive_scan_under_every_access_rule(memory, world, caller):
    u, s, tag = world
    ids = _callers(u, s, tag)[caller]
    for i, query in enumerate(QUERIES):
        for filters in FILTERS[i % 3::3] if caller != "alice-all-levels" else FILTERS:
            args = dict(dict(k=7), **filters)
            got = memory.for_user(**ids).search(query, **args)
            with exhaustive():
                want = memory.for_user(**ids).search(query, **args)
            assert _answer(got) == _answer(want), (caller, query, filters)
            if caller == "alice-not-a-member":  # her own and her org's (none named: all of hers)
                assert {r.item.scope_id for r in got} <= {u["alice"], s["O"]}


def test_no_result_ever_belongs_to_a_scope_the_caller_cannot_read(memory, world):
    u, s, tag = world
    alice = _callers(u, s, tag)["alice-shared-project"]
    seen = [r.item for q in QUERIES for r in memory.for_user(**alice).search(q, k=50)]
    assert seen, "the shared project's public memories and alice's own must be found"
    for item in seen:
        assert item.scope_id not in (s["P3"], s["T3"]) and item.user_id != u["dave"]
        if item.scope_id == s["P2"]:
            assert item.visibility.value == "public"  # shared: public ones only
        if item.visibility.value == "owner_only":
            assert item.user_id == u["alice"]


def test_ties_wider_than_the_candidate_window_still_give_the_exact_answer(memory, tenant):
    """150 equal rows: the band of estimates within the rounding margin runs past ``k + pool``
    rows, so the search takes its second pass; the answer is still the exhaustive one."""
    config = memory.config.replace(candidate_pool=5)
    with MemoryService(memory.conn, config=config, embeddings=memory.embeddings) as small_pool:
        items = [NewMemory(content="The deploy freeze starts on Friday", scope="project", confidence=0.9)] * 150
        items += [NewMemory(content=t, scope="project") for t in texts(random.Random(3), "x", 30)]
        small_pool.for_user(tenant.user, project_id=tenant.project).add_many(items)
        for k in (3, 10, 40):
            got = small_pool.for_user(tenant.user, project_id=tenant.project).search("deploy freeze", k=k)
            with exhaustive():
                want = small_pool.for_user(tenant.user, project_id=tenant.project).search("deploy freeze", k=k)
            assert len(got) == k and _answer(got) == _answer(want)


def test_the_python_key_is_the_sql_key(dsn, memory, tenant):
    values = ["", "a", "b", "user-1", "user-2", "ÄÖÜ straße", "用户", "🙂 emoji", "x" * 5000, "tab\there",
              "'quote\"", tenant.user, tenant.project]
    with psycopg.connect(dsn) as conn:
        for value in values:
            assert conn.execute("SELECT agent_memory_key(%s)", (value,)).fetchone()[0] == queries.scope_key(value)
        assert len({queries.scope_key(v) for v in values}) == len(values)
        memory.for_user(tenant.user).add("I keep my keys in the blue bowl")
        memory.for_user(tenant.user, project_id=tenant.project).add("The staging database is in Frankfurt", scope="project")
        rows = conn.execute("SELECT scope_id, user_id, scope_key, owner_key FROM memory_items WHERE user_id = %s",
                            (tenant.user,)).fetchall()
    assert len(rows) == 2
    for scope_id, user_id, skey, okey in rows:
        assert (skey, okey) == (queries.scope_key(scope_id), queries.scope_key(user_id))


# --- memory_terms stays true -----------------------------------------------------------------

def _postings(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM memory_terms").fetchone()[0]


def test_memory_terms_follow_every_write_path(dsn, memory, tenant):
    who = dict(user_id=tenant.user, project_id=tenant.project)
    before = _postings(dsn)

    def check(step: str) -> int:
        diff = terms_diff(dsn)
        assert not diff, f"memory_terms differs from memory_items after {step}: {diff}"
        return _postings(dsn)

    saved = memory.for_user(**who).add("Our sprint review moves to Thursday afternoons", scope="project")
    grown = check("a save")
    assert grown > before
    report = memory.for_user(**who).add_many([NewMemory(content=t, scope="project") for t in texts(random.Random(5), "t", 20)]
                                    + ["I water the ferns every Sunday"])
    check("an import")
    memory.for_user(**who).edit(saved.id, content="Our sprint review moves to Wednesday mornings")
    check("an edit")
    memory.for_user(**who).delete(report.inserted[0])
    check("an archive")
    memory.for_user(**who).restore(report.inserted[0])
    check("a restore")
    memory.for_user(**who).delete(report.inserted[1], hard=True)
    check("a hard delete")
    memory.for_user(**who).delete(report.inserted[2])
    memory.for_user(**who).purge_archived()
    check("a purge")
    with psycopg.connect(dsn) as conn:  # ids are rewritten by tools that re-key data (the CLI tests do)
        conn.execute("UPDATE memory_items SET id = gen_random_uuid() WHERE id = %s", (report.inserted[3],))
    check("an id change")
    memory.for_user(tenant.other_user, project_id=tenant.project).add("The release train leaves every second Tuesday", scope="project")
    memory.forget_user(user_id=tenant.other_user)
    check("forgetting a user")
    memory.delete_scope("project", tenant.project, user_id=tenant.user)
    check("deleting a scope")
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM memory_terms WHERE scope = 'project' AND scope_key = %s",
                            (queries.scope_key(tenant.project),)).fetchone()[0]
    assert left == 0


#: the postings ``memory_context_terms`` should hold (one per lexeme of each active memory's context)
#: against what it holds: rows on either side only, at most 20
CONTEXT_TERMS_DIFF = """
WITH truth AS (
    SELECT m.scope, m.scope_key, u.lexeme, m.id, coalesce(cardinality(u.positions), 1) AS tf, m.owner_key,
           m.visibility, m.memory_type, m.expires_at
    FROM memory_items m CROSS JOIN LATERAL unnest(m.context_tsv) AS u WHERE m.status = 'active'
), kept AS (
    SELECT scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type, expires_at FROM memory_context_terms
)
SELECT 'missing' AS side, * FROM (SELECT * FROM truth EXCEPT ALL SELECT * FROM kept) a
UNION ALL
SELECT 'stale' AS side, * FROM (SELECT * FROM kept EXCEPT ALL SELECT * FROM truth) b
LIMIT 20
"""


def test_memory_context_terms_follow_every_write_path(dsn, memory, tenant):
    """The postings of the contexts' words (migration 0023) stay equal to the contexts of the
    active memories through saves, transcripts, edits, archives, restores, deletes, expiry
    changes, id changes, forgetting a user and deleting a scope."""
    who = dict(user_id=tenant.user, project_id=tenant.project)
    h = memory.for_user(**who)

    def check(step: str) -> int:
        with psycopg.connect(dsn) as conn:
            diff = conn.execute(CONTEXT_TERMS_DIFF).fetchall()
            assert not diff, f"memory_context_terms differs from memory_items after {step}: {diff}"
            return conn.execute("SELECT count(*) FROM memory_context_terms t JOIN memory_items m USING (id)"
                                " WHERE m.scope_id = %s", (tenant.project,)).fetchone()[0]

    report = h.add_transcript(["Which cabin did we book for the Oslo trip?", "Yes, the one by the lake",
                               "It has a sauna and a rowing boat"], conversation="trip", scope="project")
    assert check("a transcript") > 0
    h.add("Our sprint review moves to Thursday afternoons", scope="project")  # no context: no postings
    h.add_many([NewMemory(content="The ferry leaves at noon", scope="project", context="When is the ferry?")])
    check("an add_many with context")
    first, second, third = report.inserted
    h.edit(second, content="Yes, the cabin by the lake")
    check("an edit")
    h.delete(first)
    check("an archive")
    h.restore(first)
    check("a restore")
    h.delete(third, hard=True)
    check("a hard delete")
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE memory_items SET expires_at = now() + interval '1 day' WHERE id = %s", (second,))
        conn.execute("UPDATE memory_items SET id = gen_random_uuid() WHERE id = %s", (first,))
    check("an expiry and an id change")
    memory.for_user(tenant.other_user, project_id=tenant.project).add_transcript(
        ["Did you pack the tent?", "Yes, and the stove"], conversation="packing", scope="project")
    memory.forget_user(user_id=tenant.other_user)
    check("forgetting a user")
    memory.delete_scope("project", tenant.project, user_id=tenant.user)
    assert check("deleting a scope") == 0
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM memory_context_terms WHERE scope = 'project' AND scope_key = %s",
                            (queries.scope_key(tenant.project),)).fetchone()[0]
    assert left == 0


# --- the other reads through the index: duplicates, neighbours at other levels ---------------


def _exact_nearest(dsn, identity: Identity, scope: Scope, vector, threshold: float):
    filt, params = queries.item_filter(identity, scopes=(scope,))
    with psycopg.connect(dsn) as conn:
        row = conn.execute(sql.SQL(
            "SELECT m.id FROM memory_items m WHERE {f} AND (m.embedding <=> %(v)s::vector) <= 1 - %(t)s"
            " ORDER BY m.embedding <=> %(v)s::vector, m.created_at LIMIT 1").format(f=filt),
            dict(params, v=queries.vector_literal(vector), t=threshold)).fetchone()
    return None if row is None else row[0]


def test_duplicate_checks_find_the_exact_nearest_and_never_another_tenants(dsn, memory, world):
    u, s, tag = world
    threshold = memory.config.duplicate_threshold
    probes = ["I like coffee a lot", "We talked about guitar yesterday (bob team members 3)",
              "Remember the deploy deadline on Friday", "The team is worried about budget"]
    for ids, scope in ((dict(user_id=u["alice"], team_id=s["T1"]), Scope.TEAM),
                       (dict(user_id=u["alice"], project_id=s["P"]), Scope.PROJECT),
                       (dict(user_id=u["alice"], project_id=s["P3"]), Scope.PROJECT),
                       (dict(user_id=u["alice"], team_id=s["T3"]), Scope.TEAM)):
        identity = Identity(**ids)
        for probe in probes:
            for text in (probe, probe + " (alice)"):
                found = memory.for_user(**ids).find_duplicate(text, scope=scope.value)
                want = _exact_nearest(dsn, identity, scope, memory.embeddings.embed_query(text), threshold)
                assert (None if found is None else found.id) == want, (ids, text)
                if found is not None:
                    assert found.scope_id in (s["T1"], s["P"])  # never dave's team or project
    # dave's rows are identical texts: a member-less caller finds nothing to dedupe against
    assert memory.for_user(u["alice"], team_id=s["T3"]).find_duplicate("We talked about guitar yesterday", scope="team") is None


def test_bulk_import_dedupes_against_the_callers_scope_only(dsn, memory, world):
    u, s, tag = world
    with psycopg.connect(dsn) as conn:
        dave_team = [r[0] for r in conn.execute(
            "SELECT content FROM memory_items WHERE scope = 'team' AND scope_id = %s LIMIT 5", (s["T3"],))]
        bob_team = [r[0] for r in conn.execute(
            "SELECT content FROM memory_items WHERE scope = 'team' AND scope_id = %s AND visibility = 'members'"
            " LIMIT 5", (s["T1"],))]
    fresh = f"team-{uuid.uuid4().hex[:8]}"
    memory.create_team(fresh, user_id=u["dave"])
    report = memory.for_user(u["dave"], team_id=fresh).add_many([NewMemory(content=c, scope="team") for c in dave_team], dedupe=True)
    assert len(report.inserted) == len(dave_team) and not report.duplicates  # T3's rows are another scope
    again = memory.for_user(u["bob"], team_id=s["T1"]).add_many([NewMemory(content=c, scope="team") for c in bob_team + dave_team], dedupe=True)
    # bob's own wordings are duplicates; dave's may be near ones of T1's too, but only ever of T1's rows
    assert {i for i, _ in again.duplicates} >= set(range(len(bob_team)))
    with psycopg.connect(dsn) as conn:
        owners = {r[0] for r in conn.execute("SELECT scope_id FROM memory_items WHERE id = ANY(%s)",
                                              ([d for _, d in again.duplicates],))}
    assert owners == {s["T1"]}


def test_conflicts_come_only_from_levels_the_caller_reads(memory, world):
    u, s, tag = world
    alice = _callers(u, s, tag)["alice-shared-project"]
    readable = {str(r.item.id) for q in QUERIES for r in memory.for_user(**alice).search(q, k=50)}
    for query in QUERIES:
        results, found = memory.for_user(**alice).search_with_conflicts(query, k=8)
        for conflict in found:
            for item in conflict.items:
                assert item.user_id != u["dave"] and item.scope_id not in (s["P3"], s["T3"])
                assert item.visibility.value != "owner_only" or item.user_id == u["alice"]
        assert {str(r.item.id) for r in results} <= readable


def test_neighbours_at_other_levels_equal_the_exhaustive_join(dsn, memory, world):
    u, s, tag = world
    identity = Identity(**_callers(u, s, tag)["alice-all-levels"])
    anchors = [r.item.id for r in memory.for_user(**_callers(u, s, tag)["alice-all-levels"]).search("deploy deadline", k=8)]
    threshold, per = memory.config.conflict_threshold, 3
    q, p = queries.cross_level_neighbours(identity, anchors, threshold, per)
    filt, params = queries.item_filter(identity)
    with psycopg.connect(dsn) as conn:
        got = [(r[0], r[1]) for r in conn.execute(
            sql.SQL("SELECT anchor, id FROM ({q}) x").format(q=q), p).fetchall()]
        want = [(r[0], r[1]) for r in conn.execute(sql.SQL(
            "SELECT a.id, n.id FROM memory_items a CROSS JOIN LATERAL (SELECT m.id FROM memory_items m"
            " WHERE {f} AND m.scope <> a.scope AND (m.embedding <=> a.embedding) <= 1 - %(t)s"
            " ORDER BY m.embedding <=> a.embedding LIMIT %(per)s) n WHERE a.id = ANY(%(ids)s)"
            " ORDER BY a.id").format(f=filt), dict(params, t=threshold, per=per, ids=anchors)).fetchall()]
    assert sorted(got) == sorted(want) and want


# --- embedding sizes beyond the index --------------------------------------------------------


def _search_index(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_items_search_idx'"
                            ).fetchone()[0]


def test_big_vectors_stay_out_of_the_index_and_search_is_still_exact(fresh_dsn):
    dsn = fresh_dsn()
    big = SEARCH_INDEX_MAX_DIMENSIONS + 76
    with MemoryService(dsn, embeddings=HashEmbeddings(big)) as memory:
        assert "embedding_half" not in _search_index(dsn)
        memory.for_user("u1").add_many(texts(random.Random(1), "big", 60))
        got = memory.for_user("u1").search("coffee deadline", k=5)
        with exhaustive():
            want = memory.for_user("u1").search("coffee deadline", k=5)
        assert len(got) == 5 and _answer(got) == _answer(want)


def test_reembedding_across_the_limit_remakes_the_search_index(fresh_dsn):
    dsn = fresh_dsn()
    with MemoryService(dsn, embeddings=HashEmbeddings(8)) as memory:
        memory.for_user("u1").add_many(texts(random.Random(2), "r", 30))
    assert "embedding_half" in _search_index(dsn)
    for dims, carried in ((SEARCH_INDEX_MAX_DIMENSIONS + 1, False), (32, True)):
        with psycopg.connect(dsn, autocommit=True) as conn:
            reembed(conn, HashEmbeddings(dims))
        assert ("embedding_half" in _search_index(dsn)) is carried
        with MemoryService(dsn, embeddings=HashEmbeddings(dims)) as memory:
            got = memory.for_user("u1").search("hiking plan", k=4)
            with exhaustive():
                want = memory.for_user("u1").search("hiking plan", k=4)
            assert len(got) == 4 and _answer(got) == _answer(want)
            assert memory.for_user("u1").find_duplicate(got[0].content).id == got[0].item.id
