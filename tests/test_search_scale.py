"""Search at scale (migration ``0010_search_at_scale``), from the outside: the 64-bit keys, the
``memory_terms`` side table under every write path, the indexed search against the exhaustive
scan for team, org, shared-project and session callers, and tenancy on the indexed read path.

The reference answer is the exhaustive statement (every visible row a candidate), as in
``test_search_indexes.py``; which rows a caller may see is computed here in Python from what
the fixture wrote and whom it made a member, independently of the library's SQL.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
import pytest

from agent_memory import MemoryService, queries
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.models import MemoryItem
from agent_memory.ops import NewMemory
from agent_memory.testing import ScriptedChatModel
from identity_args import split_ids
from search_reference import exhaustive, terms_diff
from search_reference import texts as sentences

TYPES = ["fact", "preference", "decision", "event"]
QUERIES = ["what do we do on weekends?", "kubernetes release deadline", "money, budget and taxes",
           "coffee before noon"]


def answer(results) -> list[tuple[UUID, float, float]]:
    return [(r.item.id, round(r.score, 9), round(r.keyword, 9)) for r in results]


def search_both(service: MemoryService, query: str, **kwargs: Any) -> tuple[list, list]:
    ids, rest = split_ids(kwargs)
    got = service.for_user(**ids).search(query, **rest)
    with exhaustive():
        want = service.for_user(**ids).search(query, **rest)
    return got, want


# --- the world: members of several teams and orgs, shared projects, another tenant ----------


@dataclass(frozen=True)
class Row:
    owner: str
    scope: str
    scope_id: str
    visibility: str
    memory_type: str


@dataclass
class World:
    u: dict[str, str]
    s: dict[str, str]
    session: str
    rows: dict[UUID, Row] = field(default_factory=dict)
    members: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    shares: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

    def sees(self, ids: dict[str, Any], row: Row) -> bool:
        """The documented tenancy rule, written out here rather than taken from the library."""
        user = ids["user_id"]
        if row.scope == "user":
            return row.scope_id == user
        if row.scope == "session":
            return row.scope_id == ids.get("session_id") and row.owner == user
        if row.scope == "project":
            if row.scope_id != ids.get("project_id"):
                return False
            if user in self.members.get(("project", row.scope_id), set()):
                return row.visibility != "owner_only" or row.owner == user
            granted = any((kind == "user" and grantee == user) or user in self.members.get((kind, grantee), set())
                          for kind, grantee in self.shares.get(row.scope_id, set()))
            return granted and row.visibility == "public"
        named = ids.get(f"{row.scope}_id")
        if named is not None and row.scope_id != named:
            return False
        if user not in self.members.get((row.scope, row.scope_id), set()):
            return False
        return row.visibility != "owner_only" or row.owner == user

    def visible(self, ids: dict[str, Any], *, scope: Any = None, memory_type: Any = None) -> set[UUID]:
        scopes = None if scope is None else {scope} if isinstance(scope, str) else set(scope)
        types = None if memory_type is None else {memory_type} if isinstance(memory_type, str) else set(memory_type)
        return {i for i, r in self.rows.items() if self.sees(ids, r)
                and (scopes is None or r.scope in scopes) and (types is None or r.memory_type in types)}


@pytest.fixture(scope="module")
def world(memory: MemoryService) -> World:
    """alice owns P (bob edits it) and is a member of teams T1 (bob leads) and T2 (carol leads)
    and of org O (carol admin); carol's P2 is shared with team T1 and her P4 with org O. alice and
    bob use the same session id. eve is another tenant (T3, O2, PE) holding alice's very
    sentences; she is never made a member of anything of theirs."""
    tag = uuid.uuid4().hex[:8]
    u = {n: f"{n}-{tag}" for n in ("alice", "bob", "carol", "eve")}
    s = {n: f"{n}-{tag}" for n in ("P", "P2", "P4", "PE", "T1", "T2", "T3", "O", "O2")}
    w = World(u=u, s=s, session=f"shared-session-{tag}")

    def scope(kind: str, sid: str, founder: str, *others: tuple[str, str]) -> None:
        create = {"project": memory.create_project, "team": memory.create_team, "org": memory.create_org}[kind]
        create(s[sid], user_id=u[founder])
        w.members[(kind, s[sid])] = {u[founder]}
        for who, role in others:
            memory.add_member(kind, s[sid], u[who], role, user_id=u[founder])
            w.members[(kind, s[sid])].add(u[who])

    scope("project", "P", "alice", ("bob", "editor"))
    scope("project", "P2", "carol")
    scope("project", "P4", "carol")
    scope("project", "PE", "eve")
    scope("team", "T1", "bob", ("alice", "member"))
    scope("team", "T2", "carol", ("alice", "member"))
    scope("team", "T3", "eve")
    scope("org", "O", "carol", ("alice", "member"))
    scope("org", "O2", "eve")
    memory.share_project(s["P2"], user_id=u["carol"], with_team=s["T1"])
    memory.share_project(s["P4"], user_id=u["carol"], with_org=s["O"])
    w.shares = {s["P2"]: {("team", s["T1"])}, s["P4"]: {("org", s["O"])}}

    rng = random.Random(29)
    written: dict[str, list[str]] = {}

    def put(who: str, level: str, n: int, *, visibility: str = "members", texts: list[str] | None = None,
            **ids: str) -> None:
        texts = texts if texts is not None else sentences(rng, f"{who} {level} {visibility}", n)
        written.setdefault(who, []).extend(texts)
        types = [rng.choice(TYPES) for _ in texts]
        report = memory.for_user(u[who], **ids).add_many([NewMemory(content=t, scope=level, visibility=visibility, memory_type=ty,
                       confidence=round(rng.uniform(0.7, 1.0), 3)) for t, ty in zip(texts, types)])
        assert not report.rejected and len(report.inserted) == len(texts)
        scope_id = {"user": u[who], "session": ids.get("session_id"), "project": ids.get("project_id"),
                    "team": ids.get("team_id"), "org": ids.get("org_id")}[level]
        for memory_id, ty in zip(report.inserted, types):
            w.rows[memory_id] = Row(u[who], level, scope_id, visibility, ty)

    put("alice", "user", 30)
    put("alice", "session", 12, session_id=w.session)
    put("bob", "session", 12, session_id=w.session)  # same session id, another user
    put("alice", "session", 6, session_id=f"other-session-{tag}")  # the same user, another session
    put("alice", "project", 25, project_id=s["P"])
    put("alice", "project", 6, visibility="owner_only", project_id=s["P"])
    put("bob", "project", 10, visibility="owner_only", project_id=s["P"])
    put("bob", "project", 8, visibility="public", project_id=s["P"])
    put("bob", "team", 25, team_id=s["T1"])
    put("bob", "team", 8, visibility="owner_only", team_id=s["T1"])
    put("alice", "team", 4, visibility="owner_only", team_id=s["T1"])
    put("carol", "team", 20, team_id=s["T2"])
    put("carol", "org", 20, org_id=s["O"])
    put("carol", "org", 5, visibility="owner_only", org_id=s["O"])
    put("carol", "project", 12, visibility="public", project_id=s["P2"])
    put("carol", "project", 12, project_id=s["P2"])
    put("carol", "project", 10, visibility="public", project_id=s["P4"])
    put("carol", "project", 10, project_id=s["P4"])
    # eve: the same sentences as alice's, in her own scopes
    alice_texts = written["alice"]
    put("eve", "user", 0, texts=alice_texts[:30])
    put("eve", "project", 0, texts=alice_texts[30:60], project_id=s["PE"])
    put("eve", "team", 0, texts=alice_texts[60:], team_id=s["T3"])
    put("eve", "org", 0, texts=alice_texts[:20], org_id=s["O2"])
    return w


def callers(w: World) -> dict[str, dict[str, Any]]:
    u, s = w.u, w.s
    return {
        "alice-all-levels": dict(user_id=u["alice"], project_id=s["P"], session_id=w.session),
        "alice-team-T1-org-O": dict(user_id=u["alice"], team_id=s["T1"], org_id=s["O"]),
        "alice-team-T2": dict(user_id=u["alice"], team_id=s["T2"], session_id=w.session),
        "alice-shared-via-team": dict(user_id=u["alice"], project_id=s["P2"]),
        "alice-shared-via-org": dict(user_id=u["alice"], project_id=s["P4"], org_id=s["O"]),
        "bob-same-session": dict(user_id=u["bob"], project_id=s["P"], session_id=w.session),
        "carol": dict(user_id=u["carol"], project_id=s["P2"]),
        "eve-naming-their-ids": dict(user_id=u["eve"], project_id=s["P"], session_id=w.session,
                                     team_id=s["T1"], org_id=s["O"]),
    }


class RememberedQueries(LocalEmbeddings):
    """The local model (shared with the session's), remembering the queries it embedded: the
    comparisons below ask the same few queries hundreds of times."""

    def __init__(self) -> None:
        super().__init__()
        self._queries: dict[str, list[float]] = {}

    def embed_query(self, text: str) -> list[float]:
        if text not in self._queries:
            self._queries[text] = super().embed_query(text)
        return list(self._queries[text])


@pytest.fixture(scope="module")
def small_pool(memory: MemoryService) -> Iterator[MemoryService]:
    """The session's database with ``candidate_pool=1`` (the indexed search's widest estimate
    window is then ``k + 1`` rows) and room for ``k`` up to 1,000."""
    config = memory.config.replace(candidate_pool=1, max_k=1000)
    with MemoryService(memory.conn, config=config, embeddings=RememberedQueries()) as service:
        yield service


@pytest.fixture(scope="module")
def default_pool(memory: MemoryService) -> Iterator[MemoryService]:
    with MemoryService(memory.conn, config=memory.config, embeddings=RememberedQueries()) as service:
        yield service


# --- 1. the 64-bit keys ---------------------------------------------------------------------


def test_python_key_equals_sql_key_for_many_strings(dsn, memory):
    rng = random.Random(5)
    values = [
        "", " ", "a", "A", "b", "user", "user1", "user2", "users", "proj-a", "proj-b", "proj-a/x", "proj-a/y",
        "é", "e\u0301",  # precomposed and combining: distinct strings, distinct bytes, distinct keys
        "Zoë", "Straße", "STRASSE", "東京", "東京都", "Привет", "مرحبا", "🙂", "🙂🙂", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "\U0001F469\u200d\U0001F467",  # a ZWJ sequence
        "a" * 256, "a" * 255 + "b", "x" * 10_000, "x" * 9_999 + "y", "🙂" * 500, "tab\tnew\nline", "'\";--",
        "\\backslash\\", "%_like_%",
    ] + ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzé東🙂-/.") for _ in range(rng.randint(1, 40)))
         for _ in range(200)]
    values = list(dict.fromkeys(values))
    with psycopg.connect(dsn) as conn:
        sql_keys = dict(conn.execute("SELECT v, agent_memory_key(v) FROM unnest(%s::text[]) AS v", (values,)))
        assert conn.execute("SELECT agent_memory_key(NULL)").fetchone()[0] is None
    mismatched = [(v[:40], sql_keys[v], queries.scope_key(v)) for v in values if sql_keys[v] != queries.scope_key(v)]
    assert not mismatched
    keys = [queries.scope_key(v) for v in values]
    assert len(set(keys)) == len(values)  # no two of these strings (many one character apart) share a key
    assert all(-(2 ** 63) <= k < 2 ** 63 for k in keys)
    assert min(keys) < 0 < max(keys)  # both halves of the md5 range, so the sign is read the same way


def test_key_columns_at_every_level_with_unicode_ids(dsn, memory):
    """Stored keys equal the Python keys of the stored ids, and a search with the ids finds the
    rows through them; a project id given in full-width letters is stored (and keyed) in NFKC."""
    tag = uuid.uuid4().hex[:6]
    user, lead = f"Zoë 🙂 {tag}", f"Łukasz-東京-{tag}"
    wide = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in f"proj{tag}")
    project, team, org, session = f"proj{tag}", f"équipe-東京-{tag}", f"org-straße-{tag}", f"séance 🙂 {tag}"
    memory.create_team(team, user_id=lead)
    memory.add_member("team", team, user, "member", user_id=lead)
    memory.create_org(org, user_id=user)
    ids = dict(user_id=user, project_id=wide, session_id=session, team_id=team, org_id=org)
    made = {}
    for level, text in (("user", "Zoë waters the ferns every Sunday"),
                        ("session", "In this session we compare two espresso grinders"),
                        ("project", "The staging cluster for the Kyoto launch runs in Osaka"),
                        ("team", "The team retro is on the first Monday of each month"),
                        ("org", "Travel expenses are filed in the finance portal within 30 days")):
        item = memory.for_user(**ids).add(text, scope=level)
        assert isinstance(item, MemoryItem), item
        made[level] = item
    assert made["project"].scope_id == project  # NFKC
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT scope, scope_id, user_id, scope_key, owner_key FROM memory_items"
                            " WHERE id = ANY(%s)", ([i.id for i in made.values()],)).fetchall()
        terms = conn.execute("SELECT DISTINCT t.id, t.scope_key, t.owner_key FROM memory_terms t"
                             " WHERE t.id = ANY(%s)", ([i.id for i in made.values()],)).fetchall()
    assert {r[0] for r in rows} == set(made)
    for level, scope_id, user_id, scope_key, owner_key in rows:
        assert (scope_key, owner_key) == (queries.scope_key(scope_id), queries.scope_key(user_id)), level
    by_id = {i.id: i for i in made.values()}
    assert len(terms) == 5
    for memory_id, scope_key, owner_key in terms:
        item = by_id[memory_id]
        assert (scope_key, owner_key) == (queries.scope_key(item.scope_id), queries.scope_key(item.user_id))
    # the indexed search reaches each level by those keys, whichever spelling of the project is used
    for spelling in (wide, project):
        for level, item in made.items():
            hits = memory.for_user(**dict(ids, project_id=spelling)).search(item.content, k=1, scope=level)
            assert [h.id for h in hits] == [item.id], (level, spelling)


# --- 2. memory_terms stays equal to what memory_items says -----------------------------------

def assert_terms_true(dsn: str, step: str) -> None:
    diff = terms_diff(dsn)
    assert not diff, f"memory_terms differs from memory_items after {step}: {diff}"


def postings(dsn: str, memory_id: UUID) -> list[tuple]:
    """(ctid, lexeme, tf, visibility, memory_type) of one memory's rows in memory_terms."""
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT ctid::text, lexeme, tf, visibility, memory_type FROM memory_terms"
                            " WHERE id = %s ORDER BY lexeme", (memory_id,)).fetchall()


def test_memory_terms_through_writes_at_every_level(dsn, memory):
    tag = uuid.uuid4().hex[:8]
    alice, bob, carol = f"t-alice-{tag}", f"t-bob-{tag}", f"t-carol-{tag}"
    team, org, project = f"t-team-{tag}", f"t-org-{tag}", f"t-proj-{tag}"
    memory.create_team(team, user_id=bob)
    memory.add_member("team", team, alice, "member", user_id=bob)
    memory.create_org(org, user_id=carol)
    memory.add_member("org", org, alice, "member", user_id=carol)
    memory.create_project(project, user_id=alice)
    me = dict(user_id=alice, project_id=project, session_id=f"t-sess-{tag}", team_id=team)
    assert_terms_true(dsn, "setup")

    repeated = memory.for_user(**me).add("Deploy, deploy, deploy: the deploy script runs nightly")
    assert dict((lex, tf) for _, lex, tf, _, _ in postings(dsn, repeated.id))["deploy"] == 4
    mine = memory.for_user(**me).add("Alice keeps the team's release checklist in the wiki", scope="team", visibility="owner_only")
    public = memory.for_user(**me).add("The project roadmap is reviewed every quarter", scope="project", visibility="public")
    session = memory.for_user(**me).add("During this call we picked the blue color scheme", scope="session")
    org_rule = memory.for_user(carol, org_id=org).add("All contracts need two signatures before sending", scope="org")
    stop_words = memory.for_user(**me).add("It is what it is, and that is that")
    assert isinstance(stop_words, MemoryItem) and postings(dsn, stop_words.id) == []
    assert_terms_true(dsn, "saves at the user, team, project, session and org levels")
    assert {p[3] for p in postings(dsn, mine.id)} == {"owner_only"}
    assert {p[3] for p in postings(dsn, public.id)} == {"public"}

    again = memory.for_user(**me).add("Alice keeps the team's release checklist in the wiki", scope="team", visibility="owner_only")
    assert again.deduplicated and again.id == mine.id
    assert_terms_true(dsn, "a save answered by a duplicate")

    # the last one repeats `mine` at its own visibility (owner_only): a duplicate of a stored row
    report = memory.for_user(**me).add_many([NewMemory(content=t, scope=lvl, visibility=vis) for t, lvl, vis in (
        ("The sprint demo is on Thursdays", "team", "members"),
        ("The sprint demo is on Thursdays", "team", "members"),
        ("Backups run at 3 am", "project", "members"),
        ("Alice keeps the team's release checklist in the wiki", "team", "owner_only"))], dedupe=True)
    assert len(report.inserted) == 2 and len(report.duplicates) == 2
    assert_terms_true(dsn, "an import with duplicates")

    before = postings(dsn, repeated.id)
    hits = memory.for_user(**me).search("deploy script", k=3)
    assert repeated.id in {h.id for h in hits}
    assert postings(dsn, repeated.id) == before  # recording a hit's use rewrites nothing here
    memory.for_user(**me).edit(repeated.id, confidence=0.8)
    assert postings(dsn, repeated.id) == before  # nor does a change of confidence
    assert_terms_true(dsn, "a search and a confidence edit")

    memory.for_user(**me).edit(repeated.id, memory_type="habit")
    assert {p[4] for p in postings(dsn, repeated.id)} == {"habit"}
    memory.for_user(**me).edit(mine.id, content="Alice keeps the team's release checklist in the handbook")
    assert "handbook" in {p[1] for p in postings(dsn, mine.id)}
    memory.for_user(bob, team_id=team).edit(report.inserted[0], content="The sprint demo moved to Fridays")  # the lead edits a member's memory
    assert "friday" in {p[1] for p in postings(dsn, report.inserted[0])}
    memory.for_user(**me).edit(stop_words.id, content="It is what it is, said the plumber")
    assert [p[1] for p in postings(dsn, stop_words.id)] == ["plumber", "said"]
    assert_terms_true(dsn, "edits of type and of content (by the owner and by a team lead)")

    with psycopg.connect(dsn) as conn:  # no API changes visibility; an operator's UPDATE must still be followed
        conn.execute("UPDATE memory_items SET visibility = 'members' WHERE id = %s", (public.id,))
    assert {p[3] for p in postings(dsn, public.id)} == {"members"}
    assert_terms_true(dsn, "a visibility change")

    memory.for_user(**me).delete(session.id)
    assert postings(dsn, session.id) == []
    memory.for_user(carol, org_id=org).delete(org_rule.id)
    assert_terms_true(dsn, "archiving")
    memory.for_user(**me).restore(session.id)
    assert postings(dsn, session.id) != []
    assert_terms_true(dsn, "a restore")

    # extraction: the offline rules supersede, a scripted model updates in place
    memory.for_user(**me).add("Uses Vim as their editor.")
    switched = memory.for_user(**me).extract(["I switched from Vim to VS Code."], llm=None)
    [sup] = switched.superseded
    assert postings(dsn, sup.replaced.id) == [] and postings(dsn, sup.memory.id) != []
    assert_terms_true(dsn, "a supersession by extraction")
    memory.for_user(**me).add("Prefers short answers.", memory_type="preference")
    llm = ScriptedChatModel(structured={
        "ExtractedMemories": [{"memories": [{"content": "Prefers short answers with Rust examples.",
                                             "memory_type": "preference", "scope": "user", "confidence": 0.95}]}],
        "ConsolidationDecisions": [{"decisions": [{"proposal": 1, "decision": "UPDATE", "target": "M1",
                                                   "content": "Prefers short answers with Rust code examples.",
                                                   "reason": "more detail"}]}],
        "UserProfileUpdate": [{"frequently_used_tools": []}], "ProjectProfileUpdate": [{}]})
    updated = memory.for_user(**me).extract(["Short answers please, with Rust."], llm=llm)
    [upd] = updated.updated
    assert "rust" in {p[1] for p in postings(dsn, upd.memory.id)}
    assert_terms_true(dsn, "an update by extraction")

    memory.for_user(**me).delete(report.inserted[0], hard=True)
    memory.for_user(**me).delete(repeated.id)
    assert memory.for_user(**me).purge_archived() >= 1
    assert_terms_true(dsn, "a hard delete and a purge")

    # erasure and re-import of everything alice owns (archived and superseded rows included)
    memory.for_user(**me).delete(public.id)
    exported = memory.export_data(user_id=alice, what="owned")
    statuses = {m["status"] for m in exported["memories"]}
    assert {"active", "superseded", "archived"} <= statuses
    memory.forget_user(user_id=alice)
    with psycopg.connect(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM memory_terms WHERE owner_key = %s",
                            (queries.scope_key(alice),)).fetchone()[0]
    assert left == 0
    assert postings(dsn, mine.id) == [] and postings(dsn, org_rule.id) == []  # archived: carol's stays out
    assert_terms_true(dsn, "forget_user")
    memory.import_data(exported, as_operator=True)
    assert_terms_true(dsn, "import_data of the export")
    assert postings(dsn, sup.replaced.id) == [] and postings(dsn, sup.memory.id) != []

    memory.delete_scope("team", team, user_id=bob)
    memory.delete_scope("org", org, user_id=carol)
    assert_terms_true(dsn, "deleting a team and an org")
    with psycopg.connect(dsn) as conn:
        for level, sid in (("team", team), ("org", org)):
            n = conn.execute("SELECT count(*) FROM memory_terms WHERE scope = %s AND scope_key = %s",
                             (level, queries.scope_key(sid))).fetchone()[0]
            assert n == 0, level


# --- 3. the indexed search equals the exhaustive one ----------------------------------------

FILTERS = {
    "no-filter": {},
    "team": dict(scope="team"),
    "org": dict(scope="org"),
    "team-and-org": dict(scope=["team", "org"]),
    "project": dict(scope="project"),
    "session": dict(scope="session"),
    "types": dict(memory_type=["decision", "event"]),
    "type-and-levels": dict(memory_type="preference", scope=["team", "user", "session"]),
    "floor-0.3": dict(min_relevance=0.3),
    "floor-0.45-shared-levels": dict(min_relevance=0.45, scope=["org", "project", "team"]),
}


@pytest.mark.parametrize("name", list(FILTERS))
def test_indexed_search_equals_exhaustive_for_every_caller(world, small_pool, default_pool, name):
    """With ``candidate_pool`` 1 and the default 50: the pool only widens the window of estimates
    the indexed search reads in its first pass, never the answer."""
    filters = FILTERS[name]
    found = 0
    for who, ids in callers(world).items():
        for query in QUERIES:
            for k in (1, 6, 20):
                with exhaustive():
                    want = small_pool.for_user(**ids).search(query, k=k, **filters)
                for service in (small_pool, default_pool):
                    got = service.for_user(**ids).search(query, k=k, **filters)
                    assert answer(got) == answer(want), (who, query, k, service.config.candidate_pool)
                    visible = world.visible(ids, scope=filters.get("scope"), memory_type=filters.get("memory_type"))
                    assert {r.id for r in got} <= visible, (who, query)
                    floor = filters.get("min_relevance", 0.0)
                    kw = service.config.keyword_weight
                    if floor:
                        assert all((1 - kw) * r.similarity + kw * r.keyword >= floor - 1e-9 for r in got)
                    else:
                        assert len(got) == min(k, len(visible)), (who, query, k)
                    found += len(got)
    assert found


def test_min_relevance_cuts_and_stays_exact(world, small_pool):
    """Floors from none to above every row: the answer shrinks, and is always the exact one."""
    ids = callers(world)["alice-all-levels"]
    sizes = []
    for floor in (0.0, 0.2, 0.35, 0.5, 0.65, 0.99):
        got, want = search_both(small_pool, "kubernetes release deadline", k=40, min_relevance=floor, **ids)
        assert answer(got) == answer(want), floor
        sizes.append(len(got))
    assert sizes[0] == 40 and sizes[-1] == 0 and sizes == sorted(sizes, reverse=True)
    assert len(set(sizes)) >= 4, sizes  # the floors in between do cut


@pytest.mark.parametrize("scope", [None, "team", "org", "project", "session", ["user", "team"]], ids=str)
def test_k_beyond_the_visible_rows_returns_all_of_them(world, small_pool, scope):
    for who, ids in callers(world).items():
        visible = world.visible(ids, scope=scope)
        got, want = search_both(small_pool, "weekend plan", k=len(visible) + 7, scope=scope, **ids)
        assert answer(got) == answer(want), who
        assert {r.id for r in got} == visible, who
    typed = callers(world)["alice-all-levels"]
    got, want = search_both(small_pool, "deadline", k=500, memory_type=["event", "fact"], **typed)
    assert answer(got) == answer(want)
    assert {r.id for r in got} == world.visible(typed, memory_type=["event", "fact"])


def test_vector_only_search_is_exact_for_team_and_org_callers(world, small_pool):
    config = small_pool.config.replace(keyword_weight=0.0)
    with MemoryService(small_pool.conn, config=config, embeddings=small_pool.embeddings) as vector_only:
        for who in ("alice-all-levels", "alice-team-T1-org-O", "alice-shared-via-org", "bob-same-session"):
            for query in QUERIES:
                got, want = search_both(vector_only, query, k=8, **callers(world)[who])
                assert answer(got) == answer(want), (who, query)
                assert all(r.keyword == 0 for r in got)


@pytest.fixture(scope="module")
def keyword_corpus(memory: MemoryService) -> dict[str, Any]:
    """A team of 150 everyday memories and 6 that hold two rare words in unrelated sentences."""
    tag = uuid.uuid4().hex[:8]
    lead, member, team = f"kw-lead-{tag}", f"kw-member-{tag}", f"kw-team-{tag}"
    memory.create_team(team, user_id=lead)
    memory.add_member("team", team, member, "member", user_id=lead)
    rng = random.Random(11)
    plain = [NewMemory(content=t, scope="team", confidence=0.9) for t in sentences(rng, "kw", 150)]
    rare = [NewMemory(content=t, scope="team", confidence=0.75) for t in (
        "Invoice 4471 lists the quokka figurines and the zeppelin model",
        "The quokka mascot costume goes back to storage",
        "Zeppelin hangar tour: tickets in the shared drive",
        "Quokka, quokka, quokka: the mascot vote ended in a tie",
        "Warehouse inventory shows 12 zeppelin kits",
        "Accounting flagged the quokka zeppelin order twice")]
    report = memory.for_user(lead, team_id=team).add_many(plain + rare)
    assert not report.rejected
    return {"ids": dict(user_id=member, team_id=team), "rare": set(report.inserted[len(plain):]),
            "query": "quokka zeppelin: what do we do on weekends?"}


def test_keyword_rows_outside_the_vector_pool_are_found(keyword_corpus, small_pool):
    """With ``candidate_pool=1`` the rare-word rows are far outside the vector ranking's first
    ``k + pool``; the hybrid search still finds them, exactly as the exhaustive scan does."""
    ids, rare, query = keyword_corpus["ids"], keyword_corpus["rare"], keyword_corpus["query"]
    config = small_pool.config.replace(keyword_weight=0.0)
    with MemoryService(small_pool.conn, config=config, embeddings=small_pool.embeddings) as vector_only:
        by_vector = [r.id for r in vector_only.for_user(**ids).search(query, k=156)]
    assert len(by_vector) == 156
    for k in (1, 3, 6, 10):
        outside = {i for i in rare if by_vector.index(i) >= k + 1}
        assert len(outside) >= 4, k  # the vector window (k + pool rows) misses them
        got, want = search_both(small_pool, query, k=k, **ids)
        assert answer(got) == answer(want), k
        assert {r.id for r in got} & outside, k  # and keyword evidence brings them in
        assert all(r.keyword > 0 for r in got if r.id in rare)


def test_stop_word_and_unknown_word_queries(world, small_pool):
    ids = callers(world)["alice-all-levels"]
    for query in ("what is it, and who is that?", "xyzzyplugh frobnicate", "'quoted' O'Brien's example.com/it's"):
        for k in (1, 9):
            got, want = search_both(small_pool, query, k=k, **ids)
            assert answer(got) == answer(want), query
            assert len(got) == k


# --- 4. tenancy on the indexed read path -----------------------------------------------------


def test_naming_scope_ids_without_membership_reads_nothing_of_them(world, small_pool):
    ids = callers(world)["eve-naming-their-ids"]
    eve = world.u["eve"]
    for query in QUERIES:
        got = small_pool.for_user(**ids).search(query, k=1000)
        assert got and {(r.item.user_id, r.item.scope) for r in got} == {(eve, "user")}
        for level in ("project", "team", "org", "session"):
            assert small_pool.for_user(**ids).search(query, k=50, scope=level) == []
    # the same shape of statement, just run for alice, does see those rows (the cache keeps no values)
    alice = dict(ids, user_id=world.u["alice"])
    assert {r.item.scope for r in small_pool.for_user(**alice).search("deadline", k=1000)} == {
        "user", "project", "session", "team", "org"}


def test_ids_equal_across_levels_never_mix(world, memory):
    """A user named like alice's project, a session named like her team: keys of equal strings
    are equal, so only the level keeps them apart."""
    s = world.s
    twin = memory.for_user(s["P"], session_id=s["T1"]).add("The twin user prefers window seats on trains")
    assert isinstance(twin, MemoryItem)
    memory.for_user(s["P"], session_id=s["T1"]).add("The twin user booked a session about trains", scope="session")
    for query in QUERIES + ["trains"]:
        got = memory.for_user(s["P"], session_id=s["T1"]).search(query, k=100)
        assert {r.item.user_id for r in got} == {s["P"]}, query
        assert {r.item.scope for r in got} <= {"user", "session"}


def test_another_tenant_with_the_same_words_changes_nothing(memory):
    """eve saves alice's sentences (and near copies) at every level of her own; alice's answers,
    keyword statistics included, are the same to the last digit, and never hold eve's rows."""
    tag = uuid.uuid4().hex[:8]
    alice, eve = f"iso-alice-{tag}", f"iso-eve-{tag}"
    rng = random.Random(17)
    texts = sentences(rng, "iso", 40)
    levels = {"user": {}, "project": {"project_id": f"iso-p-{tag}"}, "team": {"team_id": f"iso-t-{tag}"}}
    memory.create_team(levels["team"]["team_id"], user_id=alice)
    ids = dict(user_id=alice, **levels["project"], **levels["team"])
    for i, (level, extra) in enumerate(levels.items()):
        memory.for_user(alice, **extra).add_many([NewMemory(content=t, scope=level) for t in texts[i::3]])
    queries_ = QUERIES + ["quokka", "(iso 7)"]
    before = {q: answer(memory.for_user(**ids).search(q, k=12)) for q in queries_}

    eve_ids = dict(user_id=eve, project_id=f"iso-pe-{tag}", team_id=f"iso-te-{tag}")
    memory.create_team(eve_ids["team_id"], user_id=eve)
    for level in ("user", "project", "team"):
        memory.for_user(**eve_ids).add_many([NewMemory(content=t, scope=level) for t in texts]
                               + [NewMemory(content=t.replace("(", "[").replace(")", "]"), scope=level)
                                  for t in texts]
                               + [NewMemory(content=f"quokka {t}", scope=level) for t in texts])
    after = {q: answer(memory.for_user(**ids).search(q, k=12)) for q in queries_}
    assert after == before
    eve_rows = {r.id for q in queries_ for r in memory.for_user(**eve_ids).search(q, k=100)}
    assert eve_rows and not eve_rows & {a[0] for v in after.values() for a in v}
    # eve naming alice's project and team sees none of it
    for q in queries_:
        got = memory.for_user(eve, project_id=ids["project_id"], team_id=ids["team_id"]).search(q, k=100)
        assert {r.item.user_id for r in got} <= {eve} and {r.item.scope for r in got} <= {"user"}


def test_losing_membership_or_a_share_takes_effect_at_once(memory):
    tag = uuid.uuid4().hex[:8]
    frank, grace = f"rev-frank-{tag}", f"rev-grace-{tag}"
    team, project = f"rev-team-{tag}", f"rev-proj-{tag}"
    memory.create_team(team, user_id=frank)
    memory.add_member("team", team, grace, "member", user_id=frank)
    memory.create_project(project, user_id=frank)
    memory.share_project(project, user_id=frank, with_user=grace)
    memory.for_user(frank, team_id=team).add_many([NewMemory(content="The on-call rotation changes on Mondays", scope="team")])
    memory.for_user(frank, project_id=project).add_many([NewMemory(content="The launch checklist is public", scope="project", visibility="public"),
                            NewMemory(content="The launch budget is confidential", scope="project")])
    as_grace = dict(user_id=grace, project_id=project)
    seen = {r.content for r in memory.for_user(**as_grace).search("on-call launch budget checklist", k=10)}
    assert seen == {"The on-call rotation changes on Mondays", "The launch checklist is public"}
    memory.remove_member("team", team, grace, user_id=frank)
    memory.unshare_project(project, user_id=frank, with_user=grace)
    assert memory.for_user(**as_grace).search("on-call launch budget checklist", k=10) == []


def test_zero_similarity_weight_with_a_floor(world, small_pool):
    """``weight_similarity=0`` ranks by confidence and level alone; ``min_relevance`` still keeps
    only hits whose relevance, ``(1 - keyword_weight) * similarity + keyword_weight * keyword``,
    clears it (``ranking.rank``).

    Fails (library bug): ``queries.indexed_search`` estimates relevance as
    ``q_rel_vec * sim + (1 - q_rel_vec) * keyword`` with ``q_rel_vec = vector_weight /
    (vector_weight + keyword_weight)``; both are multiplied by ``weight_similarity``, so at 0 it
    falls back to 1.0 instead of ``1 - keyword_weight``. Rows whose similarity clears the floor
    but whose relevance does not then set the cut, the rows that do clear it fall below it, and
    the search answers nothing where the exhaustive scan answers k hits."""
    config = small_pool.config.replace(weight_similarity=0.0)
    assert 0 < config.keyword_weight < 1
    with MemoryService(small_pool.conn, config=config, embeddings=small_pool.embeddings) as service:
        ids = callers(world)["alice-all-levels"]
        for floor in (0.2, 0.3, 0.4):
            for query in QUERIES:
                got, want = search_both(service, query, k=5, min_relevance=floor, **ids)
                assert answer(got) == answer(want), (floor, query, len(got), len(want))
